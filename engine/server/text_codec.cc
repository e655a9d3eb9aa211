#include "engine/server/text_codec.h"

#include <algorithm>

#include "base/logging.h"
#include "engine/tokenizer/stream_decoder.h"

namespace spark::engine::server {
namespace {

// Bytes pass straight through; the EOS id has no text.
class ByteStream : public TokenStream {
 public:
  std::string Push(int32_t id) override {
    if (id < 0 || id > 255) return "";
    pending_.push_back(static_cast<char>(id));
    // Emit up to the last complete UTF-8 character.
    size_t keep = IncompleteTail(pending_);
    std::string out = pending_.substr(0, pending_.size() - keep);
    pending_.erase(0, pending_.size() - keep);
    return out;
  }
  std::string Flush() override { return std::exchange(pending_, std::string()); }

 private:
  // Bytes at the end of `s` that start a UTF-8 character not yet complete.
  static size_t IncompleteTail(const std::string& s) {
    for (size_t back = 1; back <= std::min<size_t>(3, s.size()); ++back) {
      const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
      if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
      const size_t need = (c & 0xE0) == 0xC0   ? 2
                          : (c & 0xF0) == 0xE0 ? 3
                          : (c & 0xF8) == 0xF0 ? 4
                                               : 1;
      return need > back ? back : 0;
    }
    return 0;
  }
  std::string pending_;
};

class TokenizerStream : public TokenStream {
 public:
  explicit TokenizerStream(const tokenizer::Tokenizer& tok) : decoder_(tok) {}
  std::string Push(int32_t id) override { return decoder_.Push(id); }
  std::string Flush() override { return decoder_.Flush(); }

