// Pre-tokenization: splits normalised text into the words that BPE encodes one by one
// (tokenizer.json "pre_tokenizer": a sequence of Split steps with regexes such as
// "\p{N}{1,3}" or GPT-2's pattern, each applied to every piece the previous step produced).
// Regexes run on PCRE2 in UTF + Unicode-property mode with the JIT, which reads the
// Oniguruma patterns of tokenizer.json with the same meaning.
// Thread-safety: immutable after construction; Split may be called from any thread.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::tokenizer {

// What happens to the text a Split regex matches ("behavior" in tokenizer.json).
enum class SplitBehavior { kIsolated, kRemoved };

class RegexSplit {
 public:
  // Compiles `pattern` (a regex, or a literal string when !is_regex). Returns InvalidArgument
  // with PCRE2's message and the offset of the error.
  static Result<RegexSplit> Create(const std::string& pattern, bool is_regex,
                                   SplitBehavior behavior);

  // Appends the pieces of `text` (views into it) to `out`.
  Status Split(std::string_view text, std::vector<std::string_view>& out) const;

 private:
  struct Compiled;
  std::shared_ptr<const Compiled> compiled_;
  SplitBehavior behavior_ = SplitBehavior::kIsolated;
};

class PreTokenizer {
 public:
  PreTokenizer() = default;  // no splitting: the whole text is one word
  explicit PreTokenizer(std::vector<RegexSplit> steps) : steps_(std::move(steps)) {}

  // The words of `text`, as views into it, in order. Returns Internal when a regex fails to run
  // (PCRE2 resource limits).
  Result<std::vector<std::string_view>> Split(std::string_view text) const;

 private:
  std::vector<RegexSplit> steps_;
};

// GPT-2's pre-tokenizer regex, used by a ByteLevel pre-tokenizer with "use_regex": true.
inline constexpr const char* kGpt2SplitPattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace spark::tokenizer
