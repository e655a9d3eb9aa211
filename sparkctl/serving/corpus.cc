#include "sparkctl/serving/corpus.h"

#include <openssl/evp.h>

#include <array>
#include <cstdio>

namespace spark::serving {
namespace {

// Pieces of the corpus as raw string literals (generated: corpus.inc).
constexpr std::string_view kPieces[] = {
#include "sparkctl/serving/corpus.inc"
};

}  // namespace

std::string_view Corpus() {
  static const std::string text = [] {
    std::string t;
    for (std::string_view p : kPieces) t += p;
    return t;
  }();
  return text;
}

std::string CorpusText(size_t offset, size_t chars) {
  const std::string_view c = Corpus();
  // The corpus is UTF-8 with a few multi-byte characters; a piece that starts or ends inside one
  // is not valid UTF-8, which JSON request bodies refuse.
  const auto inside_char = [&c](size_t i) {
    return i < c.size() && (static_cast<unsigned char>(c[i]) & 0xC0) == 0x80;
  };
  std::string out;
  out.reserve(chars + 64);
  size_t at = offset % c.size();
  while (inside_char(at)) at = (at + 1) % c.size();
  while (out.size() < chars) {
    const size_t n = std::min(chars - out.size(), c.size() - at);
    out.append(c.substr(at, n));
    at = (at + n) % c.size();
  }
  while (at != 0 && at < c.size() && c[at] != ' ' && c[at] != '\n' && out.size() < chars + 32) {
    out += c[at++];
  }
  while (inside_char(at)) out += c[at++];
  return out;
}

std::string CorpusSha256() {
  const std::string_view c = Corpus();
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(c.data(), c.size(), md.data(), &len, EVP_sha256(), nullptr);
  std::string hex;
  char buf[3];
  for (unsigned int i = 0; i < len; ++i) {
    std::snprintf(buf, sizeof buf, "%02x", md[i]);
    hex += buf;
  }
  return hex;
}

}  // namespace spark::serving
