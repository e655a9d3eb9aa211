#include "sparkctl/dashboard/snapshot.h"

#include <algorithm>
#include <cmath>

namespace spark::dashboard {
namespace {

using nlohmann::ordered_json;

ordered_json OrNull(const std::optional<double>& v) {
  return v && std::isfinite(*v) ? ordered_json(*v) : ordered_json(nullptr);
}

ordered_json KibOrNull(int64_t kib) { return kib >= 0 ? ordered_json(kib) : nullptr; }

// The change of a counter between the two bodies (after's own value without a before).
std::optional<double> Change(const MetricsBody& before, const MetricsBody& after,
                             std::string_view name) {
  auto b = after.Sum(name);
  if (!b) return std::nullopt;
  auto a = before.Sum(name);
  return a ? std::max(0.0, *b - *a) : *b;
}

// a / b of two counters' changes; nullopt when the denominator did not move.
std::optional<double> RatioOfChange(const MetricsBody& before, const MetricsBody& after,
                                    std::string_view num, std::string_view den) {
  auto n = Change(before, after, num);
  auto d = Change(before, after, den);
  if (!n || !d || *d <= 0) return std::nullopt;
  return *n / *d;
}

}  // namespace

ordered_json SnapshotBuilder::Build(const TickInput& tick) {
  const double dt = last_time_ > 0 ? tick.time - last_time_ : 0;
  last_time_ = tick.time;
  ordered_json snap = {{"schema", kSnapshotSchema}, {"time", tick.time}};
  if (!tick.plan) {
    snap["status"] = {{"schema", "sparkctl-status/v1"}, {"health", "down"},
                      {"reason", tick.down_reason}};
    snap["nodes"] = ordered_json::array();
    snap["ranks"] = ordered_json::array();
    snap["endpoint"] = nullptr;
    metrics_.clear();
    return snap;
  }
  ordered_json status = up::StatusJson(*tick.plan, tick.probes, tick.health);
  status["restarts"] = tick.restarts;
  snap["status"] = status;

  ordered_json nodes = ordered_json::array();
  const up::NodeProbe* api_probe = nullptr;
  for (const up::NodeProbe& p : tick.probes) {
    if (p.node == tick.plan->api_node) api_probe = &p;
    ordered_json n = {{"node", p.node}, {"reachable", p.reachable.ok()}};
    n["mem_total_kib"] = p.mem_total_kib;
    n["mem_available_kib"] = p.mem_available_kib;
    n["swap_used_kib"] = p.swap_total_kib >= 0 && p.swap_free_kib >= 0
                             ? ordered_json(p.swap_total_kib - p.swap_free_kib)
                             : nullptr;
    n["page_cache_kib"] = KibOrNull(p.cached_kib);
    n["cma_free_kib"] = KibOrNull(p.cma_free_kib);
    if (p.gpu) {
      auto v = [](double x) { return x >= 0 ? ordered_json(x) : ordered_json(nullptr); };
      n["gpu"] = {{"utilization_percent", v(p.gpu->utilization_percent)},
                  {"temperature_c", v(p.gpu->temperature_c)},
                  {"sm_clock_mhz", v(p.gpu->sm_clock_mhz)},
                  {"power_w", v(p.gpu->power_w)}};
    } else {
      n["gpu"] = nullptr;
    }
    ordered_json links = ordered_json::array();
    for (const auto& [dev, state] : p.links) {
      if (state == "absent") continue;
      ordered_json l = {{"device", dev}, {"state", state}};
      auto d = p.link_details.find(dev);
      ordered_json rates = ordered_json::object();
      if (d != p.link_details.end()) {
        l["speed_mbps"] = d->second.speed_mbps >= 0 ? ordered_json(d->second.speed_mbps) : nullptr;
        l["mtu"] = d->second.mtu;
        auto& previous = link_counters_[p.node + "/" + dev];
        for (const auto& [name, value] : d->second.counters) {
          auto it = previous.find(name);
          rates[name] = it != previous.end() && dt > 0 && value >= it->second
                            ? ordered_json(static_cast<double>(value - it->second) / dt)
                            : nullptr;
        }
        previous = d->second.counters;
      }
      l["rates"] = rates;
      links.push_back(l);
    }
    n["links"] = links;
    nodes.push_back(n);
  }
  snap["nodes"] = nodes;

  ordered_json ranks = ordered_json::array();
  for (const up::RankVerdict& v : tick.health.ranks) {
    auto prev = steps_.find(v.rank);
    if (prev != steps_.end() && dt > 0 && v.steps > prev->second) {
      step_time_ms_[v.rank] = dt * 1000.0 / static_cast<double>(v.steps - prev->second);
    } else if (v.phase != "ready") {
      step_time_ms_.erase(v.rank);
    }
    steps_[v.rank] = v.steps;
    auto st = step_time_ms_.find(v.rank);
    ranks.push_back({{"rank", v.rank},
                     {"node", v.node},
                     {"phase", v.phase},
                     {"busy", v.busy},
                     {"hung", v.phase == "hung"},
                     {"problem", v.why},
                     {"steps", v.steps},
                     {"tokens", v.tokens},
                     {"step_time_ms", st != step_time_ms_.end() ? ordered_json(st->second)
                                                                : ordered_json(nullptr)},
                     {"progress_age_s", v.progress_age_s >= 0 ? ordered_json(v.progress_age_s)
                                                              : ordered_json(nullptr)}});
  }
  snap["ranks"] = ranks;

  ordered_json endpoint = {{"ready", tick.health.endpoint_ready}};
  MetricsBody now;
  if (api_probe && !api_probe->metrics.empty()) now = MetricsBody(api_probe->metrics.back());
  if (now.empty()) {
    metrics_.clear();
    snap["endpoint"] = endpoint;
    return snap;
  }
  const MetricsBody last = metrics_.empty() ? MetricsBody() : metrics_.back().second;
  const double last_t = metrics_.empty() ? 0 : metrics_.back().first;
  metrics_.emplace_back(tick.time, now);
  while (metrics_.size() > 2 && tick.time - metrics_.front().first > window_s_) {
    metrics_.pop_front();
  }
  const MetricsBody& oldest = metrics_.front().second;
  const double span = tick.time - last_t;
  auto rate = [&](std::string_view name) -> ordered_json {
    if (last.empty() || span <= 0) return nullptr;
    auto c = Change(last, now, name);
    return c ? OrNull(*c / span) : ordered_json(nullptr);
  };
  const MetricsBody empty;
  const MetricsBody& base = metrics_.size() > 1 ? oldest : empty;
  endpoint["running"] = OrNull(now.Sum("vllm:num_requests_running"));
  endpoint["waiting"] = OrNull(now.Sum("vllm:num_requests_waiting"));
  endpoint["prompt_tokens_per_s"] = rate("vllm:prompt_tokens_total");
  endpoint["generation_tokens_per_s"] = rate("vllm:generation_tokens_total");
  for (const auto& [key, name] : {std::pair{"ttft", "vllm:time_to_first_token_seconds"},
                                  std::pair{"itl", "vllm:inter_token_latency_seconds"}}) {
    ordered_json q = ordered_json::object();
    for (const auto& [label, p] : {std::pair{"p50", 0.5}, std::pair{"p90", 0.9},
                                   std::pair{"p99", 0.99}}) {
      q[label] = OrNull(QuantileOfChange(base, now, name, p));
    }
    endpoint[std::string(key) + "_seconds"] = q;
  }
  endpoint["kv_cache_usage"] = OrNull(now.Sum("vllm:kv_cache_usage_perc"));
  endpoint["prefix_cache_hit_rate"] =
      OrNull(RatioOfChange(base, now, "vllm:prefix_cache_hits_total",
                           "vllm:prefix_cache_queries_total"));
  endpoint["spec_acceptance"] =
      OrNull(RatioOfChange(base, now, "vllm:spec_decode_num_accepted_tokens_total",
                           "vllm:spec_decode_num_draft_tokens_total"));
  endpoint["guard_trips"] = OrNull(now.Sum("spark:memory_guard_trips_total"));
  endpoint["window_s"] = tick.time - metrics_.front().first;
  snap["endpoint"] = endpoint;
  return snap;
}

std::vector<ordered_json> DiffEvents(const ordered_json& before, const ordered_json& after) {
  std::vector<ordered_json> events;
  const double t = after.value("time", 0.0);
  auto add = [&](const char* kind, const std::string& text) {
    events.push_back({{"time", t}, {"kind", kind}, {"text", text}});
  };
  const ordered_json& sb = before.contains("status") ? before["status"] : ordered_json::object();
  const ordered_json& sa = after["status"];
  const std::string hb = sb.value("health", ""), ha = sa.value("health", "");
  if (hb != ha) {
    const std::string reason = sa.value("reason", "");
    add("health", "model " + (hb.empty() ? std::string("?") : hb) + " -> " + ha +
                      (reason.empty() ? "" : ": " + reason));
  }
  if (sa.value("restarts", 0) > sb.value("restarts", 0)) {
    add("restart", "the monitor restarted the model (restart " +
                       std::to_string(sa.value("restarts", 0)) + ")");
  }
  auto guard = [](const ordered_json& s) {
    return s.contains("memory_guard") && s["memory_guard"].is_string()
               ? s["memory_guard"].get<std::string>()
               : std::string();
  };
  if (guard(sb) != guard(sa) && !guard(sa).empty()) {
    add("guard", "memory guard " + (guard(sb).empty() ? std::string("-") : guard(sb)) + " -> " +
                     guard(sa));
  }
  auto trips = [](const ordered_json& s) {
    return s.contains("endpoint") && s["endpoint"].is_object() &&
                   s["endpoint"].contains("guard_trips") && s["endpoint"]["guard_trips"].is_number()
               ? s["endpoint"]["guard_trips"].get<double>()
               : -1.0;
  };
  if (trips(before) >= 0 && trips(after) > trips(before)) {
    add("guard", "memory guard tripped (" + std::to_string(static_cast<int>(trips(after))) +
                     " trips so far)");
  }
  std::map<std::string, ordered_json> nodes_before;
  if (before.contains("nodes")) {
    for (const auto& n : before["nodes"]) nodes_before[n.value("node", "")] = n;
  }
  for (const auto& n : after["nodes"]) {
    const std::string name = n.value("node", "");
    auto it = nodes_before.find(name);
    if (it == nodes_before.end()) continue;
    if (it->second.value("reachable", false) != n.value("reachable", false)) {
      add("node", name + (n.value("reachable", false) ? " reachable again" : " unreachable"));
    }
    std::map<std::string, std::string> lb;
    for (const auto& l : it->second["links"]) lb[l.value("device", "")] = l.value("state", "");
    for (const auto& l : n["links"]) {
      const std::string dev = l.value("device", ""), state = l.value("state", "");
      auto b = lb.find(dev);
      if (b != lb.end() && b->second != state) {
        add("fabric", name + " " + dev + " " + b->second + " -> " + state);
      }
    }
  }
  std::map<int, std::string> phases;
  if (before.contains("ranks")) {
    for (const auto& r : before["ranks"]) phases[r.value("rank", -1)] = r.value("phase", "");
  }
  for (const auto& r : after["ranks"]) {
    auto it = phases.find(r.value("rank", -1));
    const std::string phase = r.value("phase", "");
    if (it == phases.end() || it->second == phase) continue;
    std::string text = "rank " + std::to_string(r.value("rank", -1)) + " (" +
                       r.value("node", "") + ") " + it->second + " -> " + phase;
    const std::string why = r.value("problem", "");
    if (!why.empty()) text += ": " + why.substr(0, why.find('\n'));
    add("rank", text);
  }
  return events;
}

ordered_json HistoryRow(const ordered_json& s) {
  ordered_json row = {{"t", s.value("time", 0.0)}};
  ordered_json mem = ordered_json::object(), swap = ordered_json::object(),
               gpu = ordered_json::object();
  for (const auto& n : s["nodes"]) {
    const std::string name = n.value("node", "");
    if (!n.value("reachable", false)) continue;
    mem[name] = n.value("mem_available_kib", int64_t{0}) / 1048576.0;
    if (n["swap_used_kib"].is_number()) swap[name] = n["swap_used_kib"].get<double>() / 1048576.0;
    if (n["gpu"].is_object() && n["gpu"]["utilization_percent"].is_number()) {
      gpu[name] = n["gpu"]["utilization_percent"];
    }
  }
  row["mem"] = mem;
  row["swap"] = swap;
  row["gpu"] = gpu;
  const ordered_json& e = s.contains("endpoint") ? s["endpoint"] : ordered_json(nullptr);
  auto field = [&](const char* k) {
    return e.is_object() && e.contains(k) ? e[k] : ordered_json(nullptr);
  };
  row["gen_tps"] = field("generation_tokens_per_s");
  row["prompt_tps"] = field("prompt_tokens_per_s");
  row["running"] = field("running");
  row["waiting"] = field("waiting");
  row["kv"] = field("kv_cache_usage");
  return row;
}

}  // namespace spark::dashboard
