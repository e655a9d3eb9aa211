#include "engine/server/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/sha.h>

#include <cerrno>
#include <fstream>

#include "base/strings.h"

namespace spark::engine::server {
namespace {

constexpr size_t kMinKeyLength = 16;

std::array<unsigned char, 32> Digest(std::string_view text) {
  std::array<unsigned char, 32> d{};
  SHA256(reinterpret_cast<const unsigned char*>(text.data()), text.size(), d.data());
  return d;
}

}  // namespace

Result<ApiKeys> ApiKeys::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ErrnoError(errno, "--api-key-file " + path);
  std::vector<std::string> keys;
  std::string line;
  while (std::getline(in, line)) {
    const std::string key(Trim(line));
    if (!key.empty() && key[0] != '#') keys.push_back(key);
  }
  Result<ApiKeys> result = FromKeys(keys);
  if (!result.ok()) return result.status().WithContext("--api-key-file " + path);
  return result;
}

Result<ApiKeys> ApiKeys::FromKeys(const std::vector<std::string>& keys) {
  if (keys.empty()) return InvalidArgumentError("no API key found");
  ApiKeys out;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i].size() < kMinKeyLength) {
      return InvalidArgumentError("key " + std::to_string(i + 1) + " is shorter than " +
                                  std::to_string(kMinKeyLength) + " characters");
    }
    out.digests_.push_back(Digest(keys[i]));
  }
  return out;
}

bool ApiKeys::Check(std::string_view authorization) const {
  if (digests_.empty()) return true;
  constexpr std::string_view kBearer = "Bearer ";
  if (!authorization.starts_with(kBearer)) return false;
  const std::array<unsigned char, 32> given = Digest(Trim(authorization.substr(kBearer.size())));
  bool ok = false;
  for (const auto& d : digests_) ok |= CRYPTO_memcmp(d.data(), given.data(), d.size()) == 0;
  return ok;
}

}  // namespace spark::engine::server
