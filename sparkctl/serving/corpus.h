// Real English text for prompts: the project's own documentation (docs/*.md, embedded at build
// time), so that prefill runs over text a model reads like any other, not filler such as "a a a"
// (which inflates prefill figures). Longer prompts repeat it from other offsets.
// Thread-safety: immutable.
#pragma once

#include <string>
#include <string_view>

namespace spark::serving {

// The whole text (about 200 KB).
std::string_view Corpus();

// About `chars` bytes of the corpus from `offset` (wrapping around), cut at a word end; it starts
// and ends on whole UTF-8 characters whatever the offset.
std::string CorpusText(size_t offset, size_t chars);

// SHA-256 of the corpus, for result identity.
std::string CorpusSha256();

}  // namespace spark::serving
