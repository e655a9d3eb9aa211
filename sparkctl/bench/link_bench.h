// `sparkctl bench link`: latency (p50/p99) and bandwidth of every cable and twin, one link at a
// time so the measurements do not disturb each other. For each pair the far end runs
// `spark-bench link-serve` on its fabric address and the near end `spark-bench link-probe`
// (link_probe.h), both over SSH. RDMA verbs (an RC queue pair) are used where both ends can open
// their RDMA device through libibverbs; otherwise TCP, and the report says so in words — a TCP
// number is never shown as an RDMA number. Pairs: "neighbours" (each twin of each cable, or
// adjacent ranks per rail on a switch) or "all" (every node pair, routed through the ring where
// not adjacent; always TCP there since RoCE is not forwarded by the nodes).
// Thread-safety: functions; they block their caller.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/bench/link_probe.h"
#include "sparkctl/fabric/fabric_plan.h"
#include "sparkctl/rdma/verbs.h"
#include "sparkctl/ssh/transport.h"

namespace spark::bench {

struct LinkPair {
  std::string client, server;         // nodes: the probe runs on client
  std::string client_netdev, client_rdma;
  std::string server_netdev, server_rdma, server_address;
  std::string label;                  // the cable ("cable 0: spark-0 p0 twin a ... <-> ...")
  bool adjacent = true;               // directly cabled (RDMA possible)
};

// The pairs to measure, from the applied plan. `all`: every node pair instead of neighbours.
std::vector<LinkPair> PlanLinkPairs(const fabric::ClusterChanges& changes, bool all);

struct LinkBenchOptions {
  bool all_pairs = false;        // --pairs all
  size_t size = 1 << 20;         // --size
  std::chrono::milliseconds duration{1000};  // --seconds
  int pingpongs = 1000;
  int port = 29700;
  bool use_rdma = true;  // where verbs devices open on both ends
  // RoCE v2 IPv4 GID index per "node/device" (from the nodes' facts); missing = 3.
  std::map<std::string, int> gid_index;
};

struct LinkBenchRow {
  LinkPair pair;
  Status status;  // the probe's error, naming the cable
  LinkProbeResult result;
};

struct LinkBenchReport {
  std::vector<LinkBenchRow> rows;
  std::string transport_note;  // "" when every row used RDMA; else why TCP, in words
  bool ok() const;
};

// Installs spark-bench on each node (InstallBench; `program` "" = the bundle's), asks each for its verbs devices, then measures each pair.
// Only connection/installation errors fail the call; a failing link is a row with its status.
Result<LinkBenchReport> RunLinkBench(ssh::Transport& transport, const fabric::ClusterChanges& changes,
                                     const std::string& program, const LinkBenchOptions& options);

// The verbs view of one node (`spark-bench rdma-info` there; bench_path from InstallBench).
Result<rdma::VerbsReport> RemoteVerbs(ssh::Transport& transport, const std::string& node,
                                      const std::string& bench_path);

std::string FormatLinkReport(const LinkBenchReport& report);
nlohmann::ordered_json LinkReportJson(const LinkBenchReport& report);

}  // namespace spark::bench
