#include "engine/tokenizer/utf8.h"

namespace spark::tokenizer {
namespace {

// Bounds of the second byte for each lead byte (RFC 3629 table 3-7); everything after the
// second byte is 0x80..0xBF.
bool SecondByteOk(unsigned char lead, unsigned char b) {
  if (lead == 0xE0) return b >= 0xA0 && b <= 0xBF;
  if (lead == 0xED) return b >= 0x80 && b <= 0x9F;
  if (lead == 0xF0) return b >= 0x90 && b <= 0xBF;
  if (lead == 0xF4) return b >= 0x80 && b <= 0x8F;
  return b >= 0x80 && b <= 0xBF;
}

size_t ExpectedLength(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// How many bytes at pos belong to a valid (possibly truncated) prefix of a sequence.
size_t ValidPrefixLength(std::string_view text, size_t pos, size_t expected) {
  const auto lead = static_cast<unsigned char>(text[pos]);
  size_t n = 1;
  while (n < expected && pos + n < text.size()) {
    const auto b = static_cast<unsigned char>(text[pos + n]);
    const bool ok = n == 1 ? SecondByteOk(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) break;
    ++n;
  }
  return n;
}

}  // namespace

size_t Utf8SequenceLength(std::string_view text, size_t pos) {
  const size_t expected = ExpectedLength(static_cast<unsigned char>(text[pos]));
  if (expected <= 1) return expected;
  return ValidPrefixLength(text, pos, expected) == expected ? expected : 0;
}

bool Utf8Incomplete(std::string_view text, size_t pos) {
  const size_t expected = ExpectedLength(static_cast<unsigned char>(text[pos]));
  if (expected <= 1) return false;
  const size_t n = ValidPrefixLength(text, pos, expected);
  return n < expected && pos + n == text.size();
}

bool IsValidUtf8(std::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const size_t n = Utf8SequenceLength(text, pos);
    if (n == 0) return false;
    pos += n;
  }
  return true;
}

std::string Utf8Lossy(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  for (size_t pos = 0; pos < bytes.size();) {
    const size_t expected = ExpectedLength(static_cast<unsigned char>(bytes[pos]));
    const size_t n = expected == 0 ? 1 : ValidPrefixLength(bytes, pos, expected);
    if (expected != 0 && n == expected) {
      out.append(bytes.substr(pos, n));
    } else {
      out.append("\xEF\xBF\xBD");  // one U+FFFD per maximal invalid subpart
    }
    pos += n;
  }
  return out;
}

size_t Utf8EmittablePrefix(std::string_view bytes) {
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (Utf8Incomplete(bytes, pos)) break;
    const size_t n = Utf8SequenceLength(bytes, pos);
    if (n != 0) {
      pos += n;
      continue;
    }
    const size_t expected = ExpectedLength(static_cast<unsigned char>(bytes[pos]));
    pos += expected == 0 ? 1 : ValidPrefixLength(bytes, pos, expected);
  }
  return pos;
}

void AppendUtf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

}  // namespace spark::tokenizer
