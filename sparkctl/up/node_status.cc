// Probing ranks over SSH (command text and parsing) and judging the cluster's health.
#include "sparkctl/up/node_status.h"

#include <time.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "base/strings.h"
#include "sparkctl/ssh/transport.h"

namespace spark::up {
namespace {

using ssh::ShellQuote;

constexpr const char* kFabricNetdevs[] = {"enp1s0f0np0", "enp1s0f1np1", "enP2p1s0f0np0",
                                          "enP2p1s0f1np1"};

double ParseTime(const nlohmann::json& v) {
  if (v.is_number()) return v.get<double>();
  if (!v.is_string()) return 0;
  std::string s = v.get<std::string>();
  struct tm tm = {};
  const char* rest = strptime(s.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!rest) return 0;
  double t = static_cast<double>(timegm(&tm));
  if (*rest == '.') t += std::strtod(rest, nullptr);  // ".123Z": strtod stops at 'Z'
  return t;
}

std::string Percent(double progress) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "%3.0f%%", std::clamp(progress, 0.0, 1.0) * 100);
  return buf;
}

std::string GiB(int64_t kib) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(kib) / (1024.0 * 1024.0));
  return buf;
}

const RankProbe* FindRank(const std::vector<NodeProbe>& probes, const RankLaunch& r,
                          const NodeProbe** node) {
  for (const auto& p : probes) {
    if (p.node != r.node) continue;
    *node = &p;
    for (const auto& rp : p.ranks) {
      if (rp.rank == r.rank) return &rp;
    }
  }
  return nullptr;
}

std::string LastLines(const RankProbe& rp) {
  if (rp.log_tail.empty()) return "";
  return "; last log lines:\n    " + Join(rp.log_tail, "\n    ");
}

RankVerdict Judge(const RankLaunch& r, const NodeProbe* node, const RankProbe* rp,
                  const AssessOptions& o) {
  RankVerdict v;
  v.rank = r.rank;
  v.node = r.node;
  const std::string who = "rank " + std::to_string(r.rank) + " (" + r.node + ")";
  if (!node || !node->reachable.ok()) {
    v.phase = "unreachable";
    v.problem = true;
    v.why = who + ": node unreachable" + (node ? ": " + node->reachable.message() : "");
    return v;
  }
  if (!rp || (rp->pid == 0 && rp->status.phase.empty())) {
    v.phase = "not started";
    return v;
  }
  v.pid = rp->pid;
  v.progress = rp->status.progress;
  v.steps = rp->status.steps;
  v.tokens = rp->status.tokens;
  v.busy = rp->status.busy;
  if (rp->status.progressed > 0 && node->now > 0) {
    v.progress_age_s = std::max(0.0, node->now - rp->status.progressed);
  }
  v.memory_available_bytes = rp->status.memory_available_bytes;
  v.memory_guard = rp->status.memory_guard;
  v.phase = rp->status.phase.empty() ? "starting" : rp->status.phase;
  if (!rp->Alive()) {
    v.phase = rp->status.phase == "stopped" ? "stopped" : "exited";
    v.problem = true;
    v.why = who + ": the engine (pid " + std::to_string(rp->pid) + ") is gone" +
            (rp->status.message.empty() ? "" : " (" + rp->status.message + ")") + LastLines(*rp);
  } else if (rp->Stopped()) {
    v.phase = "hung";
    v.problem = true;
    v.why = who + ": the engine (pid " + std::to_string(rp->pid) +
            ") is stopped and answers nothing" + LastLines(*rp);
  } else if (rp->status.phase == "failed") {
    v.problem = true;
    v.why = who + ": failed: " + rp->status.message + LastLines(*rp);
  } else if (o.heartbeat_seen && rp->status.phase == "ready" && rp->status.updated > 0 &&
             node->now - rp->status.updated > o.heartbeat_timeout_s) {
    v.phase = "hung";
    v.problem = true;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f", node->now - rp->status.updated);
    v.why = who + ": no heartbeat for " + std::string(buf) + " s" + LastLines(*rp);
  } else if (rp->status.phase == "ready" && rp->status.busy && rp->status.progressed > 0 &&
             node->now - rp->status.progressed > o.progress_timeout_s) {
    v.phase = "hung";
    v.problem = true;
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.0f s in one step with no progress (%llu steps, %llu tokens)",
                  node->now - rp->status.progressed,
                  static_cast<unsigned long long>(rp->status.steps),
                  static_cast<unsigned long long>(rp->status.tokens));
    v.why = who + ": " + buf + LastLines(*rp);
  }
  return v;
}

}  // namespace

