// The cluster simulator: N DGX Sparks built from Linux namespaces on one machine, reachable by
// SSH from the host like Sparks on a LAN, cabled by veth as the topology says, each with an
// emulated GB10 at the OS interfaces sparkctl reads. See docs/simulator.md.
//
// State lives in <root>/<name>/ (default /run/sparkctl-sim/<name>/): state.json (what exists,
// so destroy works after a crash), cluster.yaml (seed inventory), known_hosts, id_ed25519, and
// nodes/<hostname>/ (see node_image.h).
// Thread-safety: a Simulator is used by one thread; internally it sets up nodes in parallel.
// Nodes need root (CAP_SYS_ADMIN, CAP_NET_ADMIN).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/sim/cluster_state.h"
#include "sparkctl/sim/faults.h"
#include "base/process.h"
#include "sparkctl/sim/cabling_plan.h"

namespace spark::sim {

struct CreateOptions {
  std::string name = "demo";             // cluster name: [a-z0-9-]{1,32}
  int nodes = 4;                         // 2..8 (pair: 2, ring: 3..8)
  Topology topology = Topology::kRing;
  bool bare_libs = false;                // ClusterState::bare_libs
};

// Files a created cluster hands to the controller.
struct SeedFiles {
  std::string inventory;    // <dir>/cluster.yaml
  std::string known_hosts;  // <dir>/known_hosts
  std::string identity;     // <dir>/id_ed25519
};

class Simulator {
 public:
  explicit Simulator(Runner& runner, std::string root = kDefaultStateRoot);

  // Builds the cluster and waits until every node's sshd accepts connections. Returns
  // FailedPrecondition without root, AlreadyExists when the name is taken, InvalidArgument for
  // bad options; on any later failure everything created so far is removed again.
  Result<ClusterState> Create(const CreateOptions& options);

  // Removes every namespace, link, process and file the cluster made (also a half-made one).
  // NotFound when there is no such cluster.
  Status Destroy(const std::string& name);

  // NotFound when there is no such cluster.
  Result<ClusterState> Load(const std::string& name) const;
  std::vector<std::string> List() const;

  // argv that runs `command` inside NODE (name or rank) of cluster `name`.
  Result<std::vector<std::string>> ExecArgv(const std::string& name, const std::string& node,
                                            const std::vector<std::string>& command) const;

  // Applies a fault and records it in the state file. Errors as ApplyFault.
  Status InjectFault(const std::string& name, const Fault& fault);

  std::string ClusterDir(const std::string& name) const { return root_ + "/" + name; }
  SeedFiles Seeds(const std::string& name) const;

 private:
  Result<int> FreeSlot() const;
  Status Build(ClusterState& cluster);
  Status SetUpNode(const ClusterState& cluster, NodeState& node);
  Status WriteSeeds(const ClusterState& cluster);

  Runner& runner_;
  std::string root_;
};

}  // namespace spark::sim
