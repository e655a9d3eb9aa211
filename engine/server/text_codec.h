// TextCodec: the text side of the server — chat rendering, prompt encoding, streaming
// detokenization and the markers that split reasoning and tool calls out of the output.
// TokenizerCodec wraps the model's tokenizer and chat format; ByteCodec (one token per byte)
// serves tests and benchmarks that need no tokenizer files.
// Thread-safety: codecs are immutable after construction and safe to share; a TokenStream is
// used by one request at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace spark::engine::server {

// Turns generated ids into text, holding back incomplete UTF-8 characters.
class TokenStream {
 public:
  virtual ~TokenStream() = default;
  virtual std::string Push(int32_t id) = 0;
  virtual std::string Flush() = 0;
};

class TextCodec {
 public:
  virtual ~TextCodec() = default;

  // Token ids of `text`; with add_special, the BOS the tokenizer config asks for.
  virtual std::vector<int32_t> Encode(std::string_view text, bool add_special) const = 0;
  // The chat prompt text. InvalidArgument for conversations the format cannot express.
  virtual Result<std::string> RenderChat(const tokenizer::ChatRequest& request) const = 0;
  virtual std::unique_ptr<TokenStream> NewStream() const = 0;
  // The text of one token (for logprobs).
  virtual std::string TokenText(int32_t id) const = 0;
  virtual const tokenizer::ChatMarkers& markers() const = 0;
  // What to append to a rendered chat prompt to force a tool call (tool_choice "required" or
  // a named function; see tokenizer::ChatFormat::ForcedToolCall).
  virtual tokenizer::ToolCallPrefill ForcedToolCall(const tokenizer::ChatRequest& request,
                                                    std::string_view function) const = 0;
  // Tokens that end a turn (EOS, <|im_end|>, ...): generation stops there, their text is not
  // sent.
  virtual const std::vector<int32_t>& stop_token_ids() const = 0;
  // The text of `ids` (special tokens included), for /detokenize.
  virtual std::string Decode(std::span<const int32_t> ids) const = 0;
  // Each token's bytes by id, for the grammar library: "" for added (control) tokens, except the
  // chat format's tool-call separator, which a forced call's grammar writes.
  virtual std::vector<std::string> GrammarTokens() const = 0;
  // The id of `text` when it encodes to exactly one token, else -1 (think markers).
  virtual int32_t SingleTokenId(std::string_view text) const = 0;
  // A special token (tokenizer.json's added_tokens with "special": true), whose text
  // skip_special_tokens drops.
  virtual bool IsSpecialToken(int32_t id) const = 0;
};

// One token per byte (ids 0-255), EOS = 256; vocab 257. The chat format is ChatML-like with
// Qwen3-style <think> and <tool_call> markers written as plain text.
class ByteCodec : public TextCodec {
 public:
  static constexpr int32_t kEos = 256;
  static constexpr int kVocabSize = 257;

  ByteCodec();
  std::vector<int32_t> Encode(std::string_view text, bool add_special) const override;
  Result<std::string> RenderChat(const tokenizer::ChatRequest& request) const override;
  std::unique_ptr<TokenStream> NewStream() const override;
  std::string TokenText(int32_t id) const override;
  const tokenizer::ChatMarkers& markers() const override { return markers_; }
  tokenizer::ToolCallPrefill ForcedToolCall(const tokenizer::ChatRequest& request,
                                            std::string_view function) const override;
  const std::vector<int32_t>& stop_token_ids() const override { return stop_ids_; }
  std::string Decode(std::span<const int32_t> ids) const override;
  std::vector<std::string> GrammarTokens() const override;
  int32_t SingleTokenId(std::string_view text) const override;
  bool IsSpecialToken(int32_t) const override { return false; }

 private:
  tokenizer::ChatMarkers markers_;
  std::vector<int32_t> stop_ids_;
};

// The model's tokenizer and chat format: `format_name` when given, else the one
// tokenizer_config.json's chat_template belongs to, else `fallback_format` (the model family's,
// when the template is missing or not one we recognise).
class TokenizerCodec : public TextCodec {
 public:
  // NotFound / InvalidArgument from the tokenizer files or an unknown chat format.
  static Result<std::unique_ptr<TokenizerCodec>> FromDir(const std::string& dir,
                                                         const std::string& format_name = "",
                                                         const std::string& fallback_format = "");

  std::vector<int32_t> Encode(std::string_view text, bool add_special) const override;
  Result<std::string> RenderChat(const tokenizer::ChatRequest& request) const override;
  std::unique_ptr<TokenStream> NewStream() const override;
  std::string TokenText(int32_t id) const override;
  const tokenizer::ChatMarkers& markers() const override { return format_->markers(); }
  tokenizer::ToolCallPrefill ForcedToolCall(const tokenizer::ChatRequest& request,
                                            std::string_view function) const override {
    return format_->ForcedToolCall(request, function);
  }
  const std::vector<int32_t>& stop_token_ids() const override { return stop_ids_; }
  std::string Decode(std::span<const int32_t> ids) const override;
  std::vector<std::string> GrammarTokens() const override;
  int32_t SingleTokenId(std::string_view text) const override;
  bool IsSpecialToken(int32_t id) const override { return tokenizer_.IsSpecial(id); }
  const tokenizer::Tokenizer& tokenizer() const { return tokenizer_; }
  // The chat format in use ("qwen3"); its markers are what the output parsers split on.
  std::string_view format_name() const { return format_->name(); }

 private:
  TokenizerCodec(tokenizer::Tokenizer tok, std::unique_ptr<tokenizer::ChatFormat> format);

  tokenizer::Tokenizer tokenizer_;
  std::unique_ptr<tokenizer::ChatFormat> format_;
  std::vector<int32_t> stop_ids_;
};

}  // namespace spark::engine::server
