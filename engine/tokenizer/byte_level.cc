#include "engine/tokenizer/byte_level.h"

#include "engine/tokenizer/utf8.h"

namespace spark::tokenizer {
namespace {

bool PrintsAsItself(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

// Decodes the code point at text[pos] (valid UTF-8 assumed by the caller's check); advances pos.
char32_t NextCodePoint(std::string_view text, size_t& pos, bool& ok) {
  const size_t n = Utf8SequenceLength(text, pos);
  if (n == 0) {
    ok = false;
    return 0;
  }
  const auto b0 = static_cast<unsigned char>(text[pos]);
  char32_t cp = n == 1 ? b0 : n == 2 ? (b0 & 0x1F) : n == 3 ? (b0 & 0x0F) : (b0 & 0x07);
  for (size_t i = 1; i < n; ++i) cp = (cp << 6) | (static_cast<unsigned char>(text[pos + i]) & 0x3F);
  pos += n;
  return cp;
}

}  // namespace

ByteLevelAlphabet::ByteLevelAlphabet() {
  byte_of_code_point_.fill(-1);
  int next_extra = 256;
  for (int b = 0; b < 256; ++b) {
    const char32_t cp = PrintsAsItself(b) ? static_cast<char32_t>(b) : next_extra++;
    AppendUtf8(chars_[b], cp);
    byte_of_code_point_[cp] = static_cast<int16_t>(b);
  }
}

std::optional<std::string> ByteLevelAlphabet::Decode(std::string_view token) const {
  std::string out;
  out.reserve(token.size());
  for (size_t pos = 0; pos < token.size();) {
    bool ok = true;
    const char32_t cp = NextCodePoint(token, pos, ok);
    if (!ok || cp >= byte_of_code_point_.size() || byte_of_code_point_[cp] < 0) return std::nullopt;
    out.push_back(static_cast<char>(byte_of_code_point_[cp]));
  }
  return out;
}

std::string ByteLevelAlphabet::DecodeOrRaw(std::string_view token) const {
  std::optional<std::string> bytes = Decode(token);
  return bytes ? std::move(*bytes) : std::string(token);
}

}  // namespace spark::tokenizer