 private:
  tokenizer::StreamDecoder decoder_;
};

std::string ArgumentsText(const tokenizer::ToolCall& call) {
  return call.arguments.is_string() ? call.arguments.get<std::string>() : call.arguments.dump();
}

void RenderByteMessage(const tokenizer::ChatMessage& m, std::string& out) {
  out += "<|im_start|>" + m.role + "\n";
  if (m.role == "tool") out += "<tool_response>\n";
  out += m.content.value_or("");
  if (m.role == "tool") out += "\n</tool_response>";
  for (const tokenizer::ToolCall& call : m.tool_calls) {
    out += "<tool_call>\n{\"name\": \"" + call.name + "\", \"arguments\": " + ArgumentsText(call) +
           "}\n</tool_call>";
  }
  out += "<|im_end|>\n";
}

}  // namespace

ByteCodec::ByteCodec()
    : markers_{{}, "<think>", "</think>", "", "", "<tool_call>", "</tool_call>", ""},
      stop_ids_{kEos} {}

// As the Qwen3 format: no empty think block (the byte format has no thinking switch to honour).
tokenizer::ToolCallPrefill ByteCodec::ForcedToolCall(const tokenizer::ChatRequest&,
                                                     std::string_view function) const {
  tokenizer::ToolCallPrefill p;
  p.markup = "<tool_call>\n{\"name\": \"";
  p.name_suffix = "\", \"arguments\": ";
  if (!function.empty()) p.markup += std::string(function) + p.name_suffix;
  p.arguments_suffix = "}";
  p.closing = "\n</tool_call>";
  return p;
}

std::vector<int32_t> ByteCodec::Encode(std::string_view text, bool) const {
  std::vector<int32_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

Result<std::string> ByteCodec::RenderChat(const tokenizer::ChatRequest& request) const {
  std::string out;
  if (!request.tools.empty())
    out += "<|im_start|>system\n<tools>" + request.tools.dump() + "</tools><|im_end|>\n";
  for (const tokenizer::ChatMessage& m : request.messages) RenderByteMessage(m, out);
  if (request.add_generation_prompt) {
    out += "<|im_start|>assistant\n";
    const auto& kw = request.template_kwargs;
    const bool off = (kw.contains("enable_thinking") && kw["enable_thinking"] == false) ||
                     (kw.contains("thinking") && kw["thinking"] == false);
    if (off) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::unique_ptr<TokenStream> ByteCodec::NewStream() const { return std::make_unique<ByteStream>(); }

std::string ByteCodec::TokenText(int32_t id) const {
  if (id < 0 || id > 255) return "";
  return std::string(1, static_cast<char>(id));
}

std::string ByteCodec::Decode(std::span<const int32_t> ids) const {
  std::string out;
  for (int32_t id : ids) out += TokenText(id);
  return out;
}

std::vector<std::string> ByteCodec::GrammarTokens() const {
  std::vector<std::string> tokens(kVocabSize);
  for (int b = 0; b < 256; ++b) tokens[b] = std::string(1, static_cast<char>(b));
  return tokens;  // EOS (256) stays "": a control token.
}

int32_t ByteCodec::SingleTokenId(std::string_view text) const {
  return text.size() == 1 ? static_cast<unsigned char>(text[0]) : -1;
}

Result<std::unique_ptr<TokenizerCodec>> TokenizerCodec::FromDir(const std::string& dir,
                                                                const std::string& format_name,
                                                                const std::string& fallback_format) {
  SPARK_ASSIGN_OR_RETURN(tokenizer::Tokenizer tok, tokenizer::Tokenizer::FromDir(dir));
  std::string name = format_name;
  if (name.empty()) {
    Result<std::string> detected = tokenizer::DetectChatFormat(tok.chat_template());
    if (detected.ok()) {
      name = *detected;
    } else if (!fallback_format.empty()) {
      name = fallback_format;
      Logger("engine.server")
          ->info("chat format {} (the model family's: {})", name, detected.status().message());
    } else {
      return detected.status();
    }
  }
  std::string bos;
  if (tok.bos_id()) bos = tok.IdToToken(*tok.bos_id()).value_or("");
  SPARK_ASSIGN_OR_RETURN(auto format, tokenizer::MakeChatFormat(name, bos));
  return std::unique_ptr<TokenizerCodec>(new TokenizerCodec(std::move(tok), std::move(format)));
}

TokenizerCodec::TokenizerCodec(tokenizer::Tokenizer tok,
                               std::unique_ptr<tokenizer::ChatFormat> format)
    : tokenizer_(std::move(tok)), format_(std::move(format)) {
  if (tokenizer_.eos_id()) stop_ids_.push_back(*tokenizer_.eos_id());
  for (const std::string& s : format_->markers().stop_tokens) {
    std::optional<int32_t> id = tokenizer_.TokenToId(s);
    if (id && std::find(stop_ids_.begin(), stop_ids_.end(), *id) == stop_ids_.end()) {
      stop_ids_.push_back(*id);
    }
  }
}

std::vector<int32_t> TokenizerCodec::Encode(std::string_view text, bool add_special) const {
  return tokenizer_.Encode(text, add_special);
}

Result<std::string> TokenizerCodec::RenderChat(const tokenizer::ChatRequest& request) const {
  return format_->Render(request);
}

std::unique_ptr<TokenStream> TokenizerCodec::NewStream() const {
  return std::make_unique<TokenizerStream>(tokenizer_);
}

std::string TokenizerCodec::TokenText(int32_t id) const {
  const int32_t one[] = {id};
  return tokenizer_.Decode(one);
}

std::string TokenizerCodec::Decode(std::span<const int32_t> ids) const {
  return tokenizer_.Decode(ids);
}

std::vector<std::string> TokenizerCodec::GrammarTokens() const {
  const std::string& sep = format_->markers().tool_sep;
  std::vector<std::string> tokens(tokenizer_.vocab_size());
  for (int32_t id = 0; id < tokenizer_.vocab_size(); ++id) {
    if (!tokenizer_.IsValidId(id)) continue;
    if (tokenizer_.IsAdded(id)) {
      // Control tokens never appear inside grammar text, except the tool-call separator a
      // forced call's grammar writes after the function name.
      const std::optional<std::string> text = tokenizer_.IdToToken(id);
      if (!sep.empty() && text == sep) tokens[id] = sep;
      continue;
    }
    tokens[id] = tokenizer_.TokenBytes(id);
  }
  return tokens;
}

int32_t TokenizerCodec::SingleTokenId(std::string_view text) const {
  const std::vector<int32_t> ids = tokenizer_.Encode(text, false);
  return ids.size() == 1 ? ids[0] : -1;
}

}  // namespace spark::engine::server
