#include "sparkctl/fabric/cluster_access.h"

#include <pwd.h>
#include <unistd.h>

#include "sparkctl/ssh/libssh_transport.h"

namespace spark::fabric {
namespace {

std::string ExpandHome(const std::string& path) {
  if (!path.starts_with("~/")) return path;
  const passwd* pw = getpwuid(getuid());
  return std::string(pw ? pw->pw_dir : "") + path.substr(1);
}

}  // namespace

std::vector<ssh::NodeSpec> SshNodes(const netplan::ClusterSpec& spec) {
  std::vector<ssh::NodeSpec> out;
  for (const auto& n : spec.nodes) {
    ssh::NodeSpec s;
    s.name = n.name;
    s.address = n.address;
    s.port = spec.ssh.port;
    s.user = spec.ssh.user;
    s.identity_file = ExpandHome(spec.ssh.identity_file);
    s.known_hosts = ExpandHome(spec.ssh.known_hosts);
    s.connect_timeout = std::chrono::seconds(spec.ssh.connect_timeout_s);
    s.command_timeout = std::chrono::seconds(spec.ssh.command_timeout_s);
    out.push_back(std::move(s));
  }
  return out;
}

Result<std::unique_ptr<ssh::Transport>> OpenTransport(const netplan::ClusterSpec& spec) {
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<ssh::LibsshTransport> t,
                         ssh::LibsshTransport::Create(SshNodes(spec)));
  return std::unique_ptr<ssh::Transport>(std::move(t));
}

}  // namespace spark::fabric
