// The controller-side monitor: probe, judge, report, restart the whole model when degraded.
#include "sparkctl/up/monitor.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <ctime>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include "sparkctl/up/launcher.h"
#include "sparkctl/weights/atomic_file.h"

namespace spark::up {
namespace {

using Clock = std::chrono::steady_clock;

double Now() { return static_cast<double>(std::time(nullptr)); }

// Notices whether the engine refreshes its status file while ready (a heartbeat), so a file that
// stops changing can be taken as a hang only for engines that do refresh it.
class HeartbeatTracker {
 public:
  void See(const std::vector<NodeProbe>& probes) {
    for (const auto& p : probes) {
      for (const auto& r : p.ranks) {
        if (r.status.phase != "ready" || r.status.updated <= 0) continue;
        auto [it, fresh] = last_.emplace(r.rank, r.status.updated);
        if (!fresh && it->second != r.status.updated) seen_ = true;
        it->second = r.status.updated;
      }
    }
  }
  void Reset() { last_.clear(); }
  bool seen() const { return seen_; }

 private:
  std::map<int, double> last_;
  bool seen_ = false;
};

void WriteHealth(const std::string& dir, const ClusterHealth& h, const UpState& s) {
  nlohmann::ordered_json j = {{"schema", "sparkctl-monitor-health/v1"},
                              {"health", HealthName(h.health)},
                              {"reason", h.reason},
                              {"updated", Now()},
                              {"restarts", s.restarts},
                              {"auto_recover", s.auto_recover},
                              {"monitor_pid", getpid()}};
  weights::WriteFileAtomically(HealthPath(dir), j.dump(2) + "\n").IgnoreError();
}

bool ProcessMatches(int pid, const std::string& needle) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline");
  std::stringstream ss;
  ss << f.rdbuf();
  std::string cmd = ss.str();
  for (char& c : cmd) c = c == '\0' ? ' ' : c;
  return !cmd.empty() && cmd.find(needle) != std::string::npos;
}

}  // namespace

int RunningMonitorPid(const std::string& state_dir) {
  auto text = weights::ReadWholeFile(MonitorPidPath(state_dir));
  if (!text.ok()) return 0;
  const int pid = std::atoi(text->c_str());
  if (pid <= 0 || kill(pid, 0) != 0) return 0;
  return ProcessMatches(pid, "sparkctl monitor ") ? pid : 0;
}

Status StopMonitor(const std::string& state_dir) {
  const int pid = RunningMonitorPid(state_dir);
  if (pid > 0) {
    kill(pid, SIGTERM);
    for (int i = 0; i < 50 && kill(pid, 0) == 0 && ProcessMatches(pid, "sparkctl monitor "); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    if (kill(pid, 0) == 0 && ProcessMatches(pid, "sparkctl monitor ")) kill(pid, SIGKILL);
  }
  unlink(MonitorPidPath(state_dir).c_str());
  return Status::Ok();
}

Result<int> SpawnMonitor(const std::vector<std::string>& argv, const std::string& state_dir) {
  if (argv.empty()) return InvalidArgumentError("monitor: empty command line");
  unlink(MonitorPidPath(state_dir).c_str());
  // Everything the child needs is prepared before fork: only async-signal-safe calls after it.
  const std::string log = MonitorLogPath(state_dir);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t child = fork();
  if (child < 0) return ErrnoError(errno, "fork");
  if (child == 0) {
    setsid();
    if (fork() != 0) _exit(0);  // the grandchild is adopted by init: no zombie, no terminal
    const int in = open("/dev/null", O_RDONLY);
    const int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in >= 0) dup2(in, 0);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    execv(args[0], args.data());
    _exit(127);
  }
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 50; ++i) {
    if (int pid = RunningMonitorPid(state_dir)) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return UnavailableError("the monitor did not start; see " + MonitorLogPath(state_dir));
}

Status RestartModel(ssh::Transport& transport, const std::string& state_dir, UpState* state) {
  // The restart is on record before any rank stops or starts: whoever sees the new ranks ready
  // (sparkctl status, which reads the state after probing) sees it counted, and an attempt that
  // fails counts too.
  state->restarts++;
  SPARK_RETURN_IF_ERROR(SaveState(state_dir, *state));
  SPARK_RETURN_IF_ERROR(StopRanks(transport, state->plan));
  SPARK_ASSIGN_OR_RETURN(auto started, StartRanks(transport, state->plan));
  for (const auto& s : started) {
    state->pids[s.rank] = s.pid;
    state->systemd[s.rank] = s.systemd;
  }
  state->started = Now();
  return SaveState(state_dir, *state);
}

Status RunMonitor(ssh::Transport& transport, const std::string& state_dir,
                  const MonitorOptions& o) {
  HeartbeatTracker heartbeat;
  // Plain time points with flags: GCC 12 misreads optional<time_point> as maybe-uninitialized.
  Clock::time_point degraded_since, restarted_at;
  bool degraded = false, restarted = false;
  int in_a_row = 0;
  Health last = Health::kDown;
  for (int poll = 0; o.max_polls == 0 || poll < o.max_polls; ++poll) {
    auto state = LoadState(state_dir);
    if (!state.ok()) {
      if (state.status().code() != StatusCode::kNotFound) return state.status();
      o.log("state removed (sparkctl down): the monitor stops");
      return Status::Ok();
    }
    // Liveness only: the link counters and nvidia-smi that status shows are not polled here.
    std::vector<NodeProbe> probes =
        ProbeNodes(transport, state->plan, 0, std::chrono::seconds(15), /*node_extras=*/false);
    heartbeat.See(probes);
    ClusterHealth h = Assess(state->plan, probes, {.heartbeat_seen = heartbeat.seen()});
    const auto now = Clock::now();
    if (h.health == Health::kStarting && restarted && now - restarted_at > o.ready_timeout) {
      h.health = Health::kDegraded;
      h.reason = "not ready " + std::to_string(o.ready_timeout.count()) + " s after the restart";
    }
    WriteHealth(state_dir, h, *state);
    if (h.health != last) {
      o.log(std::string(HealthName(h.health)) + (h.reason.empty() ? "" : ": " + h.reason));
      last = h.health;
    }
    if (h.health == Health::kReady) {
      if (in_a_row > 0) o.log("recovered: ready after restart " + std::to_string(state->restarts));
      in_a_row = 0;
      restarted = false;
    }
    if (h.health != Health::kDegraded && h.health != Health::kDown) {
      degraded = false;
    } else if (!degraded) {
      degraded = true;
      degraded_since = now;
    } else if (now - degraded_since >= o.grace && state->auto_recover) {
      if (in_a_row >= o.max_restarts) {
        if (in_a_row == o.max_restarts) {
          o.log("giving up after " + std::to_string(in_a_row) +
                " restarts in a row; fix the cause and run sparkctl up again");
          ++in_a_row;
        }
      } else {
        o.log("restarting the whole model (restart " + std::to_string(state->restarts + 1) + ")");
        Status s = RestartModel(transport, state_dir, &*state);
        if (!s.ok()) o.log("restart failed: " + s.message());
        ++in_a_row;
        heartbeat.Reset();
        degraded = false;
        restarted = true;
        restarted_at = Clock::now();
        last = Health::kDown;
      }
    }
    std::this_thread::sleep_for(o.poll);
  }
  return Status::Ok();
}

}  // namespace spark::up
