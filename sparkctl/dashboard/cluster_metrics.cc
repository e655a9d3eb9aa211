#include "sparkctl/dashboard/cluster_metrics.h"

#include <cstdio>
#include <map>

#include "base/strings.h"

namespace spark::dashboard {
namespace {

using nlohmann::ordered_json;

std::string Escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

std::string Number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

// Collects the samples of each family so its HELP/TYPE lines come once, before them.
class Families {
 public:
  void Add(const std::string& name, const char* type, const char* help, const std::string& labels,
           double value) {
    Family& f = families_[name];
    f.type = type;
    f.help = help;
    f.lines += name + "{" + labels + "} " + Number(value) + "\n";
  }
  // Adds only when `v` is a number.
  void AddJson(const std::string& name, const char* type, const char* help,
               const std::string& labels, const ordered_json& v, double scale = 1) {
    if (v.is_number()) Add(name, type, help, labels, v.get<double>() * scale);
  }
  std::string Render() const {
    std::string out;
    for (const auto& [name, f] : families_) {
      out += "# HELP " + name + " " + f.help + "\n# TYPE " + name + " " + f.type + "\n" + f.lines;
    }
    return out;
  }

 private:
  struct Family {
    std::string type, help, lines;
  };
  std::map<std::string, Family> families_;
};

}  // namespace

std::string AddLabels(std::string_view body, const std::string& labels) {
  std::string out;
  for (const std::string& line : Split(body, '\n', true)) {
    if (line.empty() || line[0] == '#') {
      out += line + "\n";
      continue;
    }
    const size_t brace = line.find('{');
    const size_t space = line.find(' ');
    if (brace != std::string::npos && (space == std::string::npos || brace < space)) {
      const bool empty_set = brace + 1 < line.size() && line[brace + 1] == '}';
      out += line.substr(0, brace + 1) + labels + (empty_set ? "" : ",") + line.substr(brace + 1) +
             "\n";
    } else if (space != std::string::npos) {
      out += line.substr(0, space) + "{" + labels + "}" + line.substr(space) + "\n";
    }
  }
  return out;
}

std::string RenderClusterMetrics(const ordered_json& s, std::string_view engine_metrics) {
  Families f;
  const ordered_json& status = s["status"];
  f.Add("sparkctl_model_ready", "gauge", "1 when every rank is ready and /ready answers 200", "",
        status.value("health", "") == "ready" ? 1 : 0);
  if (status.contains("restarts")) {
    f.AddJson("sparkctl_model_restarts_total", "counter",
              "Whole-model restarts by the monitor", "", status["restarts"]);
  }
  for (const auto& n : s["nodes"]) {
    const std::string l = "node=\"" + Escape(n.value("node", "")) + "\"";
    f.Add("sparkctl_node_up", "gauge", "1 when the node answered the probe", l,
          n.value("reachable", false) ? 1 : 0);
    if (!n.value("reachable", false)) continue;
    f.AddJson("sparkctl_node_memory_available_bytes", "gauge", "MemAvailable", l,
              n["mem_available_kib"], 1024);
    f.AddJson("sparkctl_node_memory_total_bytes", "gauge", "MemTotal", l, n["mem_total_kib"], 1024);
    f.AddJson("sparkctl_node_swap_used_bytes", "gauge", "SwapTotal - SwapFree", l,
              n["swap_used_kib"], 1024);
    f.AddJson("sparkctl_node_page_cache_bytes", "gauge", "Cached (page cache)", l,
              n["page_cache_kib"], 1024);
    f.AddJson("sparkctl_node_cma_free_bytes", "gauge", "CmaFree", l, n["cma_free_kib"], 1024);
    if (n["gpu"].is_object()) {
      const ordered_json& g = n["gpu"];
      f.AddJson("sparkctl_node_gpu_utilization_percent", "gauge", "nvidia-smi utilization.gpu",
                l, g["utilization_percent"]);
      f.AddJson("sparkctl_node_gpu_temperature_celsius", "gauge", "nvidia-smi temperature.gpu", l,
                g["temperature_c"]);
      f.AddJson("sparkctl_node_gpu_sm_clock_hertz", "gauge", "nvidia-smi clocks.sm", l,
                g["sm_clock_mhz"], 1e6);
      f.AddJson("sparkctl_node_gpu_power_watts", "gauge", "nvidia-smi power.draw", l,
                g["power_w"]);
    }
    for (const auto& link : n["links"]) {
      const std::string ll = l + ",device=\"" + Escape(link.value("device", "")) + "\"";
      f.Add("sparkctl_link_up", "gauge", "1 when the fabric link's operstate is up", ll,
            link.value("state", "") == "up" ? 1 : 0);
      if (link.contains("speed_mbps")) {
        f.AddJson("sparkctl_link_speed_bits_per_second", "gauge", "Link speed", ll,
                  link["speed_mbps"], 1e6);
      }
      if (link.contains("mtu")) f.AddJson("sparkctl_link_mtu_bytes", "gauge", "MTU", ll, link["mtu"]);
      for (const auto& [counter, rate] : link["rates"].items()) {
        f.AddJson("sparkctl_link_counter_rate", "gauge",
                  "Per-second change of a link counter (drops, RoCE, PFC pauses)",
                  ll + ",counter=\"" + Escape(counter) + "\"", rate);
      }
    }
  }
  for (const auto& r : s["ranks"]) {
    const std::string l = "node=\"" + Escape(r.value("node", "")) + "\",rank=\"" +
                          std::to_string(r.value("rank", -1)) + "\"";
    f.Add("sparkctl_rank_phase", "gauge", "1 for the rank's current phase", l + ",phase=\"" +
          Escape(r.value("phase", "")) + "\"", 1);
    f.Add("sparkctl_rank_busy", "gauge", "1 while the rank is inside a step", l,
          r.value("busy", false) ? 1 : 0);
    f.Add("sparkctl_rank_hung", "gauge", "1 when the rank is judged hung", l,
          r.value("hung", false) ? 1 : 0);
    f.AddJson("sparkctl_rank_steps_total", "counter", "Engine steps of the rank", l, r["steps"]);
    f.AddJson("sparkctl_rank_tokens_total", "counter", "Tokens the rank's steps processed", l,
              r["tokens"]);
    f.AddJson("sparkctl_rank_step_time_seconds", "gauge", "Mean step time over the last second",
              l, r["step_time_ms"], 1e-3);
    f.AddJson("sparkctl_rank_progress_age_seconds", "gauge", "Since the counters last moved", l,
              r["progress_age_s"]);
  }
  std::string out = f.Render();
  if (!engine_metrics.empty() && status.contains("endpoint_node")) {
    out += AddLabels(engine_metrics,
                     "node=\"" + Escape(status.value("endpoint_node", "")) + "\",rank=\"0\"");
  }
  return out;
}

}  // namespace spark::dashboard