std::string ProbeCommand(const LaunchPlan& plan, const std::string& node, bool endpoint,
                         int metrics_samples, int log_lines, bool node_extras) {
  std::string c = "echo @@kernel; cat /proc/sys/kernel/osrelease; echo @@meminfo; "
                  "grep -E '^(MemTotal|MemAvailable|SwapTotal|SwapFree|Cached|CmaFree):' /proc/meminfo; "
                  "echo @@links; for d in";
  std::string devs;
  for (const char* d : kFabricNetdevs) devs += std::string(" ") + d;
  c += devs + "; do echo \"$d $(cat /sys/class/net/$d/operstate 2>/dev/null || echo absent)\"; done; ";
  if (node_extras) {
    c += "echo @@linkinfo; for d in" + devs + "; do n=/sys/class/net/$d; [ -d $n ] || continue; "
       "s=$(cat $n/speed 2>/dev/null); echo \"$d speed ${s:--1}\"; echo \"$d mtu $(cat $n/mtu)\"; "
       "for f in rx_dropped tx_dropped; do echo \"$d $f $(cat $n/statistics/$f)\"; done; "
       "for c in out_of_sequence np_ecn_marked_roce_packets rp_cnp_handled packet_seq_err; do "
       "for f in $n/device/infiniband/*/ports/1/hw_counters/$c; do "
       "[ -r \"$f\" ] && echo \"$d $c $(cat $f)\"; done; done; "
       "command -v ethtool >/dev/null && ethtool -S $d 2>/dev/null | "
       "awk -v d=$d '/^ *(rx|tx)_pause_ctrl_phy:/ {sub(\":\",\"\",$1); print d, $1, $2}'; done; "
       "echo @@gpu; command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=utilization.gpu,"
       "temperature.gpu,clocks.sm,power.draw --format=csv,noheader,nounits 2>/dev/null | head -n1; ";
  }
  c += "echo @@now; date +%s.%N; ";
  for (const auto& r : plan.ranks) {
    if (r.node != node) continue;
    const std::string n = std::to_string(r.rank);
    c += "echo '@@rank " + n + "'; p=$(cat " + ShellQuote(r.pid_path) +
         " 2>/dev/null); echo \"pid ${p:-0}\"; if [ -n \"$p\" ] && [ -r /proc/$p/stat ]; then "
         "echo \"state $(sed 's/.*) //' /proc/$p/stat | cut -c1)\"; tr '\\0' ' ' < /proc/$p/cmdline"
         " | grep -qF -- " + ShellQuote(r.status_path) + " && echo ours; fi; echo '@@status " + n +
         "'; cat " + ShellQuote(r.status_path) + " 2>/dev/null; echo; echo '@@log " + n +
         "'; tail -n " + std::to_string(log_lines) + " " + ShellQuote(r.log_path) +
         " 2>/dev/null; ";
  }
  if (endpoint) {
    std::string auth;
    if (!plan.api_key_file.empty()) {
      auth = " -H \"Authorization: Bearer $(head -n1 " + ShellQuote(plan.api_key_file) + ")\"";
    }
    // HTTPS: the probe runs on the serving node itself over loopback, where nothing can sit
    // in between, and the certificate may name only the LAN address: no verification there.
    if (plan.endpoint.starts_with("https://")) auth += " -k";
    c += "echo @@ready; curl -s -o /dev/null -w '%{http_code}' --max-time 2" + auth + " " +
         ShellQuote(plan.endpoint + "/ready") + "; echo; ";
    for (int i = 0; i < metrics_samples; ++i) {
      if (i > 0) c += "sleep 1; ";
      c += "echo @@metrics; curl -s --max-time 2" + auth + " " +
           ShellQuote(plan.endpoint + "/metrics") + "; echo; ";
    }
  }
  return c + "echo @@end";
}

