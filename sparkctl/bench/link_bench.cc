// `sparkctl bench link` (see link_bench.h).
#include "sparkctl/bench/link_bench.h"

#include <cstdio>
#include <future>
#include <set>

#include "base/strings.h"
#include "sparkctl/bench/launch.h"
#include "sparkctl/fabric/fabric_verify.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::bench {
namespace {

const netplan::FabricInterface* ByRail(const fabric::NodeChanges& n, int port, int twin) {
  return n.plan.addressing.FindInterface(port, twin);
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

}  // namespace

bool LinkBenchReport::ok() const {
  for (const LinkBenchRow& r : rows)
    if (!r.status.ok()) return false;
  return true;
}

std::vector<LinkPair> PlanLinkPairs(const fabric::ClusterChanges& c, bool all) {
  std::vector<LinkPair> out;
  const auto& nodes = c.nodes;
  auto make = [&](const fabric::NodeChanges& a, const netplan::FabricInterface& fa,
                  const fabric::NodeChanges& b, const netplan::FabricInterface& fb, bool adjacent) {
    LinkPair p{a.node, b.node, fa.netdev, fa.rdma_device, fb.netdev, fb.rdma_device,
               fb.address.ip.ToString(), "", adjacent};
    p.label = adjacent ? fabric::CableLabel(c, a.node, fa.netdev)
                       : a.node + " -> " + b.node + " " + fb.netdev + " (routed, not adjacent)";
    out.push_back(p);
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const netplan::FabricInterface& fa : nodes[i].plan.addressing.interfaces) {
      if (fa.peer_rank) {  // point-to-point: once per cable twin, from the lower rank
        int j = *fa.peer_rank;
        if (j <= static_cast<int>(i) || j >= static_cast<int>(nodes.size())) continue;
        for (const netplan::FabricInterface& fb : nodes[j].plan.addressing.interfaces) {
          if (fb.subnet_index == fa.subnet_index) make(nodes[i], fa, nodes[j], fb, true);
        }
      } else if (i + 1 < nodes.size()) {  // switched: the next rank on the same rail
        if (const auto* fb = ByRail(nodes[i + 1], fa.port, fa.twin)) make(nodes[i], fa, nodes[i + 1], *fb, true);
      }
    }
  }
  if (!all) return out;
  std::set<std::pair<std::string, std::string>> have;
  for (const LinkPair& p : out) have.insert({p.client, p.server});
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (size_t j = i + 1; j < nodes.size(); ++j) {
      if (have.count({nodes[i].node, nodes[j].node})) continue;
      const auto& ia = nodes[i].plan.addressing.interfaces;
      const auto& ja = nodes[j].plan.addressing.interfaces;
      if (!ia.empty() && !ja.empty()) make(nodes[i], ia[0], nodes[j], ja[0], false);
    }
  }
  return out;
}

Result<rdma::VerbsReport> RemoteVerbs(ssh::Transport& transport, const std::string& node,
                                      const std::string& bench_path) {
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                         ssh::RunChecked(transport, node, ssh::ShellQuote(bench_path) + " rdma-info"));
  try {
    return rdma::VerbsReportFromJson(nlohmann::json::parse(r.stdout_data));
  } catch (const nlohmann::json::exception& e) {
    return InternalError(node + ": spark-bench rdma-info printed no JSON: " + e.what());
  }
}

