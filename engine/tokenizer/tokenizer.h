// Byte-level BPE tokenizer loaded from a Hugging Face tokenizer directory (tokenizer.json plus
// tokenizer_config.json). Produces the same ids as Hugging Face `tokenizers` for the supported
// components: NFC/NFD/NFKC/NFKD normalisers, Split/ByteLevel pre-tokenizers, BPE model, added
// tokens (recognised in text, leftmost-longest) and the ByteLevel decoder.
//
// Thread-safety: a loaded Tokenizer is safe to use from many threads at once (its only mutable
// state, the BPE word cache, is internally locked). Move-only.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::tokenizer {

struct TokenizerSpec;

class Tokenizer {
 public:
  // Loads dir/tokenizer.json and, when present, dir/tokenizer_config.json.
  // Returns NotFound (missing tokenizer.json), InvalidArgument (malformed file; the message names
  // the file and key) or Unimplemented (a component this tokenizer does not support).
  static Result<Tokenizer> FromDir(const std::filesystem::path& dir);
  static Result<Tokenizer> FromSpec(const TokenizerSpec& spec);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Token ids of `text`. Added and special tokens written in the text ("<|im_end|>") are
  // recognised, as Hugging Face does. With add_special, the BOS/EOS tokens that
  // tokenizer_config.json asks for (add_bos_token / add_eos_token) are added.
  // Invalid UTF-8 in `text` is first replaced by U+FFFD.
  std::vector<int32_t> Encode(std::string_view text, bool add_special = false) const;

  // Like Encode without add_special, but added tokens in the text are plain text (for user
  // content that must not inject control tokens).
  std::vector<int32_t> EncodePlain(std::string_view text) const;

  // The text of `ids` (special tokens included); invalid UTF-8 becomes U+FFFD. Ids the
  // tokenizer does not define are skipped, as Hugging Face does (check IsValidId first).
  std::string Decode(std::span<const int32_t> ids) const;

  // The raw bytes of one token (may be part of a UTF-8 character); empty for unknown ids.
  const std::string& TokenBytes(int32_t id) const;

  bool IsValidId(int32_t id) const;
  bool IsSpecial(int32_t id) const;
  // An added token (tokenizer.json's added_tokens, special or not: <|im_end|>, <think>).
  bool IsAdded(int32_t id) const;

  // Token string (byte-level form, or an added token's content) -> id, and back.
  std::optional<int32_t> TokenToId(std::string_view token) const;
  std::optional<std::string> IdToToken(int32_t id) const;

  // One past the largest id (model vocabulary and added tokens).
  int32_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;
  std::optional<int32_t> pad_id() const;

  // tokenizer_config.json "chat_template" ("" when absent).
  const std::string& chat_template() const;

 private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace spark::tokenizer
