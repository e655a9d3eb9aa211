#include "sparkctl/host/remote.h"

#include <pwd.h>
#include <unistd.h>

#include "sparkctl/ssh/libssh_transport.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/ssh/self_copy.h"

namespace spark::host {
namespace {

// cluster.yaml may name keys as "~/.ssh/id_ed25519" (docs/cluster.md).
std::string ExpandHome(const std::string& path) {
  if (!path.starts_with("~/")) return path;
  const passwd* pw = getpwuid(getuid());
  return std::string(pw ? pw->pw_dir : "") + path.substr(1);
}

}  // namespace

Result<std::unique_ptr<ssh::Transport>> MakeTransport(const netplan::ClusterSpec& cluster,
                                                      const RemoteOptions& options) {
  std::vector<ssh::NodeSpec> nodes;
  for (const auto& n : cluster.nodes) {
    ssh::NodeSpec s;
    s.name = n.name;
    s.address = n.address;
    s.port = cluster.ssh.port;
    s.user = cluster.ssh.user;
    s.identity_file = ExpandHome(cluster.ssh.identity_file);
    s.known_hosts = ExpandHome(cluster.ssh.known_hosts);
    s.host_key_policy = options.accept_new ? ssh::HostKeyPolicy::kAcceptNew : ssh::HostKeyPolicy::kStrict;
    s.connect_timeout = std::chrono::seconds(cluster.ssh.connect_timeout_s);
    s.command_timeout = std::chrono::seconds(cluster.ssh.command_timeout_s);
    nodes.push_back(std::move(s));
  }
  SPARK_ASSIGN_OR_RETURN(auto transport, ssh::LibsshTransport::Create(std::move(nodes)));
  return std::unique_ptr<ssh::Transport>(std::move(transport));
}

std::vector<std::string> NodeNames(const netplan::ClusterSpec& cluster) {
  std::vector<std::string> names;
  for (const auto& n : cluster.nodes) names.push_back(n.name);
  return names;
}

Result<std::string> RunNodeCommand(ssh::Transport& transport, const std::string& node,
                                   const std::string& args, std::chrono::milliseconds timeout) {
  SPARK_ASSIGN_OR_RETURN(ssh::RemoteFile self, ssh::EnsureSelfOnNode(transport, node));
  ssh::RunOptions options;
  options.timeout = timeout;
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult result,
                         ssh::RunChecked(transport, node, self.path + " node " + args, options));
  return result.stdout_data;
}

std::vector<NodeObservation> CollectFacts(ssh::Transport& transport,
                                          const netplan::ClusterSpec& cluster,
                                          const std::string& disk_path) {
  std::vector<std::string> names = NodeNames(cluster);
  auto results = ssh::ForEachNode<NodeFacts>(names, [&](const std::string& node) -> Result<NodeFacts> {
    SPARK_ASSIGN_OR_RETURN(std::string out,
                           RunNodeCommand(transport, node, "facts --json --disk-path " +
                                                               ssh::ShellQuote(disk_path),
                                          std::chrono::seconds(30)));
    try {
      auto facts = FactsFromJson(nlohmann::json::parse(out));
      if (!facts.ok()) return facts.status().WithContext(node);
      return facts;
    } catch (const nlohmann::json::exception& e) {
      return InternalError(node + ": node facts are not JSON: " + e.what());
    }
  });
  std::vector<NodeObservation> observations;
  for (size_t i = 0; i < names.size(); ++i) observations.push_back({names[i], std::move(results[i])});
  return observations;
}

std::vector<Result<BeaconReport>> CollectBeacons(ssh::Transport& transport,
                                                 const netplan::ClusterSpec& cluster,
                                                 std::chrono::milliseconds duration) {
  std::vector<std::string> names = NodeNames(cluster);
  // Install first on every node, so the beacon windows of all nodes overlap.
  auto installed = ssh::ForEachNode<ssh::RemoteFile>(
      names, [&](const std::string& node) { return ssh::EnsureSelfOnNode(transport, node); });
  return ssh::ForEachNode<BeaconReport>(names, [&](const std::string& node) -> Result<BeaconReport> {
    size_t i = std::find(names.begin(), names.end(), node) - names.begin();
    if (!installed[i].ok()) return installed[i].status();
    ssh::RunOptions options;
    options.timeout = duration + std::chrono::seconds(20);
    SPARK_ASSIGN_OR_RETURN(
        ssh::CommandResult result,
        ssh::RunChecked(transport, node,
                        installed[i]->path + " node beacon --json --ms " + std::to_string(duration.count()),
                        options));
    try {
      auto report = BeaconReportFromJson(nlohmann::json::parse(result.stdout_data));
      if (!report.ok()) return report.status().WithContext(node);
      return report;
    } catch (const nlohmann::json::exception& e) {
      return InternalError(node + ": beacon report is not JSON: " + e.what());
    }
  });
}

}  // namespace spark::host
