#include "sparkctl/dashboard/watch_view.h"

#include <cstdio>
#include <ctime>

namespace spark::dashboard {
namespace {

using nlohmann::ordered_json;

// A number with `format`, or "n/a" when the value is absent or not a number.
std::string Num(const ordered_json& v, const char* format, double scale = 1) {
  if (!v.is_number()) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v.get<double>() * scale);
  return buf;
}

ordered_json Field(const ordered_json& o, const char* key) {
  return o.is_object() && o.contains(key) ? o[key] : ordered_json(nullptr);
}

constexpr double kGiBPerKiB = 1.0 / (1024 * 1024);

}  // namespace

std::string RenderWatch(const ordered_json& s, const ordered_json& events, int max_events) {
  std::string o;
  char buf[320];
  const ordered_json& status = s["status"];
  std::snprintf(buf, sizeof buf, "model %s  (%s)  endpoint %s\n",
                status.value("model", "-").c_str(), status.value("health", "?").c_str(),
                status.value("endpoint", "-").c_str());
  o += buf;
  std::snprintf(buf, sizeof buf, "%-10s %-7s %-14s %-8s %-9s %-9s %-6s %-6s %-8s %-7s %s\n", "NODE",
                "SSH", "MEMAVAIL GiB", "SWAP", "PAGECACHE", "CMA FREE", "GPU%", "TEMP", "SM MHz",
                "POWER", "LINKS");
  o += buf;
  for (const auto& n : s["nodes"]) {
    std::string links;
    for (const auto& l : n["links"]) {
      links += (links.empty() ? "" : " ") + l.value("device", "") + ":" + l.value("state", "") +
               "/" + Num(Field(l, "speed_mbps"), "%.0f") + "M/" + Num(Field(l, "mtu"), "%.0f");
    }
    const ordered_json g = Field(n, "gpu");
    std::snprintf(
        buf, sizeof buf, "%-10s %-7s %-14s %-8s %-9s %-9s %-6s %-6s %-8s %-7s %s\n",
        n.value("node", "").c_str(), n.value("reachable", false) ? "ok" : "UNREACH",
        (Num(n["mem_available_kib"], "%.1f", kGiBPerKiB) + "/" +
         Num(n["mem_total_kib"], "%.1f", kGiBPerKiB)).c_str(),
        Num(n["swap_used_kib"], "%.2f", kGiBPerKiB).c_str(),
        Num(n["page_cache_kib"], "%.1f", kGiBPerKiB).c_str(),
        Num(n["cma_free_kib"], "%.2f", kGiBPerKiB).c_str(),
        Num(Field(g, "utilization_percent"), "%.0f").c_str(),
        Num(Field(g, "temperature_c"), "%.0f").c_str(), Num(Field(g, "sm_clock_mhz"), "%.0f").c_str(),
        Num(Field(g, "power_w"), "%.1f").c_str(), links.empty() ? "-" : links.c_str());
    o += buf;
  }
  std::snprintf(buf, sizeof buf, "\n%-5s %-10s %-11s %-6s %-12s %-10s %-10s\n", "RANK", "NODE",
                "PHASE", "STATE", "STEP ms", "LAST STEP", "STEPS");
  o += buf;
  for (const auto& r : s["ranks"]) {
    const char* state = r.value("hung", false) ? "HUNG" : r.value("busy", false) ? "busy" : "idle";
    std::snprintf(buf, sizeof buf, "%-5d %-10s %-11s %-6s %-12s %-10s %llu\n", r.value("rank", -1),
                  r.value("node", "").c_str(), r.value("phase", "").c_str(), state,
                  Num(r["step_time_ms"], "%.1f").c_str(),
                  (Num(r["progress_age_s"], "%.0f") + " s").c_str(),
                  static_cast<unsigned long long>(r.value("steps", uint64_t{0})));
    o += buf;
  }
  const ordered_json e = Field(s, "endpoint");
  if (e.is_object()) {
    const ordered_json ttft = Field(e, "ttft_seconds"), itl = Field(e, "itl_seconds");
    std::snprintf(
        buf, sizeof buf,
        "\nendpoint  ready %s  running %s  waiting %s  prompt %s tok/s  generation %s tok/s\n"
        "          TTFT p50/p90/p99 %s/%s/%s ms  ITL %s/%s/%s ms\n"
        "          KV cache %s%%  prefix hits %s%%  speculative acceptance %s%%\n",
        e.value("ready", false) ? "yes" : "no", Num(e["running"], "%.0f").c_str(),
        Num(e["waiting"], "%.0f").c_str(), Num(e["prompt_tokens_per_s"], "%.1f").c_str(),
        Num(e["generation_tokens_per_s"], "%.1f").c_str(),
        Num(Field(ttft, "p50"), "%.0f", 1e3).c_str(), Num(Field(ttft, "p90"), "%.0f", 1e3).c_str(),
        Num(Field(ttft, "p99"), "%.0f", 1e3).c_str(), Num(Field(itl, "p50"), "%.1f", 1e3).c_str(),
        Num(Field(itl, "p90"), "%.1f", 1e3).c_str(), Num(Field(itl, "p99"), "%.1f", 1e3).c_str(),
        Num(e["kv_cache_usage"], "%.1f", 100).c_str(),
        Num(e["prefix_cache_hit_rate"], "%.1f", 100).c_str(),
        Num(e["spec_acceptance"], "%.1f", 100).c_str());
    o += buf;
  }
  if (!status.value("reason", "").empty()) o += "DEGRADED: " + status.value("reason", "") + "\n";
  if (events.is_array() && !events.empty()) {
    o += "\nevents\n";
    const size_t from = events.size() > static_cast<size_t>(max_events)
                            ? events.size() - static_cast<size_t>(max_events)
                            : 0;
    for (size_t i = from; i < events.size(); ++i) {
      const std::time_t t = static_cast<std::time_t>(events[i].value("time", 0.0));
      char when[16];
      std::strftime(when, sizeof when, "%H:%M:%S", std::localtime(&t));
      o += std::string("  ") + when + " " + events[i].value("kind", "") + "  " +
           events[i].value("text", "") + "\n";
    }
  }
  return o;
}

}  // namespace spark::dashboard
