// `sparkctl dashboard` (docs/dashboard.md): the collector over `status`'s probes, the page, its
// event stream and the cluster-wide /metrics, until interrupted.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "engine/server/api_keys.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/dashboard/collector.h"
#include "sparkctl/dashboard/dashboard_server.h"
#include "sparkctl/host/checks.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/up/state_file.h"
#include "sparkctl/up/up.h"

namespace spark::cli {
namespace {

struct DashboardCliOptions {
  std::string cluster_file = "cluster.yaml";
  std::string state_root = up::kDefaultStateRoot;
  bool accept_new = false;
  std::string bind = "127.0.0.1";
  int port = 8090;
  std::string api_key_file;
  std::string tls_cert, tls_key;
  int ticks = 0;
  int preflight_every_s = 60;
  bool preflight_every_given = false;
  bool json = false;
};

bool Readable(const std::string& path) { return !path.empty() && access(path.c_str(), R_OK) == 0; }

// The key and TLS files: the flags, else the running model's profile where this machine can read
// its files. Off loopback a key is required, and TLS when the profile serves TLS.
Status ResolveSecurity(const DashboardCliOptions& o, const std::string& state_dir,
                       dashboard::DashboardOptions* d) {
  profile::Profile p;
  if (auto state = up::LoadState(state_dir); state.ok()) {
    if (auto loaded = profile::LoadProfileFile(state->profile_file); loaded.ok()) p = *loaded;
  }
  const bool off_loopback = !dashboard::IsLoopbackAddress(o.bind);
  std::string key_file = o.api_key_file;
  if (key_file.empty() && off_loopback && Readable(p.api.key_file)) key_file = p.api.key_file;
  if (!key_file.empty()) {
    auto keys = engine::server::ApiKeys::FromFile(key_file);
    if (!keys.ok()) return InvalidArgumentError("--api-key-file: " + keys.status().message());
    d->keys = std::move(*keys);
  }
  if (!o.tls_cert.empty() || !o.tls_key.empty()) {
    if (o.tls_cert.empty() || o.tls_key.empty()) {
      return InvalidArgumentError("--tls-cert and --tls-key go together: give both");
    }
    d->tls = {o.tls_cert, o.tls_key, ""};
  } else if (off_loopback && p.api.tls.enabled()) {
    if (!Readable(p.api.tls.cert) || !Readable(p.api.tls.key)) {
      return InvalidArgumentError(
          "the profile " + p.source_file + " serves TLS (api.tls) but this machine cannot read " +
          p.api.tls.cert + " and " + p.api.tls.key + ": give --tls-cert and --tls-key");
    }
    d->tls = {p.api.tls.cert, p.api.tls.key, ""};
  }
  return Status::Ok();
}

int RunDashboardCommand(const DashboardCliOptions& o) {
  const std::string schema = o.json ? "sparkctl-dashboard-run/v1" : "";
  if (o.port < 0 || o.port > 65535) return ReportError(InvalidArgumentError("--port: 0..65535"), schema);
  if (o.ticks > 0 && o.preflight_every_given) {
    return ReportError(InvalidArgumentError("--preflight-every does not go with --ticks: the "
                                            "collector bench measures the ticks alone"),
                       schema);
  }
  if (o.preflight_every_s < 0) {
    return ReportError(InvalidArgumentError("--preflight-every " +
                                            std::to_string(o.preflight_every_s) +
                                            ": want seconds >= 0 (0: no preflight)"),
                       schema);
  }
  auto spec = inventory::LoadClusterFile(o.cluster_file);
  if (!spec.ok()) return ReportError(spec.status(), schema);
  auto transport = host::MakeTransport(*spec, {.accept_new = o.accept_new});
  if (!transport.ok()) return ReportError(transport.status(), schema);
  const std::string state_dir = up::StateDir(o.state_root, spec->name);
  dashboard::DashboardOptions d;
  d.bind = o.bind;
  d.port = o.port;
  if (Status s = ResolveSecurity(o, state_dir, &d); !s.ok()) return ReportError(s, schema);

  // The collector and server threads inherit this mask; the main thread waits for the signal.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  dashboard::CollectorOptions co;
  if (o.preflight_every_s > 0 && o.ticks == 0) {
    co.preflight_interval = std::chrono::seconds(o.preflight_every_s);
    // preflight's checks without a profile and without the link beacons, which would disturb
    // the links the ranks use.
    co.preflight = [&spec, &transport] {
      host::PreflightInput input;
      input.cluster = &*spec;
      input.nodes = host::CollectFacts(**transport, *spec, "/");
      return host::RunChecks(input);
    };
  }
  dashboard::History history;
  dashboard::Collector collector(**transport, state_dir, history, co);
  if (o.ticks > 0) {  // measure the collector alone (bench/dashboard)
    for (int i = 0; i < o.ticks; ++i) {
      collector.Tick();
      if (i + 1 < o.ticks) sleep(1);
    }
    const dashboard::CollectorCost c = collector.cost();
    nlohmann::ordered_json j = {{"schema", schema.empty() ? "sparkctl-dashboard-run/v1" : schema},
                                {"ok", true},
                                {"ticks", c.ticks},
                                {"ssh_bytes_sent", c.bytes_sent},
                                {"ssh_bytes_received", c.bytes_received},
                                {"snapshot", history.Latest()}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
    return kExitOk;
  }
  auto server = dashboard::DashboardServer::Start(d, history);
  if (!server.ok()) return ReportError(server.status(), schema);
  collector.Start();
  const std::string url = std::string(d.tls.enabled() ? "https" : "http") + "://" +
                          (o.bind.find(':') != std::string::npos ? "[" + o.bind + "]" : o.bind) +
                          ":" + std::to_string((*server)->port()) + "/";
  if (o.json) {
    nlohmann::ordered_json j = {{"schema", "sparkctl-dashboard-run/v1"}, {"ok", true},
                                {"url", url}, {"port", (*server)->port()},
                                {"api_key", !d.keys.empty()}, {"tls", d.tls.enabled()}};
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf("dashboard on %s%s (Ctrl-C stops it)\n", url.c_str(),
                d.keys.empty() ? "" : "  (needs the API key: open ?key=KEY once)");
  }
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stop_signals, &sig);
  collector.Stop();
  (*server)->Stop();
  return kExitOk;
}

}  // namespace

void RegisterDashboardCommands(CLI::App& parent, CommandContext& context) {
  auto o = std::make_shared<DashboardCliOptions>();
  CLI::App* cmd = parent.add_subcommand(
      "dashboard", "Serve a live web page of the cluster (nodes, links, ranks, endpoint, events) "
                   "and a cluster-wide Prometheus /metrics");
  AddClusterFlag(cmd, &o->cluster_file);
  cmd->add_option("--state-root", o->state_root,
                  "Where the controller records what runs (default /var/lib/sparkctl/up)");
  cmd->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  cmd->add_option("--bind", o->bind, "Address to listen on (default 127.0.0.1)");
  cmd->add_option("--port", o->port, "Port (default 8090; 0 = any free port)");
  cmd->add_option("--api-key-file", o->api_key_file,
                  "Keys the page requires (default off loopback: the profile's api.key_file)");
  cmd->add_option("--tls-cert", o->tls_cert,
                  "Serve HTTPS with this PEM certificate (default off loopback: the profile's "
                  "api.tls when it has one)");
  cmd->add_option("--tls-key", o->tls_key, "Its PEM private key");
  cmd->add_option("--ticks", o->ticks,
                  "Run the collector this many times (1 s apart) without serving, then print "
                  "its cost and last snapshot as JSON (for benchmarks)");
  CLI::Option* preflight = cmd->add_option(
      "--preflight-every", o->preflight_every_s,
      "Run preflight's checks (without link beacons) every this many seconds and log what "
      "changes in their findings as events (default 60; 0 = never; not with --ticks)");
  AddJsonFlag(cmd, &o->json, "schema sparkctl-dashboard-run/v1");
  SetExample(cmd, "sparkctl dashboard -c cluster.yaml --port 8090   # then open http://127.0.0.1:8090/");
  cmd->callback([o, preflight, &context] {
    o->preflight_every_given = preflight->count() > 0;
    context.exit_code = RunDashboardCommand(*o);
  });
}

}  // namespace spark::cli