Result<LinkBenchReport> RunLinkBench(ssh::Transport& transport, const fabric::ClusterChanges& c,
                                     const std::string& program, const LinkBenchOptions& o) {
  std::vector<std::string> nodes;
  for (const auto& n : c.nodes) nodes.push_back(n.node);
  auto paths = ssh::ForEachNode<std::string>(nodes, [&](const std::string& node) {
    return InstallBench(transport, node, program);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(paths));
  std::map<std::string, std::string> bench;  // node -> spark-bench there
  for (size_t i = 0; i < nodes.size(); ++i) bench[nodes[i]] = *paths[i];
  auto verbs = ssh::ForEachNode<rdma::VerbsReport>(nodes, [&](const std::string& node) {
    return RemoteVerbs(transport, node, bench.at(node));
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(verbs));
  std::map<std::string, std::set<std::string>> opened;  // node -> devices verbs can open
  LinkBenchReport report;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const auto& d : verbs[i]->devices)
      if (d.opened) opened[nodes[i]].insert(d.name);
    if (!verbs[i]->AnyOpened() && report.transport_note.empty()) {
      std::vector<std::string> sysfs;
      for (const auto& rd : c.nodes[i].before.rdma) sysfs.push_back(rd.name);
      report.transport_note = nodes[i] + ": " + rdma::NoVerbsDeviceMessage(*verbs[i], sysfs);
    }
  }
  for (const LinkPair& p : PlanLinkPairs(c, o.all_pairs)) {
    bool rdma = o.use_rdma && p.adjacent && opened[p.client].count(p.client_rdma) &&
                opened[p.server].count(p.server_rdma);
    auto gid = [&](const std::string& node, const std::string& dev) {
      auto it = o.gid_index.find(node + "/" + dev);
      if (it != o.gid_index.end()) return std::to_string(it->second);
      const fabric::NodeChanges* n = c.Find(node);
      const host::RdmaDeviceFacts* f = n ? n->before.FindRdma(dev) : nullptr;
      return std::to_string(f && f->RoceV2Ipv4Index() ? *f->RoceV2Ipv4Index()
                                                      : 3);
    };
    std::string rdma_server = rdma ? " --rdma " + Quote(p.server_rdma) + " --gid-index " + gid(p.server, p.server_rdma) : "";
    std::string rdma_client = rdma ? " --rdma " + Quote(p.client_rdma) + " --gid-index " + gid(p.client, p.client_rdma) : "";
    std::string serve = ssh::ShellQuote(bench.at(p.server)) + " link-serve --bind " + Quote(p.server_address) +
                        " --port " + std::to_string(o.port) + rdma_server;
    char seconds[32];
    std::snprintf(seconds, sizeof(seconds), "%.3f", o.duration.count() / 1000.0);
    std::string probe = ssh::ShellQuote(bench.at(p.client)) + " link-probe --peer " + Quote(p.server_address) +
                        " --port " + std::to_string(o.port) + " --size " + std::to_string(o.size) +
                        " --seconds " + seconds + " --pingpongs " + std::to_string(o.pingpongs) + rdma_client;
    auto server = std::async(std::launch::async, [&] { return transport.Run(p.server, serve); });
    auto client = transport.Run(p.client, probe);
    auto served = server.get();
    LinkBenchRow row{p, Status::Ok(), {}};
    if (!client.ok()) {
      row.status = client.status();
    } else if (!client->ok()) {
      row.status = UnavailableError(p.label + ": probe from " + p.client + " failed: " +
                                    std::string(Trim(client->stderr_data)) +
                                    " — check the cable and `sparkctl net verify`");
    } else {
      try {
        auto r = LinkProbeResultFromJson(nlohmann::json::parse(client->stdout_data));
        if (r.ok()) row.result = *r; else row.status = r.status();
      } catch (const nlohmann::json::exception& e) {
        row.status = InternalError(p.client + ": link-probe printed no JSON");
      }
    }
    if (row.status.ok() && served.ok() && !served->ok()) {
      row.status = UnavailableError(p.label + ": server on " + p.server + " failed: " +
                                    std::string(Trim(served->stderr_data)));
    }
    report.rows.push_back(row);
  }
  return report;
}

std::string FormatLinkReport(const LinkBenchReport& r) {
  std::string out;
  if (!r.transport_note.empty()) out += "note: " + r.transport_note + "\n";
  char line[512];
  std::snprintf(line, sizeof(line), "%-8s %9s %9s %9s  %s\n", "via", "p50(us)", "p99(us)", "Gbit/s",
                "link");
  out += line;
  for (const LinkBenchRow& row : r.rows) {
    if (!row.status.ok()) {
      out += "FAILED   " + row.pair.label + ": " + row.status.message() + "\n";
      continue;
    }
    const auto& m = row.result;
    std::snprintf(line, sizeof(line), "%-8s %9.2f %9.2f %9.2f  %s\n",
                  m.transport == "tcp" ? "TCP" : "RDMA-RC", m.latency.p50_us, m.latency.p99_us,
                  m.gbps, row.pair.label.c_str());
    out += line;
  }
  return out;
}

nlohmann::ordered_json LinkReportJson(const LinkBenchReport& r) {
  nlohmann::ordered_json links = nlohmann::ordered_json::array();
  for (const LinkBenchRow& row : r.rows) {
    nlohmann::ordered_json j = {{"link", row.pair.label}, {"client", row.pair.client},
                                {"server", row.pair.server}, {"server_address", row.pair.server_address},
                                {"ok", row.status.ok()}, {"error", row.status.message()}};
    if (row.status.ok()) j["result"] = ToJson(row.result);
    links.push_back(j);
  }
  return {{"schema", "sparkctl-bench-link/v1"}, {"ok", r.ok()},
          {"transport_note", r.transport_note}, {"links", links}};
}

}  // namespace spark::bench
