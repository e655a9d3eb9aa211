// `sparkctl up | down | status | logs` (docs/up.md), and `sparkctl monitor`, the controller-side
// watcher that `up` starts in the background.
#include <limits.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "sparkctl/cli/families.h"
#include "sparkctl/dashboard/collector.h"
#include "sparkctl/dashboard/watch_view.h"
#include "sparkctl/fabric/apply.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/up/launcher.h"
#include "sparkctl/up/logs.h"
#include "sparkctl/up/monitor.h"
#include "sparkctl/up/up.h"
#include "sparkctl/weights/atomic_file.h"

namespace spark::cli {
namespace {

using nlohmann::ordered_json;

struct CommonOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_root = up::kDefaultStateRoot;
  bool json = false;
  bool accept_new = false;
};

void AddCommon(CLI::App* cmd, CommonOptions& o) {
  AddClusterFlag(cmd, &o.cluster_file);
  cmd->add_option("--state-root", o.state_root,
                  "Where the controller records what runs (default /var/lib/sparkctl/up)");
  cmd->add_flag("--accept-new", o.accept_new, "Trust unknown host keys on first contact");
}

std::string Absolute(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::absolute(path, ec);
  return ec ? path : p.lexically_normal().string();
}

// The cluster, its transport and the state directory of the model that runs on it.
struct Cluster {
  netplan::ClusterSpec spec;
  std::unique_ptr<ssh::Transport> transport;
  std::string state_dir;
};

Result<Cluster> OpenCluster(const CommonOptions& o) {
  Cluster c;
  SPARK_ASSIGN_OR_RETURN(c.spec, inventory::LoadClusterFile(o.cluster_file));
  SPARK_ASSIGN_OR_RETURN(c.transport, host::MakeTransport(c.spec, {.accept_new = o.accept_new}));
  c.state_dir = up::StateDir(o.state_root, c.spec.name);
  return c;
}

// ---- up ----

struct UpCliOptions {
  CommonOptions common;
  std::string profile_file;
  std::string engine;
  bool plan_only = false;
  bool yes = false;
  bool sync_weights = false;
  bool no_auto_recover = false;
  int master_port = 29500;
  int timeout_s = 600;
};

// Prints steps and the per-rank progress on stderr; redraws in place on a terminal.
class TextObserver final : public up::UpObserver {
 public:
  TextObserver(bool json, bool yes) : json_(json), yes_(yes), tty_(isatty(STDERR_FILENO)) {}
  void OnStep(const up::StepReport& s) override {
    if (json_) return;
    EndProgress();
    std::fprintf(stderr, "%-13s %-12s %5.1f s\n", s.name.c_str(), s.result.c_str(), s.seconds);
    if (!s.detail.empty() && s.result != "failed") std::fprintf(stderr, "%s", s.detail.c_str());
  }
  void OnProgress(const up::ClusterHealth& h) override {
    if (json_) return;
    const std::string text = up::RenderProgress(h);
    if (text == last_) return;
    if (tty_ && lines_ > 0) std::fprintf(stderr, "\x1b[%dA\x1b[J", lines_);
    std::fprintf(stderr, "%s", text.c_str());
    lines_ = 0;
    for (char c : text) lines_ += c == '\n';
    last_ = text;
  }
  bool Confirm(const std::string& what) override {
    if (yes_) return true;
    if (json_ || !isatty(STDIN_FILENO)) return false;
    std::fprintf(stderr, "%s? [y/N] ", what.c_str());
    std::string answer;
    return std::getline(std::cin, answer) && (answer == "y" || answer == "yes");
  }

