// The byte-level alphabet of GPT-2 style BPE: every byte 0..255 is shown as one printable code
// point (space -> "Ġ", newline -> "Ċ", ...), so vocabularies and merges are plain strings.
// Thread-safety: immutable after construction.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spark::tokenizer {

class ByteLevelAlphabet {
 public:
  ByteLevelAlphabet();

  // The UTF-8 string of the code point that stands for `byte`.
  const std::string& CharOf(uint8_t byte) const { return chars_[byte]; }

  // The bytes a byte-level token string stands for; nullopt when a code point of `token` is not
  // in the alphabet (Hugging Face's ByteLevel decoder then keeps the token's raw UTF-8).
  std::optional<std::string> Decode(std::string_view token) const;

  // Byte-level token string -> bytes, or the raw token when it is not byte-level text.
  std::string DecodeOrRaw(std::string_view token) const;

 private:
  std::array<std::string, 256> chars_;
  std::array<int16_t, 512> byte_of_code_point_;  // -1 when not in the alphabet
};

}  // namespace spark::tokenizer
