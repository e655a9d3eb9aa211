// The parts of tokenizer.json and tokenizer_config.json the tokenizer uses, as plain structs.
// LoadTokenizerSpec is the only code that reads those JSON files; every error it returns names
// the file and the key (e.g. "tokenizer.json: model.merges[12]: expected ...").
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/tokenizer/bpe.h"
#include "engine/tokenizer/normalizer.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace spark::tokenizer {

struct AddedTokenSpec {
  int32_t id = 0;
  std::string content;
  bool special = false;
  // Matched against normalised text (true) or raw text (false).
  bool normalized = false;
};

struct SplitSpec {
  std::string pattern;
  bool is_regex = true;
  SplitBehavior behavior = SplitBehavior::kIsolated;
};

struct TokenizerSpec {
  std::vector<NormalForm> normal_forms;
  std::vector<SplitSpec> splits;
  BpeSpec bpe;
  std::vector<AddedTokenSpec> added_tokens;

  // From tokenizer_config.json (all optional).
  std::optional<std::string> bos_token;
  std::optional<std::string> eos_token;
  std::optional<std::string> pad_token;
  bool add_bos_token = false;
  bool add_eos_token = false;
  std::string chat_template;
};

// Reads dir/tokenizer.json (required) and dir/tokenizer_config.json (optional).
// Returns NotFound when tokenizer.json is missing, InvalidArgument for malformed JSON or keys,
// Unimplemented for components this tokenizer does not support (naming the key and its type).
Result<TokenizerSpec> LoadTokenizerSpec(const std::filesystem::path& dir);

// Parses tokenizer.json / tokenizer_config.json text; `file` names the source in errors.
Status ParseTokenizerJson(const std::string& text, const std::string& file, TokenizerSpec& spec);
Status ParseTokenizerConfig(const std::string& text, const std::string& file, TokenizerSpec& spec);

}  // namespace spark::tokenizer