Result<EngineStatus> ParseEngineStatus(std::string_view text) {
  EngineStatus s;
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgumentError("engine status file is not a JSON object");
  s.phase = j.value("phase", "");
  if (j.contains("progress") && j["progress"].is_number()) s.progress = j["progress"].get<double>();
  if (j.contains("message") && j["message"].is_string()) s.message = j["message"];
  if (j.contains("pid") && j["pid"].is_number_integer()) s.pid = j["pid"].get<int>();
  if (j.contains("updated")) s.updated = ParseTime(j["updated"]);
  if (j.contains("steps") && j["steps"].is_number_unsigned()) s.steps = j["steps"].get<uint64_t>();
  if (j.contains("tokens") && j["tokens"].is_number_unsigned()) {
    s.tokens = j["tokens"].get<uint64_t>();
  }
  if (j.contains("busy") && j["busy"].is_boolean()) s.busy = j["busy"].get<bool>();
  if (j.contains("progressed")) s.progressed = ParseTime(j["progressed"]);
  if (j.contains("memory") && j["memory"].is_object()) {
    const nlohmann::json& m = j["memory"];
    if (m.contains("available_bytes") && m["available_bytes"].is_number_integer()) {
      s.memory_available_bytes = m["available_bytes"].get<int64_t>();
    }
    if (m.contains("guard") && m["guard"].is_string()) s.memory_guard = m["guard"];
  }
  return s;
}

