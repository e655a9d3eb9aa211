// The simulator's record of one cluster: what was created (so destroy can undo it, also after
// a crash mid-create), the emulated facts of every node, and the faults in force. Stored as JSON
// in /run/sparkctl-sim/<name>/state.json; written before anything is created and after every
// change.
// Thread-safety: plain values; Load/Save are not synchronised (one sparkctl per cluster).
#pragma once

#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/sim/cabling_plan.h"

namespace spark::sim {

inline constexpr char kDefaultStateRoot[] = "/run/sparkctl-sim";
inline constexpr char kStateSchema[] = "sparkctl-sim-state/v1";
// DGX OS 7 defaults of a healthy Spark; faults change them per node.
inline constexpr char kDefaultKernel[] = "6.17.0-1031-nvidia";
inline constexpr long long kDefaultCmaKib = 1048576;  // 1 GiB
// MemAvailable of an idle Spark (~118.2 GiB of MemTotal's ~121.7 GiB).
inline constexpr long long kDefaultMemAvailableKib = 123894660;
inline constexpr char kDefaultMemlock[] = "unlimited";

// What a node reports about itself; the emulated part of a Spark.
struct NodeFacts {
  std::string kernel_release = kDefaultKernel;
  long long cma_kib = kDefaultCmaKib;
  std::string memlock = kDefaultMemlock;  // KiB as `ulimit -l` prints it, or "unlimited"
  std::string machine_id;                 // 32 hex digits
  bool sshd_running = true;
  bool forward_drop = false;
  long long mem_available_kib = kDefaultMemAvailableKib;  // MemAvailable (and MemFree)
  // What `uname -m` and `getconf GNU_LIBC_VERSION` report; "" = the host's own (the truth).
  // Faults set them to show sparkctl a node it cannot run its programs on.
  std::string machine;
  std::string glibc;
};

struct NodeState {
  std::string name;           // hostname, "spark-<rank>"
  int rank = 0;
  std::string netns;          // `ip netns` name
  std::string mgmt_address;   // 198.19.<slot>.<10 + rank>
  std::string host_veth;      // host end of the management veth, on the bridge
  int holder_pid = 0;         // process keeping the node's mount and UTS namespaces alive
  std::string default_machine_id;
  NodeFacts facts;
};

struct ClusterState {
  std::string name;
  Topology topology = Topology::kRing;
  int slot = 0;                   // management subnet 198.19.<slot>.0/24
  std::string bridge;             // host management bridge
  std::string wires_netns;        // patch panel / switch namespace
  bool made_netns_mount = false;  // /run/netns became a mount point because of this cluster
  bool ready = false;             // create finished
  // memlock of a healthy node: "unlimited", or the host's hard limit where the host cannot
  // raise it (no CAP_SYS_RESOURCE, e.g. inside some containers).
  std::string default_memlock = kDefaultMemlock;
  // Nodes do not see the host's build libraries (docs/simulator.md, "Bare libraries") and
  // have their own /usr/local/lib/sparkctl, like a fresh DGX OS install.
  bool bare_libs = false;
  std::vector<NodeState> nodes;
  FabricFaults fabric;

  std::string Dir(const std::string& root) const { return root + "/" + name; }
  std::string HostAddress() const;  // 198.19.<slot>.1
  // Node by name, rank ("2") or namespace. NotFound lists the nodes.
  Result<NodeState*> FindNode(const std::string& node);
};

// "unlimited" when this process may raise RLIMIT_MEMLOCK without bound, else its hard limit
// in KiB.
std::string HostMemlockCeiling();

// InvalidArgument unless name is 1..32 characters of [a-z0-9-], starting with a letter or digit.
Status ValidateClusterName(const std::string& name);

Status SaveState(const std::string& root, const ClusterState& state);
// NotFound when there is no such cluster; DataLoss when the file is unreadable.
Result<ClusterState> LoadState(const std::string& root, const std::string& name);
// Names of every cluster with a state file under root.
std::vector<std::string> ListClusters(const std::string& root);

// Writes a whole file atomically (temp + rename). Returns the errno-derived error.
Status WriteFileAtomic(const std::string& path, const std::string& content, int mode = 0644);
// Rewrites a file in place, keeping its inode: needed for files bind-mounted into nodes.
Status WriteFileInPlace(const std::string& path, const std::string& content);
Result<std::string> ReadFile(const std::string& path);

}  // namespace spark::sim
