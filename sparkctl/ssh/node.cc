#include "sparkctl/ssh/node.h"

#include <pwd.h>
#include <unistd.h>

namespace spark::ssh {

std::string_view HostKeyPolicyName(HostKeyPolicy policy) {
  return policy == HostKeyPolicy::kAcceptNew ? "accept_new" : "strict";
}

Result<HostKeyPolicy> ParseHostKeyPolicy(std::string_view name) {
  if (name == "strict") return HostKeyPolicy::kStrict;
  if (name == "accept_new" || name == "accept-new") return HostKeyPolicy::kAcceptNew;
  return InvalidArgumentError("unknown host key policy '" + std::string(name) +
                              "' (expected strict or accept_new)");
}

std::string NodeSpec::Target() const {
  std::string target = user.empty() ? "" : user + "@";
  return target + address + ":" + std::to_string(port);
}

Status NodeSpec::Validate() const {
  const std::string who = "node '" + name + "'";
  if (name.empty())
    return InvalidArgumentError("ssh node without a name (address '" + address + "')");
  if (address.empty()) return InvalidArgumentError(who + ": address is empty");
  if (port < 1 || port > 65535) {
    return InvalidArgumentError(who + ": port " + std::to_string(port) + " is not in 1..65535");
  }
  if (connect_timeout.count() <= 0) return InvalidArgumentError(who + ": connect_timeout <= 0");
  if (command_timeout.count() <= 0) return InvalidArgumentError(who + ": command_timeout <= 0");
  return Status::Ok();
}

std::string DefaultKnownHostsPath() {
  const passwd* pw = getpwuid(getuid());
  std::string home = (pw != nullptr && pw->pw_dir != nullptr) ? pw->pw_dir : "/root";
  return home + "/.ssh/known_hosts";
}

}  // namespace spark::ssh
