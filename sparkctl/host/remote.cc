#include "sparkctl/host/remote.h"

#include <pwd.h>
#include <optional>
#include <unistd.h>

#include "sparkctl/bundle/deploy.h"
#include "sparkctl/ssh/libssh_transport.h"
#include "sparkctl/ssh/parallel.h"

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

namespace {

// Exit status and stderr marker of a node command that found no (or another) sparkctl build.
constexpr int kNotInstalledExit = 197;
constexpr char kNotInstalledMarker[] = "sparkctl-build-missing";

// Runs `node ARGS` when the node has this build's bundle for its machine; the caller installs
// it otherwise. Returns nullopt for "not installed".
Result<std::optional<ssh::CommandResult>> TryNodeCommand(ssh::Transport& transport,
                                                         const std::string& node,
                                                         const std::string& args,
                                                         const ssh::RunOptions& options) {
  const std::string command =
      bundle::RunInstalledCommand(bundle::DefaultCatalog().Ids(), "sparkctl", "node " + args,
                                  kNotInstalledMarker, kNotInstalledExit);
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult result, transport.Run(node, command, options));
  if (result.exit_code == kNotInstalledExit &&
      result.stderr_data.find(kNotInstalledMarker) != std::string::npos) {
    return std::optional<ssh::CommandResult>();
  }
  if (result.exit_code != 0) return ssh::CommandFailedError(node, "sparkctl node " + args, result);
  return std::optional<ssh::CommandResult>(std::move(result));
}

// The bundle for the node's machine, installed when missing; the path of its sparkctl.
Result<bundle::ProgramOnNode> InstallSparkctl(ssh::Transport& transport, const std::string& node) {
  return bundle::EnsureProgram(transport, bundle::DefaultCatalog(), node, "sparkctl");
}

template <typename T>
Result<T> FromNodeJson(const std::string& node, const nlohmann::json& j,
                       Result<T> (*parse)(const nlohmann::json&)) {
  Result<T> parsed = parse(j);
  if (!parsed.ok()) return parsed.status().WithContext(node);
  return parsed;
}

template <typename T>
Result<T> ParseNodeJson(const std::string& node, const std::string& what, const std::string& text,
                        Result<T> (*parse)(const nlohmann::json&)) {
  try {
    return FromNodeJson(node, nlohmann::json::parse(text), parse);
  } catch (const nlohmann::json::exception& e) {
    return InternalError(node + ": " + what + " is not JSON: " + e.what());
  }
}

Result<NodeFacts> ParseFacts(const std::string& node, const std::string& text) {
  return ParseNodeJson<NodeFacts>(node, "node facts", text, &FactsFromJson);
}

}  // namespace

Result<std::string> RunNodeCommand(ssh::Transport& transport, const std::string& node,
                                   const std::string& args, std::chrono::milliseconds timeout) {
  ssh::RunOptions options;
  options.timeout = timeout;
  SPARK_ASSIGN_OR_RETURN(auto ran, TryNodeCommand(transport, node, args, options));
  if (ran) return ran->stdout_data;
  SPARK_ASSIGN_OR_RETURN(auto self, InstallSparkctl(transport, node));
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
    return ParseFacts(node, out);
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
  auto installed = ssh::ForEachNode<bundle::ProgramOnNode>(
      names, [&](const std::string& node) { return InstallSparkctl(transport, node); });
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
    return ParseNodeJson<BeaconReport>(node, "beacon report", result.stdout_data,
                                       &BeaconReportFromJson);
  });
}

std::vector<NodeProbe> CollectProbes(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                     const std::string& disk_path,
                                     std::chrono::milliseconds max_beacon) {
  const std::vector<std::string> names = NodeNames(cluster);
  const std::string args = "probe --json --disk-path " + ssh::ShellQuote(disk_path) +
                           " --beacon-ms " + std::to_string(max_beacon.count()) + " --peers " +
                           std::to_string(names.size() > 0 ? names.size() - 1 : 0);
  ssh::RunOptions options;
  options.timeout = max_beacon + std::chrono::seconds(30);
  using Attempt = std::optional<ssh::CommandResult>;
  auto probe_all = [&] {
    return ssh::ForEachNode<Attempt>(names, [&](const std::string& node) {
      return TryNodeCommand(transport, node, args, options);
    });
  };
  std::vector<Result<Attempt>> attempts = probe_all();
  std::vector<std::string> missing;
  for (size_t i = 0; i < names.size(); ++i) {
    if (attempts[i].ok() && !attempts[i]->has_value()) missing.push_back(names[i]);
  }
  if (!missing.empty()) {
    // Install where needed, then probe everyone again: beacons only work when all run together.
    auto installed = ssh::ForEachNode<bundle::ProgramOnNode>(
        missing, [&](const std::string& node) { return InstallSparkctl(transport, node); });
    Status install = ssh::JoinNodeErrors(installed);
    attempts = probe_all();
    for (size_t i = 0; i < names.size(); ++i) {
      if (attempts[i].ok() && !attempts[i]->has_value()) {
        attempts[i] = install.ok() ? InternalError(names[i] + ": sparkctl still differs after install")
                                   : install;
      }
    }
  }
  std::vector<NodeProbe> probes;
  for (size_t i = 0; i < names.size(); ++i) {
    NodeProbe p;
    p.observation.name = names[i];
    if (!attempts[i].ok()) {
      p.observation.facts = attempts[i].status();
      p.beacons = attempts[i].status();
    } else {
      try {
        const nlohmann::json j = nlohmann::json::parse((*attempts[i])->stdout_data);
        p.observation.facts = FromNodeJson(names[i], j.at("facts"), &FactsFromJson);
        p.beacons = FromNodeJson(names[i], j.at("beacons"), &BeaconReportFromJson);
      } catch (const nlohmann::json::exception& e) {
        p.observation.facts = InternalError(names[i] + ": node probe is not JSON: " + e.what());
        p.beacons = p.observation.facts.status();
      }
    }
    probes.push_back(std::move(p));
  }
  return probes;
}

}  // namespace spark::host
