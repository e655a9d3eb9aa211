// UTF-8 helpers for the tokenizer: validity checks, lossy repair and the length of the longest
// complete prefix (what a streaming detokenizer may emit without splitting a character).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace spark::tokenizer {

// The length of the valid UTF-8 sequence that starts at text[pos]: 1..4, or 0 when the bytes at
// pos are not a valid sequence (the string may also just end too early; see Utf8Incomplete).
size_t Utf8SequenceLength(std::string_view text, size_t pos);

// True when text[pos..] is the start of a valid sequence cut short by the end of the string.
bool Utf8Incomplete(std::string_view text, size_t pos);

bool IsValidUtf8(std::string_view text);

// Replaces every maximal invalid subsequence by U+FFFD, as Rust's String::from_utf8_lossy does
// (which is what Hugging Face tokenizers' decoders use).
std::string Utf8Lossy(std::string_view bytes);

// The number of leading bytes that form text a stream may emit now: complete characters and
// invalid bytes (which become U+FFFD), but not a valid sequence cut short at the end.
size_t Utf8EmittablePrefix(std::string_view bytes);

// Appends the UTF-8 encoding of code point cp.
void AppendUtf8(std::string& out, char32_t cp);

}  // namespace spark::tokenizer
