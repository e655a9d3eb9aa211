// known_hosts helpers the libssh check does not give us: the host name as OpenSSH writes it and
// the line numbers that hold a host's keys, for "remove line 3 of ~/.ssh/known_hosts" hints.
// Understands plain and hashed (|1|salt|hmac) host fields, comma lists and markers.
// Thread-safety: free functions without shared state.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace spark::ssh {

// "10.0.0.1" for port 22, "[10.0.0.1]:2222" otherwise (OpenSSH's known_hosts spelling).
std::string KnownHostsName(std::string_view address, int port);

// Whether one known_hosts host field ("a,b", "[a]:2222", "|1|salt|hash") names `name`.
// Negations and wildcards are not matched (sparkctl writes neither).
bool KnownHostsFieldMatches(std::string_view field, std::string_view name);

struct KnownHostsLine {
  int number = 0;        // 1-based.
  std::string key_type;  // "ssh-ed25519", ...
};

// The lines of `path` that hold a key for `name` (revoked and CA lines excluded). A missing
// file yields an empty list; other read errors are returned (ErrnoError).
Result<std::vector<KnownHostsLine>> FindKnownHostsLines(const std::string& path,
                                                        std::string_view name);

// The fix for a changed key: "ssh-keygen -R '[10.0.0.1]:2222' -f /root/.ssh/known_hosts".
std::string RemoveKnownHostCommand(std::string_view name, const std::string& path);

}  // namespace spark::ssh
