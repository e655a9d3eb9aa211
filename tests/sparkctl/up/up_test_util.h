// Shared fixtures of the up unit tests: the demo profile and a discovered 4-node ring, built in
// code, and the probe text a node answers with.
#pragma once

#include <string>

#include "netplan/cluster_spec.h"
#include "sparkctl/profile/profile.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::up::testing {

inline profile::Profile DemoProfile() {
  profile::Profile p;
  p.name = "qwen3-tiny-demo";
  p.source_file = "profiles/qwen3-tiny-demo.yaml";
  p.model.repository = "sparkctl/qwen3-tiny-demo";
  p.model.path = "/var/lib/sparkctl/models/sparkctl--qwen3-tiny-demo";
  p.model.served_name = "qwen3-tiny-demo";
  p.topology.kind = netplan::TopologyKind::kRing;
  p.topology.nodes = 4;
  p.host.memlock = "8192";
  p.engine.backend = "cpu";
  p.engine.tp = 4;
  p.engine.context_length = 2048;
  p.engine.kv_cache.tokens = 8192;
  p.api.port = 8000;
  p.api.bind = "127.0.0.1";
  return p;
}

inline netplan::ClusterSpec Ring(int n = 4, bool ranked = true) {
  netplan::ClusterSpec c;
  c.name = "demo";
  for (int r = 0; r < n; ++r) {
    netplan::NodeSpec node;
    node.name = "spark-" + std::to_string(r);
    node.address = "198.19.0." + std::to_string(10 + r);
    if (ranked) node.rank = r;
    c.nodes.push_back(node);
  }
  // Discovery may list nodes in any order; ranks decide.
  std::swap(c.nodes[0], c.nodes[n - 1]);
  return c;
}

// What ProbeCommand prints on a node running `rank` in `phase` (pid 0: nothing running).
inline std::string ProbeText(int rank, int pid, char state, const std::string& phase,
                             double updated = 1000, bool ready_section = false, int http = 200,
                             const std::string& metrics = "") {
  std::string t = "@@kernel\n6.17.0-1031-nvidia\n@@meminfo\nMemTotal:       127601864 kB\n"
                  "MemAvailable:   100000000 kB\n@@links\nenp1s0f0np0 up\nenp1s0f1np1 up\n"
                  "enP2p1s0f0np0 down\nenP2p1s0f1np1 absent\n@@now\n1002.5\n";
  const std::string r = std::to_string(rank);
  t += "@@rank " + r + "\npid " + std::to_string(pid) + "\n";
  if (pid > 0 && state) t += std::string("state ") + state + "\nours\n";
  t += "@@status " + r + "\n";
  if (!phase.empty()) {
    t += "{\"rank\":" + r + ",\"world_size\":4,\"pid\":" + std::to_string(pid) + ",\"phase\":\"" +
         phase + "\",\"progress\":0.5,\"message\":\"m\",\"updated\":" + std::to_string(updated) +
         "}\n";
  }
  t += "@@log " + r + "\n[2026-11-29 22:00:00.000] line one\n[2026-11-29 22:00:01.000] line two\n";
  if (ready_section) {
    t += "@@ready\n" + std::to_string(http) + "\n";
    if (!metrics.empty()) t += metrics;
  }
  return t + "@@end\n";
}

}  // namespace spark::up::testing
