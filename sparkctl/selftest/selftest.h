// `sparkctl selftest`: does the fabric work, end to end, with a verdict per check and a fix hint
// for each failure. Also called as a library by `sparkctl up` (quick mode) before launching.
//   preflight  the fabric subset of preflight (SSH, links, MTU, RDMA port state, RoCE GID,
//              FORWARD policy, leftover nccl.conf), from every node's facts;
//   net        `net verify` (reach, DF pings, routes, next hops, WireGuard): a failure names the
//              cable to check;
//   rdma       per node, what libibverbs sees: each RDMA device opened, port ACTIVE, active MTU
//              4096, a GID table with a RoCE v2 IPv4 entry; no openable device is a warning that
//              says the link tests fall back to TCP;
//   link       (--full) ping-pong and bandwidth over every cable twin (`bench link`), RC verbs
//              where devices exist, TCP otherwise (said in the check);
//   nccl       which NCCL each node's engine loads (`spark-bench nccl-info`), against the NCCL
//              versions with a known hang on aarch64 (nccl_version.h);
//   allreduce  a small all-reduce on all ranks (NCCL on GPUs, Gloo otherwise) whose sums must be
//              exact.
// Checks reuse host::CheckResult (id, node, verdict, seen, hint). Thread-safety: functions.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "netplan/cluster_spec.h"
#include "sparkctl/host/checks.h"
#include "sparkctl/host/facts.h"
#include "sparkctl/rdma/verbs.h"
#include "sparkctl/ssh/transport.h"

namespace spark::selftest {

struct SelftestOptions {
  bool full = false;          // --full: also the link test and a larger all-reduce sweep
  std::string bench_program;  // spark-bench for the nodes in place of their bundle's ("" = the bundle's)
  int master_port = 29650;    // rendezvous of the all-reduce check on rank 0's node
  bool wireguard = true;      // verify the WireGuard control plane too
  // The engine whose NCCL NCCL.VERSION checks; "" = the spark-engine of the node's bundle, the
  // one `sparkctl up` runs (bundle/deploy.h).
  std::string engine_path;
};

struct SelftestReport {
  std::vector<host::CheckResult> checks;
  double seconds = 0;

  bool ok() const;  // no check failed (warnings allowed)
  // "All checks passed." or one line per failure: "FAIL ID node: seen\n  fix: hint".
  std::string Summary() const;
};

// Runs every check. Only a missing inventory piece or the spark-bench program not found is an
// error; unreachable nodes and failures are checks in the report.
Result<SelftestReport> RunSelftest(ssh::Transport& transport, const netplan::ClusterSpec& spec,
                                   const SelftestOptions& options);

// The preflight check IDs that belong to the selftest.
const std::vector<std::string>& FabricPreflightIds();

// RDMA checks of one node from its sysfs facts and, when known, its verbs view (pure; tests).
std::vector<host::CheckResult> RdmaChecks(const std::string& node, const host::NodeFacts& facts,
                                          const Result<rdma::VerbsReport>& verbs);

nlohmann::ordered_json ToJson(const SelftestReport& report);

}  // namespace spark::selftest
