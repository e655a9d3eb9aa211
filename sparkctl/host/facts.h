// NodeFacts: what one Spark reports about itself (kernel, memory, CMA, memlock, GPU, RDMA devices
// and GID tables, fabric links, disk, leftovers such as /etc/nccl.conf and the FORWARD policy).
//
// Gathered on the node by `sparkctl node facts --json` (GatherFacts reads the same OS interfaces
// on a real DGX Spark and in the simulator) and parsed by the controller (FactsFromJson); the
// preflight checks (checks.h) judge them. Plain data; JSON schema "sparkctl-node-facts/v1".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/bundle/platform.h"

namespace spark::host {

inline constexpr char kFactsSchema[] = "sparkctl-node-facts/v1";

struct GidEntry {
  int index = 0;
  std::string gid;     // "0000:0000:0000:0000:0000:ffff:c612:0001"
  std::string type;    // "RoCE v2", "IB/RoCE v1"
  std::string netdev;  // gid_attrs/ndevs/N
};

struct RdmaDeviceFacts {
  std::string name;    // rocep1s0f0
  std::string netdev;  // enp1s0f0np0
  std::string state;   // "ACTIVE", "DOWN", ... (from ports/1/state "4: ACTIVE")
  int active_mtu = 0;  // bytes (from ports/1/active_mtu, e.g. "4096 (5)")
  std::vector<GidEntry> gids;

  // Index of the RoCE v2 entry holding an IPv4-mapped address (::ffff:a.b.c.d), if any.
  std::optional<int> RoceV2Ipv4Index() const;
};

struct NetdevFacts {
  std::string name;
  bool present = false;
  std::string operstate;  // "up", "down", "lowerlayerdown"
  int mtu = 0;
  std::vector<std::string> ipv4;  // "198.18.0.1/24"
};

struct GpuFacts {
  bool present = false;
  std::string name;  // "NVIDIA GB10"
  std::string driver;
  int sm_clock_mhz = 0;
  int max_sm_clock_mhz = 0;
  int64_t memory_mib = 0;
  std::string error;  // why nothing was found (nvidia-smi missing or failing)
};

struct NodeFacts {
  std::string schema = kFactsSchema;
  std::string hostname;
  std::string machine_id;
  std::string kernel;      // /proc/sys/kernel/osrelease
  std::string os;          // PRETTY_NAME from /etc/os-release
  // Machine, OS, glibc and libstdc++ versions, node libraries: what decides which programs
  // run here (the same probe the controller runs before installing a bundle).
  bundle::NodePlatform platform;
  std::string dgx_release; // DGX_OTA_VERSION / DGX_SWBUILD_VERSION from /etc/dgx-release
  int64_t mem_total_kib = 0;
  int64_t mem_available_kib = 0;
  int64_t cma_total_kib = -1;  // -1: no CmaTotal line
  int64_t cma_free_kib = -1;
  std::string memlock;  // "unlimited" or KiB, the soft RLIMIT_MEMLOCK of this session
  GpuFacts gpu;
  std::vector<RdmaDeviceFacts> rdma;
  std::vector<NetdevFacts> netdevs;  // the four fabric netdevs, present or not
  std::string disk_path;             // where free space was measured
  int64_t disk_free_bytes = -1;
  bool disk_path_exists = false;     // the model folder is already there
  bool nccl_conf_present = false;
  std::string nccl_conf;       // its first lines, for the report
  std::string forward_policy;  // "ACCEPT", "DROP" or "" when unknown
  std::string sparkctl_version;

  const NetdevFacts* FindNetdev(const std::string& name) const;
  const RdmaDeviceFacts* FindRdma(const std::string& name) const;
};

nlohmann::json ToJson(const NodeFacts& facts);
// InvalidArgument naming the missing or mistyped field.
Result<NodeFacts> FactsFromJson(const nlohmann::json& json);

}  // namespace spark::host
