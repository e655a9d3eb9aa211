#include "sparkctl/ssh/known_hosts.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <cerrno>
#include <fstream>

#include "base/strings.h"
#include "sparkctl/ssh/transport.h"

namespace spark::ssh {
namespace {

std::string Base64Decode(std::string_view text) {
  std::string out(text.size(), '\0');
  int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                          reinterpret_cast<const unsigned char*>(text.data()),
                          static_cast<int>(text.size()));
  if (n < 0) return {};
  size_t pad = 0;
  for (size_t i = text.size(); i > 0 && text[i - 1] == '='; --i) ++pad;
  out.resize(static_cast<size_t>(n) - std::min<size_t>(pad, static_cast<size_t>(n)));
  return out;
}

// |1|base64(salt)|base64(HMAC-SHA1(salt, name)).
bool HashedMatches(std::string_view field, std::string_view name) {
  std::vector<std::string> parts = Split(field.substr(3), '|');
  if (parts.size() != 2) return false;
  std::string salt = Base64Decode(parts[0]);
  std::string want = Base64Decode(parts[1]);
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int mac_len = 0;
  if (HMAC(EVP_sha1(), salt.data(), static_cast<int>(salt.size()),
           reinterpret_cast<const unsigned char*>(name.data()), name.size(), mac,
           &mac_len) == nullptr) {
    return false;
  }
  return want == std::string_view(reinterpret_cast<const char*>(mac), mac_len);
}

}  // namespace

std::string KnownHostsName(std::string_view address, int port) {
  if (port == 22) return std::string(address);
  return "[" + std::string(address) + "]:" + std::to_string(port);
}

bool KnownHostsFieldMatches(std::string_view field, std::string_view name) {
  if (StartsWith(field, "|1|")) return HashedMatches(field, name);
  for (const std::string& pattern : Split(field, ',', /*skip_empty=*/true)) {
    if (pattern == name) return true;
  }
  return false;
}

Result<std::vector<KnownHostsLine>> FindKnownHostsLines(const std::string& path,
                                                        std::string_view name) {
  std::vector<KnownHostsLine> lines;
  std::ifstream in(path);
  if (!in) {
    if (errno == ENOENT) return lines;
    return ErrnoError(errno, "cannot read " + path);
  }
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    std::vector<std::string> fields = Split(Trim(line), ' ', /*skip_empty=*/true);
    if (fields.empty() || fields[0][0] == '#') continue;
    if (fields[0][0] == '@') continue;  // @revoked / @cert-authority: not a host key.
    if (fields.size() < 3 || !KnownHostsFieldMatches(fields[0], name)) continue;
    lines.push_back(KnownHostsLine{number, fields[1]});
  }
  return lines;
}

std::string RemoveKnownHostCommand(std::string_view name, const std::string& path) {
  return "ssh-keygen -R " + ShellQuote(name) + " -f " + ShellQuote(path);
}

}  // namespace spark::ssh