 private:
  void EndProgress() {
    lines_ = 0;
    last_.clear();
  }
  bool json_, yes_, tty_;
  int lines_ = 0;
  std::string last_;
};

std::string ApiKeyText(const up::LaunchPlan& plan) {
  return plan.api_key_file.empty() ? "none (loopback endpoint, no key)"
                                   : plan.api_key_file + " on " + plan.api_node;
}

Status StartMonitorFor(const std::string& cluster_file, const CommonOptions& c,
                       const std::string& state_dir) {
  SPARK_RETURN_IF_ERROR(up::StopMonitor(state_dir));
  std::vector<std::string> argv = {SelfDir() + "/sparkctl", "monitor", "-c", cluster_file,
                                   "--state-root", Absolute(c.state_root)};
  return up::SpawnMonitor(argv, state_dir).status();
}

int RunUpCommand(const UpCliOptions& o) {
  // The profile is checked against the local engine; the nodes run their bundle's (the same
  // build when they are of this machine), or --engine in its place.
  const std::string engine_binary = o.engine.empty() ? DefaultEngineBinary() : o.engine;
  const std::string schema = o.common.json ? "sparkctl-up/v1" : "";
  auto engine = profile::QueryEngine(engine_binary);
  if (!engine.ok()) return ReportError(engine.status(), schema);
  // The checks of `profile check`, files included: what it refuses, up refuses.
  profile::ProfileCheck check = profile::CheckProfileFile(o.profile_file, &*engine);
  if (!check.ok()) return ReportError(check.ToStatus(), schema);
  for (const std::string& note : check.notes) std::fprintf(stderr, "note: %s\n", note.c_str());
  const profile::Profile* prof = &*check.profile;
  auto cluster = OpenCluster(o.common);
  if (!cluster.ok()) return ReportError(cluster.status(), schema);
  up::UpOptions u;
  u.cluster_file = Absolute(o.common.cluster_file);
  u.profile_file = Absolute(o.profile_file);
  u.state_dir = cluster->state_dir;
  u.engine_binary = o.engine;
  u.master_port = o.master_port;
  u.plan_only = o.plan_only;
  u.sync_weights = o.sync_weights;
  u.auto_recover = !o.no_auto_recover;
  u.ready_timeout = std::chrono::seconds(o.timeout_s);
  TextObserver observer(o.common.json, o.yes);
  up::UpReport report;
  // The old monitor must not "recover" ranks that up is about to replace.
  const bool had_monitor = up::RunningMonitorPid(u.state_dir) != 0;
  if (!o.plan_only) up::StopMonitor(u.state_dir).IgnoreError();
  Status s = up::RunUp(*cluster->transport, cluster->spec, *prof, u, observer, &report);
  if (s.ok() && !o.plan_only) s = StartMonitorFor(u.cluster_file, o.common, u.state_dir);
  if (!s.ok() && had_monitor && report.action.empty() && up::LoadState(u.state_dir).ok()) {
    StartMonitorFor(u.cluster_file, o.common, u.state_dir).IgnoreError();  // leave it as it was
  }
  if (o.common.json) {
    ordered_json steps = ordered_json::array();
    for (const auto& st : report.steps) {
      steps.push_back({{"name", st.name}, {"result", st.result}, {"detail", st.detail},
                       {"seconds", st.seconds}});
    }
    ordered_json j = {{"schema", "sparkctl-up/v1"}, {"ok", s.ok()},
                      {"action", report.action},    {"steps", steps},
                      {"endpoint", report.plan.endpoint}, {"endpoint_node", report.plan.api_node},
                      {"model", report.plan.served_name}, {"api_key_file", report.plan.api_key_file},
                      {"tls_fingerprint", report.plan.tls_fingerprint.empty()
                                              ? ordered_json(nullptr)
                                              : ordered_json(report.plan.tls_fingerprint)},
                      {"clear_text", report.plan.clear_text},
                      {"state_dir", u.state_dir},   {"seconds", report.seconds}};
    if (!s.ok()) j["error"] = s.message();
    std::printf("%s\n", j.dump(2).c_str());
  } else if (s.ok()) {
    std::printf("%s in %.1f s\n", report.action.c_str(), report.seconds);
    if (!o.plan_only || report.action == "already up") {
      std::printf("endpoint  %s (on %s)\nmodel     %s\napi key   %s\n",
                  report.plan.endpoint.c_str(), report.plan.api_node.c_str(),
                  report.plan.served_name.c_str(), ApiKeyText(report.plan).c_str());
      if (!report.plan.tls_fingerprint.empty()) {
        std::printf("tls       SHA-256 %s\n", report.plan.tls_fingerprint.c_str());
      }
      if (report.plan.clear_text) {
        std::printf("warning   off loopback without TLS: the API key travels in clear text "
                    "(api.tls; `sparkctl tls selfsigned`)\n");
      }
      std::printf("status    sparkctl status -c %s   logs: sparkctl logs -c %s\n",
                  o.common.cluster_file.c_str(), o.common.cluster_file.c_str());
    }
  }
  if (s.ok()) return kExitOk;
  if (o.common.json) return s.code() == StatusCode::kCancelled ? kExitNeedsInput : kExitFailed;
  ReportError(s);
  return s.code() == StatusCode::kCancelled ? kExitNeedsInput : kExitFailed;
}

// ---- down ----

struct DownOptions {
  CommonOptions common;
  bool reset_network = false;
};

int RunDownCommand(const DownOptions& o) {
  auto cluster = OpenCluster(o.common);
  if (!cluster.ok()) return ReportError(cluster.status(), o.common.json ? "sparkctl-down/v1" : "");
  up::StopMonitor(cluster->state_dir).IgnoreError();
  std::vector<std::string> lines;
  Status s = up::Down(*cluster->transport, cluster->state_dir, &lines);
  const bool nothing = s.code() == StatusCode::kNotFound;
  if (nothing) s = Status::Ok();
  std::string network = "kept";
  if (s.ok() && o.reset_network && cluster->spec.fabric.kind && cluster->spec.nodes.size() > 1) {
    auto reset = fabric::ResetCluster(*cluster->transport, cluster->spec, {});
    s = reset.status();
    network = "reset";
    if (reset.ok()) {
      for (const auto& n : reset->nodes) {
        if (!n.status.ok()) s = n.status;
      }
    }
  }
  if (o.common.json) {
    ordered_json j = {{"schema", "sparkctl-down/v1"}, {"ok", s.ok()}, {"was_up", !nothing},
                      {"ranks", lines}, {"network", network}};
    if (!s.ok()) j["error"] = s.message();
    std::printf("%s\n", j.dump(2).c_str());
    return s.ok() ? kExitOk : kExitFailed;
  }
  if (!s.ok()) return ReportError(s);
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  std::printf("%s; weights kept; network %s\n", nothing ? "nothing was up" : "down", network.c_str());
  return kExitOk;
}

// ---- status ----

struct StatusOptions {
  CommonOptions common;
  bool watch = false;
  int interval_s = 1;
};

std::string MonitorLine(const std::string& dir) {
  const int pid = up::RunningMonitorPid(dir);
  std::string line = pid ? "monitor   pid " + std::to_string(pid) : "monitor   not running";
  auto health = weights::ReadWholeFile(up::HealthPath(dir));
  if (health.ok()) {
    auto j = nlohmann::json::parse(*health, nullptr, false);
    if (j.is_object()) {
      line += ", restarts " + std::to_string(j.value("restarts", 0)) +
              (j.value("auto_recover", true) ? ", auto recovery on" : ", auto recovery off");
    }
  }
  return line + "  (" + up::MonitorLogPath(dir) + ")";
}

int StatusOnce(Cluster& c, const StatusOptions& o) {
  auto state = up::LoadState(c.state_dir);
  if (!state.ok()) {
    if (o.common.json) {
      ordered_json j = {{"schema", "sparkctl-status/v1"}, {"health", "down"},
                        {"reason", state.status().message()}};
      std::printf("%s\n", j.dump(2).c_str());
      return state.status().code() == StatusCode::kNotFound ? kExitOk : kExitFailed;
    }
    if (state.status().code() == StatusCode::kNotFound) {
      std::printf("%s\n", state.status().message().c_str());
      return kExitOk;
    }
    return ReportError(state.status());
  }
  auto probes = up::ProbeNodes(*c.transport, state->plan, /*metrics_samples=*/2);
  up::ClusterHealth h = up::Assess(state->plan, probes);
  // The restart count as of now, not as of before the probe (which takes a second or more): the
  // monitor records a restart before it starts any rank, so ranks that probed ready after a
  // restart come with that restart counted.
  if (auto fresh = up::LoadState(c.state_dir); fresh.ok()) state->restarts = fresh->restarts;
  if (o.common.json) {
    ordered_json j = up::StatusJson(state->plan, probes, h);
    j["restarts"] = state->restarts;
    j["monitor_pid"] = up::RunningMonitorPid(c.state_dir);
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("%s%s\n", up::RenderStatus(state->plan, probes, h).c_str(),
                MonitorLine(c.state_dir).c_str());
  }
  std::fflush(stdout);
  return h.health == up::Health::kReady ? kExitOk : kExitFailed;
}

int RunStatusCommand(const StatusOptions& o) {
  auto cluster = OpenCluster(o.common);
  if (!cluster.ok()) return ReportError(cluster.status(), o.common.json ? "sparkctl-status/v1" : "");
  if (!o.watch) return StatusOnce(*cluster, o);
  if (!o.common.json) {
    // The dashboard's collector and its view: memory, GPU, links, ranks, endpoint and events.
    dashboard::History history;
    dashboard::Collector collector(*cluster->transport, cluster->state_dir, history);
    while (true) {
      const auto next = std::chrono::steady_clock::now() + std::chrono::seconds(o.interval_s);
      collector.Tick();
      if (isatty(STDOUT_FILENO)) std::printf("\x1b[H\x1b[2J");
      std::time_t now = std::time(nullptr);
      std::printf("%s%s%s\n", std::ctime(&now),
                  dashboard::RenderWatch(history.Latest(), history.Events()).c_str(),
                  MonitorLine(cluster->state_dir).c_str());
      std::fflush(stdout);
      std::this_thread::sleep_until(next);
    }
  }
  while (true) {
    if (!o.common.json && isatty(STDOUT_FILENO)) std::printf("\x1b[H\x1b[2J");
    std::time_t now = std::time(nullptr);
    if (!o.common.json) std::printf("%s", std::ctime(&now));
    StatusOnce(*cluster, o);
    std::this_thread::sleep_for(std::chrono::seconds(o.interval_s));
  }
}

// ---- logs ----

struct LogsOptions {
  CommonOptions common;
  int rank = -1;
  bool follow = false;
  std::string since;
  int lines = 0;
};

int RunLogsCommand(const LogsOptions& o) {
  auto cluster = OpenCluster(o.common);
  if (!cluster.ok()) return ReportError(cluster.status());
  auto state = up::LoadState(cluster->state_dir);
  if (!state.ok() && state.status().code() == StatusCode::kNotFound) {
    auto last = up::LoadLastState(cluster->state_dir);  // the logs of a model `down` stopped
    if (last.ok()) state = std::move(last);
  }
  if (!state.ok()) return ReportError(state.status());
  double since = 0;
  if (!o.since.empty()) {
    auto t = up::ParseSince(o.since, static_cast<double>(std::time(nullptr)));
    if (!t.ok()) return ReportError(t.status());
    since = *t;
  }
  up::LogCursor cursor;
  int tail = o.lines;
  while (true) {
    auto text = up::ReadLogs(*cluster->transport, state->plan, o.rank, &cursor, tail);
    if (!text.ok()) return ReportError(text.status());
    for (const auto& line : up::Interleave(*text, since)) {
      std::printf("%s\n", up::FormatLogLine(line).c_str());
    }
    std::fflush(stdout);
    if (!o.follow) return kExitOk;
    tail = 0;
    std::this_thread::sleep_for(std::chrono::seconds(1));
  }
}

// ---- monitor (internal) ----

int RunMonitorCommand(const CommonOptions& o) {
  auto cluster = OpenCluster(o);
  if (!cluster.ok()) return ReportError(cluster.status());
  Status w = weights::WriteFileAtomically(up::MonitorPidPath(cluster->state_dir),
                                          std::to_string(getpid()) + "\n");
  if (!w.ok()) return ReportError(w);
  up::MonitorOptions m;
  m.log = [](const std::string& line) {
    std::time_t now = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%F %T", std::localtime(&now));
    std::fprintf(stderr, "[%s] %s\n", buf, line.c_str());
    std::fflush(stderr);
  };
  m.log("monitor started (pid " + std::to_string(getpid()) + ")");
  Status s = up::RunMonitor(*cluster->transport, cluster->state_dir, m);
  unlink(up::MonitorPidPath(cluster->state_dir).c_str());
  return s.ok() ? kExitOk : ReportError(s);
}

}  // namespace

