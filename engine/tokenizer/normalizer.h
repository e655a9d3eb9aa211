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

}  // namespace spark::tokenizer
