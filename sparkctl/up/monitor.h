// The monitor: a controller-side process that `sparkctl up` starts (detached, its own session,
// pidfile monitor.pid in the state directory) and `sparkctl down` stops. Every second it probes
// every rank (launcher.h) and writes its verdict to health.json; a rank that exits, fails,
// stops answering (stopped process, or a heartbeat that stopped) is reported in monitor.log
// within a few seconds, naming the rank and its last log lines. With auto recovery (the state's
// auto_recover, default on) it then restarts the whole model (all ranks: a single rank cannot
// rejoin), at most max_restarts times in a row without reaching ready.
// It exits by itself when the state file disappears (`down`) or its launch hash changes under
// it and no longer matches (a new `up` starts a new monitor).
// Thread-safety: RunMonitor blocks its thread; the other functions are reentrant.
#pragma once

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/ssh/transport.h"
#include "sparkctl/up/node_status.h"
#include "sparkctl/up/state_file.h"

namespace spark::up {

struct MonitorOptions {
  std::chrono::milliseconds poll{1000};
  // A degraded verdict must hold for this long before recovery starts. Default: 1 s.
  std::chrono::milliseconds grace{1000};
  // Whole-model restarts in a row that do not reach ready before the monitor gives up.
  int max_restarts = 5;
  // How long a restarted model may take to become ready. Default: 10 min.
  std::chrono::seconds ready_timeout{600};
  // Stop after this many polls (tests); 0 = until the state file goes away.
  int max_polls = 0;
  std::function<void(const std::string&)> log;  // one line per event (required)
};

// Watches the model recorded in `state_dir` until `down` removes its state. Returns OK then;
// the errors of LoadState for an unreadable state.
Status RunMonitor(ssh::Transport& transport, const std::string& state_dir,
                  const MonitorOptions& options);

// One recovery: stop every rank, start them all again, record the new pids and restart count.
Status RestartModel(ssh::Transport& transport, const std::string& state_dir, UpState* state);

// Starts `argv` (a `sparkctl monitor ...` command line) detached: a new session, stdin from
// /dev/null, stdout and stderr appended to monitor.log. Returns its pid.
Result<int> SpawnMonitor(const std::vector<std::string>& argv, const std::string& state_dir);

// Stops the monitor named by monitor.pid (SIGTERM, then SIGKILL after 5 s) when it runs;
// removes the pidfile. OK when none runs.
Status StopMonitor(const std::string& state_dir);

// The pid in monitor.pid when that process runs and is a sparkctl monitor; 0 otherwise.
int RunningMonitorPid(const std::string& state_dir);

}  // namespace spark::up
