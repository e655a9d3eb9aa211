// Unicode normalisation step of a tokenizer (tokenizer.json "normalizer"): a sequence of
// NFC / NFD / NFKC / NFKD forms, implemented with ICU. Text that is already normalised (all
// ASCII text, most text in practice) is returned without copying work beyond a quick check.
// Thread-safety: immutable after construction; Apply may be called from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::tokenizer {

enum class NormalForm { kNfc, kNfd, kNfkc, kNfkd };

class Normalizer {
 public:
  Normalizer() = default;  // identity

  // Returns InvalidArgument when ICU cannot provide a form (broken ICU data).
  static Result<Normalizer> Create(std::vector<NormalForm> forms);

  bool is_identity() const { return forms_.empty(); }

  // `text` must be valid UTF-8. Returns Internal when ICU fails on the text.
  Result<std::string> Apply(std::string_view text) const;

 private:
  std::vector<NormalForm> forms_;
};

// Code-point transforms of Hugging Face tokenizers' normalizers, on valid UTF-8, for callers
// that compose their own sequence (DeepSeek-V4.1's Engram token keys):
// `text` without its combining marks (general category M: Mn, Mc, Me), as StripAccents.
std::string StripMarks(std::string_view text);
// Each code point by its full lowercase mapping taken alone, as Lowercase (Rust's
// char::to_lowercase: no context, so a final sigma stays σ).
std::string LowercaseChars(std::string_view text);
// Without leading and trailing White_Space code points, as Strip.
std::string StripWhiteSpace(std::string_view text);

}  // namespace spark::tokenizer
