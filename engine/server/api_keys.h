// ApiKeys: the Bearer keys the server accepts, read from a file (one key per line; blank lines
// and lines starting with '#' ignored). Keys are compared in constant time (SHA-256 of both
// sides, then CRYPTO_memcmp) and never logged or put in error messages.
// Thread-safety: immutable after loading; Check may be called from any thread.
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::engine::server {

class ApiKeys {
 public:
  ApiKeys() = default;  // No keys: every request is allowed.
  // NotFound / PermissionDenied when the file cannot be read; InvalidArgument when it holds no
  // key or a key shorter than 16 characters.
  static Result<ApiKeys> FromFile(const std::string& path);
  static Result<ApiKeys> FromKeys(const std::vector<std::string>& keys);

  bool empty() const { return digests_.empty(); }
  // True when `authorization` is "Bearer <one of the keys>" (or no keys are configured).
  bool Check(std::string_view authorization) const;

 private:
  std::vector<std::array<unsigned char, 32>> digests_;
};

}  // namespace spark::engine::server