Result<NodeProbe> ParseProbe(const std::string& node, std::string_view text) {
  NodeProbe p;
  p.node = node;
  std::string section;
  RankProbe* rank = nullptr;
  std::string body;
  auto flush = [&]() -> Status {
    std::string_view t = Trim(body);
    if (section == "status" && rank && !t.empty()) {
      auto s = ParseEngineStatus(t);
      if (s.ok()) rank->status = *s;  // a half-written file reads as "starting" until next time
    } else if (section == "metrics") {
      p.metrics.push_back(body);
    } else if (section == "ready") {
      p.ready_http = std::atoi(std::string(t).c_str());
    }
    body.clear();
    return Status::Ok();
  };
  bool ended = false;
  for (const std::string& line : Split(text, '\n')) {
    if (StartsWith(line, "@@")) {
      SPARK_RETURN_IF_ERROR(flush());
      auto words = Split(line.substr(2), ' ', true);
      section = words.empty() ? "" : words[0];
      if (section == "end") ended = true;
      if (words.size() > 1 && (section == "rank" || section == "status" || section == "log")) {
        const int r = std::atoi(words[1].c_str());
        rank = nullptr;
        for (auto& rp : p.ranks) {
          if (rp.rank == r) rank = &rp;
        }
        if (!rank) {
          p.ranks.push_back(RankProbe{.rank = r});
          rank = &p.ranks.back();
        }
      }
      continue;
    }
    if (section == "kernel" && !line.empty()) p.kernel = line;
    if (section == "meminfo") {
      auto w = Split(line, ' ', true);
      if (w.size() >= 2 && w[0] == "MemTotal:") p.mem_total_kib = std::atoll(w[1].c_str());
      if (w.size() >= 2 && w[0] == "MemAvailable:") p.mem_available_kib = std::atoll(w[1].c_str());
      if (w.size() >= 2 && w[0] == "SwapTotal:") p.swap_total_kib = std::atoll(w[1].c_str());
      if (w.size() >= 2 && w[0] == "SwapFree:") p.swap_free_kib = std::atoll(w[1].c_str());
      if (w.size() >= 2 && w[0] == "Cached:") p.cached_kib = std::atoll(w[1].c_str());
      if (w.size() >= 2 && w[0] == "CmaFree:") p.cma_free_kib = std::atoll(w[1].c_str());
    }
    if (section == "linkinfo") {
      auto w = Split(line, ' ', true);
      if (w.size() == 3) {
        NodeProbe::LinkDetail& d = p.link_details[w[0]];
        if (w[1] == "speed") {
          d.speed_mbps = std::atoll(w[2].c_str());
        } else if (w[1] == "mtu") {
          d.mtu = std::atoi(w[2].c_str());
        } else if (!w[2].empty() && std::isdigit(static_cast<unsigned char>(w[2][0]))) {
          d.counters[w[1]] = std::strtoull(w[2].c_str(), nullptr, 10);
        }
      }
    }
    if (section == "gpu" && !line.empty()) {
      auto f = Split(line, ',');
      if (f.size() == 4) {
        auto num = [](std::string_view v) {
          std::string t(Trim(v));
          char* end = nullptr;
          const double x = std::strtod(t.c_str(), &end);
          return end != t.c_str() ? x : -1.0;  // "[N/A]"
        };
        p.gpu = NodeProbe::Gpu{num(f[0]), num(f[1]), num(f[2]), num(f[3])};
      }
    }
    if (section == "links") {
      auto w = Split(line, ' ', true);
      if (w.size() == 2) p.links[w[0]] = w[1];
    }
    if (section == "now" && !line.empty()) p.now = std::strtod(line.c_str(), nullptr);
    if (section == "rank" && rank) {
      if (StartsWith(line, "pid ")) rank->pid = std::atoi(line.c_str() + 4);
      if (StartsWith(line, "state ") && line.size() > 6) rank->proc_state = line[6];
      if (line == "ours") rank->ours = true;
    }
    if (section == "log" && rank && !line.empty()) rank->log_tail.push_back(line);
    if (section == "status" || section == "metrics" || section == "ready") body += line + "\n";
  }
  SPARK_RETURN_IF_ERROR(flush());
  if (!ended) return InvalidArgumentError(node + ": probe output ended early (no @@end)");
  return p;
}

std::optional<double> MetricValue(std::string_view body, std::string_view name) {
  std::optional<double> sum;
  for (const std::string& line : Split(body, '\n', true)) {
    if (!StartsWith(line, name)) continue;
    const char next = line.size() > name.size() ? line[name.size()] : 0;
    if (next != ' ' && next != '{') continue;
    const size_t sp = line.rfind(' ');
    if (sp == std::string::npos) continue;
    sum = sum.value_or(0) + std::strtod(line.c_str() + sp + 1, nullptr);
  }
  return sum;
}

std::string_view HealthName(Health health) {
  switch (health) {
    case Health::kDown: return "down";
    case Health::kStarting: return "starting";
    case Health::kReady: return "ready";
    case Health::kDegraded: return "degraded";
  }
  return "?";
}

