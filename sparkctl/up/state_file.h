// The controller's record of what `sparkctl up` started: the launch plan (ranks, nodes, files,
// the hash that decides "already up" vs "restart"), the pids, when and how often it restarted,
// and the monitor. Kept per cluster in a directory on the controller:
//   <state root>/<cluster>/state.json     this record (written atomically)
//   <state root>/<cluster>/monitor.pid    the monitor's pid (monitor.h)
//   <state root>/<cluster>/monitor.log    what the monitor saw and did
//   <state root>/<cluster>/health.json    the monitor's latest verdict
//   <state root>/<cluster>/last-state.json  the record of the last model `down` stopped, so
//                                          `sparkctl logs` still finds its ranks' logs
// Default state root: /var/lib/sparkctl/up.
// Thread-safety: functions; concurrent writers of one file: the last rename wins.
#pragma once

#include <map>
#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/up/launch_plan.h"

namespace spark::up {

inline constexpr char kDefaultStateRoot[] = "/var/lib/sparkctl/up";
inline constexpr char kStateSchema[] = "sparkctl-up-state/v1";

struct UpState {
  std::string cluster_file;  // absolute
  std::string profile_file;  // absolute
  LaunchPlan plan;
  std::map<int, int> pids;   // rank -> engine pid at the last start
  std::map<int, bool> systemd;  // rank -> started as a systemd unit
  double started = 0;        // seconds since the epoch of the last (re)start
  int restarts = 0;          // whole-model restarts by the monitor
  bool auto_recover = true;
};

// The state directory of a cluster: <root>/<SafeName(cluster name)>.
std::string StateDir(const std::string& root, const std::string& cluster_name);
std::string StatePath(const std::string& dir);    // dir + "/state.json"
std::string MonitorPidPath(const std::string& dir);
std::string MonitorLogPath(const std::string& dir);
std::string HealthPath(const std::string& dir);

nlohmann::ordered_json ToJson(const UpState& state);
// InvalidArgument naming `file` for JSON that is not a state record of this schema.
Result<UpState> ParseState(const std::string& text, const std::string& file);

// NotFound when nothing runs (no state.json); the errors of ParseState.
Result<UpState> LoadState(const std::string& dir);
// Creates the directory and writes state.json atomically. Errors name the file.
Status SaveState(const std::string& dir, const UpState& state);
// Moves state.json to last-state.json (OK when absent).
Status RemoveState(const std::string& dir);
// The record `down` kept (last-state.json). NotFound when there is none.
Result<UpState> LoadLastState(const std::string& dir);

}  // namespace spark::up
