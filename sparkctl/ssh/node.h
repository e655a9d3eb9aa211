// NodeSpec: how to reach one Spark over SSH (address, user, key, known_hosts, timeouts).
//
// The inventory (cluster.yaml: an `ssh:` block of defaults plus `nodes: [{name, address}]`)
// builds one NodeSpec per node; the Transport is keyed by NodeSpec::name. Defaults follow
// OpenSSH: port 22, the user's ~/.ssh/known_hosts, ssh-agent or ~/.ssh/id_* when no identity
// file is named, and strict host-key checking.
// Thread-safety: plain values.
#pragma once

#include <chrono>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::ssh {

// What to do with a host key that is not in known_hosts. A key that DIFFERS from the recorded
// one is always refused, whatever the policy.
enum class HostKeyPolicy {
  kStrict,     // Unknown hosts are refused (OpenSSH StrictHostKeyChecking=yes).
  kAcceptNew,  // Unknown hosts are added on first contact (StrictHostKeyChecking=accept-new).
};

// "strict" / "accept_new" <-> HostKeyPolicy. Parse returns InvalidArgument for other words.
std::string_view HostKeyPolicyName(HostKeyPolicy policy);
Result<HostKeyPolicy> ParseHostKeyPolicy(std::string_view name);

struct NodeSpec {
  // Name used in every message and as the Transport key ("spark-1"). Required.
  std::string name;
  // Host name or IP address of the node's management interface. Required.
  std::string address;
  // Default: 22.
  int port = 22;
  // Login user. Default (empty): the user running sparkctl.
  std::string user;
  // Private key file. Default (empty): ssh-agent, then ~/.ssh/id_ed25519, id_ecdsa, id_rsa.
  std::string identity_file;
  // known_hosts file consulted and, with kAcceptNew, appended to.
  // Default (empty): ~/.ssh/known_hosts of the user running sparkctl.
  std::string known_hosts;
  // Default: strict.
  HostKeyPolicy host_key_policy = HostKeyPolicy::kStrict;
  // TCP connect + SSH handshake + authentication. Default: 10 s.
  std::chrono::milliseconds connect_timeout{10'000};
  // Per command when RunOptions::timeout is not set. Default: 10 min.
  std::chrono::milliseconds command_timeout{600'000};

  // "root@10.0.0.1:22".
  std::string Target() const;

  // InvalidArgument naming the node and the field for an empty name/address, a port outside
  // 1..65535 or a non-positive timeout.
  Status Validate() const;
};

// ~/.ssh/known_hosts of the current user (from the password database, not $HOME).
std::string DefaultKnownHostsPath();

}  // namespace spark::ssh