void RegisterUpCommands(CLI::App& parent, CommandContext& context) {
  auto u = std::make_shared<UpCliOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "up", "Check, prepare and launch the model of a profile on the cluster; wait until it serves");
  cmd->add_option("-p,--profile", u->profile_file, "Profile to serve")->required();
  AddCommon(cmd, u->common);
  cmd->add_flag("--plan", u->plan_only, "Check and show what would change; change nothing");
  AddYesFlag(cmd, &u->yes, "Do not ask before changing the fabric");
  cmd->add_flag("--sync-weights", u->sync_weights, "Copy missing or corrupt weight files between nodes");
  cmd->add_flag("--no-auto-recover", u->no_auto_recover,
                "Do not restart the model when a rank dies or hangs (default: restart)");
  cmd->add_option("--engine", u->engine,
                  "spark-engine for the nodes in place of their bundle's (default: the bundle's, "
                  "which for nodes of this machine is the one next to sparkctl)");
  cmd->add_option("--master-port", u->master_port, "Rendezvous port on rank 0 (default 29500)");
  cmd->add_option("--timeout", u->timeout_s, "Seconds to wait for /ready (default 600)");
  AddJsonFlag(cmd, &u->common.json, "schema sparkctl-up/v1");
  SetExample(cmd, "sparkctl up -c cluster.yaml -p profiles/qwen3-tiny-demo.yaml --yes");
  cmd->callback([u, &context] { context.exit_code = RunUpCommand(*u); });

  auto d = std::make_shared<DownOptions>();
  CLI::App* down = parent.add_subcommand(
      "down", "Stop every engine rank (SIGTERM, a deadline, SIGKILL) and the monitor; the weights "
              "and the fabric stay");
  AddCommon(down, d->common);
  down->add_flag("--reset-network", d->reset_network,
                 "Also take the fabric down, as `sparkctl net reset` does (default: keep it)");
  AddJsonFlag(down, &d->common.json, "schema sparkctl-down/v1");
  SetExample(down, "sparkctl down -c cluster.yaml   # --reset-network also undoes `net apply`");
  down->callback([d, &context] { context.exit_code = RunDownCommand(*d); });

  auto s = std::make_shared<StatusOptions>();
  CLI::App* status = parent.add_subcommand(
      "status", "Per node: reachable, kernel, links, engine phase and pid, memory; the endpoint");
  AddCommon(status, s->common);
  status->add_flag("--watch", s->watch, "Refresh every --interval seconds until interrupted, with the dashboard's view "
                "(swap, page cache, GPU, links, step times, endpoint rates, events)");
  status->add_option("--interval", s->interval_s, "Seconds between refreshes (default 1)")
      ->check(CLI::Range(1, 3600));
  AddJsonFlag(status, &s->common.json, "schema sparkctl-status/v1");
  SetExample(status, "sparkctl status -c cluster.yaml --json   # exit 0 only when ready");
  status->callback([s, &context] { context.exit_code = RunStatusCommand(*s); });

  auto l = std::make_shared<LogsOptions>();
  CLI::App* logs = parent.add_subcommand(
      "logs", "The engine logs of every rank, interleaved by time, prefixed with the rank");
  AddCommon(logs, l->common);
  logs->add_option("--rank", l->rank, "Only this rank");
  logs->add_flag("-f,--follow", l->follow, "Keep printing what the ranks append");
  logs->add_option("--since", l->since, "Only lines after a time: 90s, 10m, 2h, 1d or \"YYYY-MM-DD HH:MM:SS\"");
  logs->add_option("-n,--lines", l->lines, "Only the last N lines of each rank (default: all)");
  SetExample(logs, "sparkctl logs -c cluster.yaml --rank 1 --since 10m --follow");
  logs->callback([l, &context] { context.exit_code = RunLogsCommand(*l); });

  auto m = std::make_shared<CommonOptions>();
  CLI::App* mon = parent.add_subcommand(
      "monitor", "Watch the running model and restart it when a rank dies (started by `up`)");
  AddCommon(mon, *m);
  mon->group("");  // internal: `up` starts it, `down` stops it
  SetExample(mon, "sparkctl monitor -c cluster.yaml   # normally started by sparkctl up");
  mon->callback([m, &context] { context.exit_code = RunMonitorCommand(*m); });
}

}  // namespace spark::cli
