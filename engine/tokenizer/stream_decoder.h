// Streaming detokenization: feed generated token ids one at a time and get back only text made
// of complete UTF-8 characters; bytes of a character split across tokens wait for the next
// token. The concatenation of all Push() results plus Flush() equals Tokenizer::Decode of the
// whole id sequence.
// Thread-safety: one StreamDecoder per sequence; not safe for concurrent use. The Tokenizer it
// refers to must outlive it.
#pragma once

#include <cstdint>
#include <string>

#include "engine/tokenizer/tokenizer.h"

namespace spark::tokenizer {

class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer) : tokenizer_(&tokenizer) {}

  // The text that `id` completes (often "", e.g. the first byte of a CJK character). Unknown
  // ids are skipped, as Tokenizer::Decode does.
  std::string Push(int32_t id);

  // The text still held back (an incomplete character at the end becomes U+FFFD); resets.
  std::string Flush();

  // Bytes held back, waiting for the rest of a character.
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  std::string pending_;
};

}  // namespace spark::tokenizer