ClusterHealth Assess(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                     const AssessOptions& options) {
  ClusterHealth h;
  bool any_started = false, all_ready = !plan.ranks.empty();
  std::string cause;
  for (const auto& r : plan.ranks) {
    const NodeProbe* node = nullptr;
    const RankProbe* rp = FindRank(probes, r, &node);
    RankVerdict v = Judge(r, node, rp, options);
    if (v.phase != "not started" && v.phase != "unreachable") any_started = true;
    if (v.phase != "ready") all_ready = false;
    // The first rank that died or hangs is the cause; ranks that report "failed" are most often
    // its peers noticing it, so they only explain a degraded model when nothing else does.
    if (v.problem && v.phase != "failed" && cause.empty()) cause = v.why;
    if (v.problem && h.reason.empty()) h.reason = v.why;
    if (r.rank == 0) h.memory_guard = v.memory_guard;
    if (r.rank == 0 && node) {
      h.endpoint_ready = node->ready_http.value_or(0) == 200;
      if (node->metrics.size() >= 2) {
        auto a = MetricValue(node->metrics[0], "vllm:generation_tokens_total");
        auto b = MetricValue(node->metrics[1], "vllm:generation_tokens_total");
        if (a && b) h.tokens_per_second = std::max(0.0, *b - *a);
      }
    }
    h.ranks.push_back(std::move(v));
  }
  if (!cause.empty()) h.reason = cause;
  if (!h.reason.empty() && any_started) {
    h.health = Health::kDegraded;
  } else if (!any_started) {
    h.health = Health::kDown;
    h.reason.clear();
  } else if (all_ready && h.endpoint_ready) {
    h.health = Health::kReady;
  } else {
    h.health = Health::kStarting;
  }
  return h;
}

std::string RenderProgress(const ClusterHealth& health) {
  std::string out;
  for (const auto& r : health.ranks) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "  rank %d %-12s %-11s %s\n", r.rank, r.node.c_str(),
                  r.phase.c_str(), r.phase == "loading" ? Percent(r.progress).c_str() : "");
    out += buf;
  }
  return out;
}

std::string RenderStatus(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                         const ClusterHealth& health) {
  std::ostringstream o;
  char buf[256];
  std::snprintf(buf, sizeof buf, "%-10s %-9s %-20s %-6s %-4s %-11s %-8s %s\n", "NODE", "SSH",
                "KERNEL", "LINKS", "RANK", "ENGINE", "PID", "MEM AVAIL/TOTAL GiB");
  o << buf;
  for (const auto& p : probes) {
    int up = 0;
    for (const auto& [dev, state] : p.links) up += state == "up";
    std::string links = std::to_string(up) + "/" + std::to_string(p.links.size());
    std::string rank = "-", phase = "-", pid = "-";
    for (const auto& v : health.ranks) {
      if (v.node != p.node) continue;
      rank = std::to_string(v.rank);
      phase = v.phase == "loading" ? "loading " + Percent(v.progress) : v.phase;
      pid = v.pid ? std::to_string(v.pid) : "-";
    }
    const bool ok = p.reachable.ok();
    std::snprintf(buf, sizeof buf, "%-10s %-9s %-20s %-6s %-4s %-11s %-8s %s\n", p.node.c_str(),
                  ok ? "ok" : "UNREACH", ok ? p.kernel.c_str() : "-", ok ? links.c_str() : "-",
                  rank.c_str(), phase.c_str(), pid.c_str(),
                  ok ? (GiB(p.mem_available_kib) + "/" + GiB(p.mem_total_kib)).c_str() : "-");
    o << buf;
  }
  o << "\nmodel     " << plan.served_name << "  (" << HealthName(health.health) << ")\n";
  o << "endpoint  " << plan.endpoint << " on " << plan.api_node << "  ready: "
    << (health.endpoint_ready ? "yes" : "no");
  if (health.tokens_per_second) {
    std::snprintf(buf, sizeof buf, "  %.1f tokens/s", *health.tokens_per_second);
    o << buf;
  }
  o << "\n";
  if (!plan.tls_fingerprint.empty()) o << "tls       SHA-256 " << plan.tls_fingerprint << "\n";
  if (plan.clear_text) {
    o << "warning   the endpoint is off loopback without TLS: the API key travels in clear text "
         "(api.tls)\n";
  }
  if (!health.memory_guard.empty()) {
    o << "memory    guard " << health.memory_guard;
    for (const auto& v : health.ranks) {
      if (v.memory_available_bytes < 0) continue;
      o << "; " << v.node << " " << GiB(v.memory_available_bytes / 1024) << " GiB available";
    }
    o << "\n";
  }
  if (!health.reason.empty()) o << "DEGRADED: " << health.reason << "\n";
  return o.str();
}

