// `spark-engine tokenize`, `detokenize` and `render-chat`: the tokenizer and chat formats on
// the command line (stdin in, stdout out), for scripts, tests and checking a model directory.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/cli/engine_command.h"
#include "engine/tokenizer/chat_format.h"
#include "engine/tokenizer/tokenizer.h"

namespace spark::engine {
namespace {

using spark::tokenizer::Tokenizer;

std::string ReadStdin() {
  return std::string(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
}

void PrintIds(const std::vector<int32_t>& ids) {
  std::printf("%s\n", nlohmann::json(ids).dump().c_str());
}

Status RunTokenize(const std::string& dir, bool add_special) {
  SPARK_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromDir(dir));
  PrintIds(tok.Encode(ReadStdin(), add_special));
  return Status::Ok();
}

Result<std::vector<int32_t>> ParseIds(const std::string& text, const Tokenizer& tok) {
  const nlohmann::json ids = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (ids.is_discarded() || !ids.is_array()) {
    return InvalidArgumentError("stdin: expected a JSON array of token ids, e.g. [9707, 1879]");
  }
  std::vector<int32_t> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!ids[i].is_number_integer() || !tok.IsValidId(ids[i].get<int32_t>())) {
      return InvalidArgumentError("stdin: element " + std::to_string(i) + " (" + ids[i].dump() +
                                  ") is not a token id of this tokenizer (0.." +
                                  std::to_string(tok.vocab_size() - 1) + ")");
    }
    out.push_back(ids[i].get<int32_t>());
  }
  return out;
}

Status RunDetokenize(const std::string& dir) {
  SPARK_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromDir(dir));
  SPARK_ASSIGN_OR_RETURN(std::vector<int32_t> ids, ParseIds(ReadStdin(), tok));
  const std::string text = tok.Decode(ids);
  std::fwrite(text.data(), 1, text.size(), stdout);
  return Status::Ok();
}

struct RenderOptions {
  std::string dir;
  std::string format = "auto";
  bool ids = false;
};

Status RunRenderChat(const RenderOptions& options) {
  SPARK_ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::FromDir(options.dir));
  std::string name = options.format;
  if (name == "auto") {
    Result<std::string> detected = tokenizer::DetectChatFormat(tok.chat_template());
    if (!detected.ok()) return detected.status().WithContext(options.dir);
    name = *detected;
  }
  const std::string bos = tok.bos_id() ? tok.IdToToken(*tok.bos_id()).value_or("") : "";
  SPARK_ASSIGN_OR_RETURN(auto format, tokenizer::MakeChatFormat(name, bos));
  const auto body = nlohmann::ordered_json::parse(ReadStdin(), nullptr, false);
  if (body.is_discarded()) return InvalidArgumentError("stdin: not valid JSON");
  SPARK_ASSIGN_OR_RETURN(tokenizer::ChatRequest request, tokenizer::ParseChatRequest(body));
  SPARK_ASSIGN_OR_RETURN(std::string prompt, format->Render(request));
  if (options.ids) {
    PrintIds(tok.Encode(prompt));
  } else {
    std::fwrite(prompt.data(), 1, prompt.size(), stdout);
  }
  return Status::Ok();
}

void Finish(CommandContext& context, const Status& status) {
  context.exit_code = status.ok() ? kExitOk : ReportEngineError(status);
}

}  // namespace

void RegisterTokenizeCommand(CLI::App& parent, CommandContext& context) {
  auto* cmd = parent.add_subcommand("tokenize", "Print the token ids of UTF-8 text on stdin as a JSON array");
  auto dir = std::make_shared<std::string>();
  auto add_special = std::make_shared<bool>(false);
  cmd->add_option("--tokenizer", *dir, "Directory with tokenizer.json and tokenizer_config.json")
      ->required();
  cmd->add_flag("--add-special", *add_special,
                "Add the BOS/EOS tokens tokenizer_config.json asks for (default: none)");
  cmd->footer("\nExample:\n  echo -n 'Hello world' | spark-engine tokenize --tokenizer models/qwen3");
  cmd->callback([&context, dir, add_special] { Finish(context, RunTokenize(*dir, *add_special)); });
}

void RegisterDetokenizeCommand(CLI::App& parent, CommandContext& context) {
  auto* cmd = parent.add_subcommand("detokenize", "Print the text of a JSON array of token ids on stdin");
  auto dir = std::make_shared<std::string>();
  cmd->add_option("--tokenizer", *dir, "Directory with tokenizer.json and tokenizer_config.json")
      ->required();
  cmd->footer("\nExample:\n  echo '[9707, 1879]' | spark-engine detokenize --tokenizer models/qwen3");
  cmd->callback([&context, dir] { Finish(context, RunDetokenize(*dir)); });
}

void RegisterRenderChatCommand(CLI::App& parent, CommandContext& context) {
  auto* cmd = parent.add_subcommand(
      "render-chat", "Print the prompt of an OpenAI chat request on stdin, generation prompt included");
  auto options = std::make_shared<RenderOptions>();
  cmd->add_option("--tokenizer", options->dir,
                  "Directory with tokenizer.json and tokenizer_config.json")->required();
  cmd->add_option("--chat-format", options->format,
                  ChatFormatHelp("auto: from tokenizer_config.json's chat_template"))
      ->capture_default_str();
  cmd->add_flag("--ids", options->ids, "Print the prompt's token ids (JSON array) instead of text");
  cmd->footer(
      "\nExample:\n  echo '{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}],"
      " \"chat_template_kwargs\": {\"enable_thinking\": false}}' \\\n"
      "    | spark-engine render-chat --tokenizer models/qwen3");
  cmd->callback([&context, options] { Finish(context, RunRenderChat(*options)); });
}

}  // namespace spark::engine
