// The controller-side state of `sparkctl up`, as JSON.
#include "sparkctl/up/state_file.h"

#include <cerrno>
#include <filesystem>

#include "sparkctl/weights/atomic_file.h"

namespace spark::up {
namespace {

using nlohmann::ordered_json;

ordered_json EnvJson(const std::vector<netplan::EnvVar>& env) {
  ordered_json j = ordered_json::array();
  for (const auto& e : env) j.push_back({{"name", e.name}, {"value", e.value}});
  return j;
}

ordered_json PlanJson(const LaunchPlan& p) {
  ordered_json ranks = ordered_json::array();
  for (const auto& r : p.ranks) {
    ranks.push_back({{"rank", r.rank}, {"node", r.node}, {"address", r.address},
                     {"control_address", r.control_address}, {"argv", r.argv}, {"env", EnvJson(r.env)}, {"unit", r.unit},
                     {"status_path", r.status_path}, {"pid_path", r.pid_path},
                     {"log_path", r.log_path}});
  }
  return {{"cluster", p.cluster},   {"hash", p.hash},         {"served_name", p.served_name},
          {"endpoint", p.endpoint}, {"api_node", p.api_node}, {"api_key_file", p.api_key_file},
          {"tls_cert", p.tls_cert}, {"tls_fingerprint", p.tls_fingerprint},
          {"advertised_host", p.advertised_host}, {"clear_text", p.clear_text},
          {"memlock", p.memlock},   {"stop_deadline_s", p.stop_deadline_s}, {"ranks", ranks}};
}

LaunchPlan PlanFromJson(const nlohmann::json& j) {
  LaunchPlan p;
  p.cluster = j.at("cluster");
  p.hash = j.at("hash");
  p.served_name = j.at("served_name");
  p.endpoint = j.at("endpoint");
  p.api_node = j.at("api_node");
  p.api_key_file = j.at("api_key_file");
  p.tls_cert = j.value("tls_cert", "");  // State written before TLS existed: plain HTTP.
  p.tls_fingerprint = j.value("tls_fingerprint", "");
  p.advertised_host = j.value("advertised_host", "");
  p.clear_text = j.value("clear_text", false);
  p.memlock = j.at("memlock");
  p.stop_deadline_s = j.at("stop_deadline_s");
  for (const auto& r : j.at("ranks")) {
    RankLaunch rank;
    rank.rank = r.at("rank");
    rank.node = r.at("node");
    rank.address = r.at("address");
    // State written before the control plane existed: the management address was used.
    rank.control_address = r.value("control_address", rank.address);
    rank.argv = r.at("argv").get<std::vector<std::string>>();
    for (const auto& e : r.at("env")) rank.env.push_back({e.at("name"), e.at("value")});
    rank.unit = r.at("unit");
    rank.status_path = r.at("status_path");
    rank.pid_path = r.at("pid_path");
    rank.log_path = r.at("log_path");
    p.ranks.push_back(std::move(rank));
  }
  return p;
}

}  // namespace

std::string StateDir(const std::string& root, const std::string& cluster_name) {
  return root + "/" + SafeName(cluster_name);
}
std::string StatePath(const std::string& dir) { return dir + "/state.json"; }
std::string MonitorPidPath(const std::string& dir) { return dir + "/monitor.pid"; }
std::string MonitorLogPath(const std::string& dir) { return dir + "/monitor.log"; }
std::string HealthPath(const std::string& dir) { return dir + "/health.json"; }

ordered_json ToJson(const UpState& s) {
  ordered_json pids = ordered_json::object();
  for (const auto& [rank, pid] : s.pids) pids[std::to_string(rank)] = pid;
  ordered_json systemd = ordered_json::object();
  for (const auto& [rank, on] : s.systemd) systemd[std::to_string(rank)] = on;
  return {{"schema", kStateSchema},     {"cluster_file", s.cluster_file},
          {"profile_file", s.profile_file}, {"plan", PlanJson(s.plan)},
          {"pids", pids},               {"systemd", systemd},
          {"started", s.started},       {"restarts", s.restarts},
          {"auto_recover", s.auto_recover}};
}

Result<UpState> ParseState(const std::string& text, const std::string& file) {
  try {
    nlohmann::json j = nlohmann::json::parse(text);
    if (j.value("schema", "") != kStateSchema) {
      return InvalidArgumentError(file + ": not a " + std::string(kStateSchema) +
                                  " record; remove it if nothing runs");
    }
    UpState s;
    s.cluster_file = j.at("cluster_file");
    s.profile_file = j.at("profile_file");
    s.plan = PlanFromJson(j.at("plan"));
    for (const auto& [k, v] : j.at("pids").items()) s.pids[std::stoi(k)] = v.get<int>();
    for (const auto& [k, v] : j.at("systemd").items()) s.systemd[std::stoi(k)] = v.get<bool>();
    s.started = j.at("started");
    s.restarts = j.at("restarts");
    s.auto_recover = j.at("auto_recover");
    return s;
  } catch (const std::exception& e) {
    return InvalidArgumentError(file + ": unreadable state record: " + e.what() +
                                "; remove it if nothing runs");
  }
}

Result<UpState> LoadState(const std::string& dir) {
  auto text = weights::ReadWholeFile(StatePath(dir));
  if (!text.ok()) {
    if (text.status().code() == StatusCode::kNotFound) {
      return NotFoundError("nothing is up (no " + StatePath(dir) + "): run `sparkctl up -p PROFILE`");
    }
    return text.status();
  }
  return ParseState(*text, StatePath(dir));
}

Status SaveState(const std::string& dir, const UpState& state) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoError(ec.value(), "create " + dir);
  return weights::WriteFileAtomically(StatePath(dir), ToJson(state).dump(2) + "\n");
}

Status RemoveState(const std::string& dir) {
  std::error_code ec;
  if (!std::filesystem::exists(StatePath(dir), ec)) return Status::Ok();
  std::filesystem::rename(StatePath(dir), dir + "/last-state.json", ec);
  if (ec) return ErrnoError(ec.value(), "rename " + StatePath(dir));
  return Status::Ok();
}

Result<UpState> LoadLastState(const std::string& dir) {
  const std::string path = dir + "/last-state.json";
  SPARK_ASSIGN_OR_RETURN(std::string text, weights::ReadWholeFile(path));
  return ParseState(text, path);
}

}  // namespace spark::up