nlohmann::ordered_json StatusJson(const LaunchPlan& plan, const std::vector<NodeProbe>& probes,
                                  const ClusterHealth& health) {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  for (const auto& p : probes) {
    nlohmann::ordered_json n = {{"node", p.node}, {"reachable", p.reachable.ok()}};
    if (!p.reachable.ok()) n["error"] = p.reachable.message();
    n["kernel"] = p.kernel;
    n["links"] = p.links;
    n["mem_total_kib"] = p.mem_total_kib;
    n["mem_available_kib"] = p.mem_available_kib;
    auto kib = [](int64_t v) { return v >= 0 ? nlohmann::ordered_json(v) : nullptr; };
    n["swap_used_kib"] = p.swap_total_kib >= 0 && p.swap_free_kib >= 0
                             ? nlohmann::ordered_json(p.swap_total_kib - p.swap_free_kib)
                             : nullptr;
    n["page_cache_kib"] = kib(p.cached_kib);
    n["cma_free_kib"] = kib(p.cma_free_kib);
    nlohmann::ordered_json links = nlohmann::ordered_json::object();
    for (const auto& [dev, d] : p.link_details) {
      links[dev] = {{"speed_mbps", d.speed_mbps >= 0 ? nlohmann::ordered_json(d.speed_mbps) : nullptr},
                    {"mtu", d.mtu},
                    {"counters", d.counters}};
    }
    n["link_details"] = links;
    if (p.gpu) {
      auto v = [](double x) { return x >= 0 ? nlohmann::ordered_json(x) : nullptr; };
      n["gpu"] = {{"utilization_percent", v(p.gpu->utilization_percent)},
                  {"temperature_c", v(p.gpu->temperature_c)},
                  {"sm_clock_mhz", v(p.gpu->sm_clock_mhz)},
                  {"power_w", v(p.gpu->power_w)}};
    } else {
      n["gpu"] = nullptr;
    }
    n["now"] = p.now;
    nodes.push_back(n);
  }
  nlohmann::ordered_json ranks = nlohmann::ordered_json::array();
  for (const auto& v : health.ranks) {
    nlohmann::ordered_json r = {{"rank", v.rank},   {"node", v.node},     {"phase", v.phase},
                                {"progress", v.progress}, {"pid", v.pid}, {"problem", v.why},
                                {"steps", v.steps}, {"tokens", v.tokens}, {"busy", v.busy}};
    r["progress_age_s"] = v.progress_age_s >= 0 ? nlohmann::ordered_json(v.progress_age_s) : nullptr;
    r["memory_available_bytes"] =
        v.memory_available_bytes >= 0 ? nlohmann::ordered_json(v.memory_available_bytes) : nullptr;
    ranks.push_back(r);
  }
  nlohmann::ordered_json j = {{"schema", "sparkctl-status/v1"},
                              {"health", HealthName(health.health)},
                              {"reason", health.reason},
                              {"model", plan.served_name},
                              {"endpoint", plan.endpoint},
                              {"endpoint_node", plan.api_node},
                              {"tls_fingerprint", plan.tls_fingerprint.empty()
                                                      ? nlohmann::ordered_json(nullptr)
                                                      : nlohmann::ordered_json(plan.tls_fingerprint)},
                              {"clear_text", plan.clear_text},
                              {"ready", health.endpoint_ready},
                              {"nodes", nodes},
                              {"ranks", ranks}};
  j["memory_guard"] =
      health.memory_guard.empty() ? nlohmann::ordered_json(nullptr)
                                  : nlohmann::ordered_json(health.memory_guard);
  j["tokens_per_second"] =
      health.tokens_per_second ? nlohmann::ordered_json(*health.tokens_per_second) : nullptr;
  return j;
}

}  // namespace spark::up
