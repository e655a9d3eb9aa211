// The steps of `sparkctl up`, each a small function that reports one StepReport.
#include "sparkctl/up/up.h"

#include <algorithm>
#include <chrono>

#include "base/strings.h"
#include "sparkctl/bundle/deploy.h"
#include "sparkctl/fabric/apply.h"
#include "sparkctl/fabric/control_plane.h"
#include "sparkctl/host/pin.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/selftest/selftest.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/up/launcher.h"
#include "sparkctl/up/node_memory.h"
#include "sparkctl/up/tls_check.h"
#include "sparkctl/weights/cluster_verify.h"
#include "sparkctl/weights/sync.h"

namespace spark::up {
namespace {

using Clock = std::chrono::steady_clock;

// Collects the steps and forwards each to the observer as it finishes.
class Steps {
 public:
  Steps(UpObserver& observer, UpReport* report) : observer_(observer), report_(report) {}
  void Begin() { start_ = Clock::now(); }
  void Done(std::string name, std::string result, std::string detail) {
    StepReport s{std::move(name), std::move(result), std::move(detail),
                 std::chrono::duration<double>(Clock::now() - start_).count()};
    observer_.OnStep(s);
    report_->steps.push_back(std::move(s));
  }
  Status Fail(std::string name, Status why) {
    Done(std::move(name), "failed", why.message());
    return why;
  }

 private:
  UpObserver& observer_;
  UpReport* report_;
  Clock::time_point start_;
};

Status Preflight(ssh::Transport& t, const netplan::ClusterSpec& cluster,
                 const profile::Profile& profile, Steps& steps) {
  steps.Begin();
  host::PreflightInput input;
  input.cluster = &cluster;
  input.profile = &profile;
  input.nodes = host::CollectFacts(t, cluster, profile.model.path);
  std::string failed, warned;
  for (const auto& c : host::RunChecks(input)) {
    const std::string line = "  " + c.id + (c.node.empty() ? "" : " " + c.node) + ": " + c.seen +
                             (c.hint.empty() ? "" : "\n    fix: " + c.hint) + "\n";
    if (c.verdict == host::Verdict::kFail) failed += line;
    if (c.verdict == host::Verdict::kWarn) warned += line;
  }
  if (!failed.empty()) {
    return steps.Fail("preflight", FailedPreconditionError(
                                       "preflight failed; nothing was changed:\n" + failed));
  }
  steps.Done("preflight", warned.empty() ? "ok" : "warn", warned);
  return Status::Ok();
}

Status PinCheck(ssh::Transport& t, const netplan::ClusterSpec& cluster,
                const profile::Profile& profile, Steps& steps) {
  steps.Begin();
  auto plans = ssh::ForEachNode<host::PinNodePlan>(
      host::NodeNames(cluster), [&](const std::string& node) -> Result<host::PinNodePlan> {
        SPARK_ASSIGN_OR_RETURN(host::PinNodeInput in, host::ReadPinInput(t, node));
        return host::PlanPin(profile.host, in);
      });
  Status joined = ssh::JoinNodeErrors(plans);
  if (!joined.ok()) return steps.Fail("host-pin", joined);
  std::string blocked, pending;
  for (const auto& p : plans) {
    if (!p->kernel_blocked.empty()) blocked += "  " + p->node + ": " + p->kernel_blocked + "\n";
    if (!p->changes.empty() || !p->hold.empty() || p->NeedsReboot()) {
      pending += "  " + p->node + ": " +
                 std::to_string(p->changes.size() + p->hold.size()) + " setting(s) not pinned" +
                 (p->NeedsReboot() ? ", reboot needed" : "") + "\n";
    }
    for (const auto& problem : p->problems) pending += "  " + p->node + ": " + problem + "\n";
  }
  if (!blocked.empty()) {
    return steps.Fail("host-pin", FailedPreconditionError(
                                      "kernel not allowed by the profile, or not the pinned one:\n" +
                                      blocked));
  }
  steps.Done("host-pin", pending.empty() ? "ok" : "warn",
             pending.empty() ? "" : pending + "  (hold them: sparkctl host pin -p " +
                                        profile.source_file + " --yes)\n");
  return Status::Ok();
}

Status FabricCheck(ssh::Transport& t, const netplan::ClusterSpec& cluster, Steps& steps);

// Plans the fabric, applies it when it differs (after asking), then verifies it. Fills the NCCL
// environment of every node.
Status Fabric(ssh::Transport& t, const netplan::ClusterSpec& cluster, const UpOptions& o,
              UpObserver& observer, Steps& steps, LaunchOptions* launch) {
  steps.Begin();
  auto changes = fabric::PlanChanges(t, cluster, {});
  if (!changes.ok()) return steps.Fail("fabric", changes.status());
  if (changes->Count() == 0) {
    steps.Done("fabric", "ok", "");
  } else if (o.plan_only) {
    steps.Done("fabric", "would-change",
               std::to_string(changes->Count()) + " change(s): see sparkctl net plan\n");
  } else {
    if (!observer.Confirm("apply " + std::to_string(changes->Count()) +
                          " fabric change(s) to the nodes (see sparkctl net plan)")) {
      return steps.Fail("fabric", CancelledError("fabric change not confirmed; nothing changed "
                                                 "(pass --yes, or run sparkctl net apply)"));
    }
    auto applied = fabric::ApplyCluster(t, cluster, {});
    if (!applied.ok()) return steps.Fail("fabric", applied.status());
    if (!applied->Outcome().ok()) return steps.Fail("fabric", applied->Outcome());
    steps.Done("fabric", "changed", std::to_string(changes->Count()) + " change(s) applied\n");
    auto again = fabric::PlanChanges(t, cluster, {});
    if (!again.ok()) return steps.Fail("fabric", again.status());
    changes = std::move(again);
  }
  for (size_t i = 0; i < changes->nodes.size(); ++i) {
    launch->nccl_env[changes->nodes[i].node] = changes->nodes[i].plan.nccl_env;
    auto links = netplan::PlanOneShotLinks(changes->fabric, static_cast<int>(i));
    if (links.ok()) launch->oneshot_links[changes->nodes[i].node] = *links;
  }
  steps.Begin();
  if (o.plan_only && changes->Count() > 0) {
    steps.Done("fabric-check", "skipped", "after the fabric is applied\n");
    return Status::Ok();
  }
  SPARK_RETURN_IF_ERROR(FabricCheck(t, cluster, steps));
  // Control traffic (rendezvous, Gloo, NCCL bootstrap) over the tunnel when it works.
  steps.Begin();
  const fabric::ControlPlane control = fabric::ProbeControlPlane(t, *changes);
  for (auto& [node, env] : launch->nccl_env) env = control.Env(std::move(env));
  launch->control_addresses = control.addresses;
  steps.Done("control-plane", control.wireguard ? "ok" : "warn",
             "control traffic over " + control.Describe() + "\n");
  return Status::Ok();
}

// The one-shot links a previous launch passed (its --oneshot-* flags), so an unchanged
// cluster plans the same command lines.
netplan::OneShotLinks OneShotLinksFromArgv(const std::vector<std::string>& argv) {
  netplan::OneShotLinks links;
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == "--oneshot-topology") links.topology = argv[i + 1];
    if (argv[i] == "--oneshot-addr") links.addresses = {argv[i + 1]};
    if (argv[i] == "--oneshot-rails") {
      // Kept whole: RailsFlag() of a single "link" renders it unchanged.
      links.rails = {{argv[i + 1]}};
    }
  }
  return links;
}

// The quick selftest: fabric preflight subset, net verify, RDMA devices, an exact all-reduce.
Status FabricCheck(ssh::Transport& t, const netplan::ClusterSpec& cluster, Steps& steps) {
  auto report = selftest::RunSelftest(t, cluster, {});
  if (!report.ok()) return steps.Fail("fabric-check", report.status());
  if (!report->ok()) {
    return steps.Fail("fabric-check",
                      FailedPreconditionError("selftest failed:\n" + report->Summary()));
  }
  steps.Done("fabric-check", "ok", "selftest: " + std::to_string(report->checks.size()) +
                                       " checks\n");
  return Status::Ok();
}

Status Weights(ssh::Transport& t, const netplan::ClusterSpec& cluster,
               const profile::Profile& profile, const UpOptions& o, Steps& steps) {
  steps.Begin();
  if (profile.model.manifest.empty()) {
    // No manifest to check against: at least every node must have the checkpoint.
    const std::string cfg = profile.model.path + "/config.json";
    auto runs = ssh::RunAll(t, host::NodeNames(cluster), "test -s " + ssh::ShellQuote(cfg));
    std::string missing;
    for (const auto& r : runs) {
      if (!r.result.ok()) return steps.Fail("weights", r.result.status());
      if (!r.result->ok()) missing += "  " + r.node + ": no " + cfg + "\n";
    }
    if (!missing.empty()) {
      return steps.Fail("weights", FailedPreconditionError(
                                       "the model is missing on some nodes (copy it to " +
                                       profile.model.path + " there):\n" + missing));
    }
    steps.Done("weights", "warn", "no model.manifest in the profile: only presence checked\n");
    return Status::Ok();
  }
  auto report = weights::VerifyOnAllNodes(t, cluster, profile);
  if (!report.ok()) return steps.Fail("weights", report.status());
  if (report->ok()) {
    steps.Done("weights", "ok", "");
    return Status::Ok();
  }
  if (!o.sync_weights || o.plan_only) {
    return steps.Fail("weights", FailedPreconditionError(
                                     weights::FormatClusterVerifyText(*report) +
                                     (o.plan_only ? "" : "\n(copy them with --sync-weights)")));
  }
  auto sync = weights::SyncOnAllNodes(t, cluster, profile);
  if (!sync.ok()) return steps.Fail("weights", sync.status());
  if (!sync->ok()) {
    std::string errors;
    for (const auto& e : sync->errors) errors += "  " + e + "\n";
    return steps.Fail("weights", FailedPreconditionError("weights sync failed:\n" + errors));
  }
  std::string detail = "synced\n";
  for (const auto& w : sync->warnings) detail += "  warning: " + w + "\n";
  steps.Done("weights", "changed", detail);
  return Status::Ok();
}

// The engine of each node's bundle (with --engine in its place when given), installed where
// missing. Every rank runs the same program: nodes of different machines cannot form one model.
Result<bundle::ProgramOnNode> EnsureEngines(ssh::Transport& t, const netplan::ClusterSpec& cluster,
                                            const UpOptions& o, bool install, int* installed) {
  bundle::EnsureOptions eo{.install = install};
  if (!o.engine_binary.empty()) eo.overrides["spark-engine"] = o.engine_binary;
  const std::vector<std::string> nodes = host::NodeNames(cluster);
  auto results = ssh::ForEachNode<bundle::ProgramOnNode>(nodes, [&](const std::string& node) {
    return bundle::EnsureProgram(t, bundle::DefaultCatalog(), node, "spark-engine", eo);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(results));
  if (results.empty()) return FailedPreconditionError("the inventory has no nodes");
  std::string machines;
  *installed = 0;
  for (size_t i = 0; i < nodes.size(); ++i) {
    machines += "\n  " + nodes[i] + ": " + results[i]->platform.Describe();
    *installed += install ? results[i]->uploaded : !results[i]->installed;
  }
  for (const auto& r : results) {
    if (r->path != results[0]->path) {
      return FailedPreconditionError("the nodes need different engine builds; one model runs on "
                                     "nodes of one machine and one bundle:" + machines);
    }
  }
  return *results[0];
}

Status EngineBinary(ssh::Transport& t, const netplan::ClusterSpec& cluster, const UpOptions& o,
                    Steps& steps, LaunchOptions* launch) {
  steps.Begin();
  int changed = 0;
  auto engine = EnsureEngines(t, cluster, o, !o.plan_only, &changed);
  if (!engine.ok()) return steps.Fail("engine", engine.status());
  launch->engine_path = engine->path;
  launch->engine_sha256 = engine->bundle_id;
  launch->nccl_tuner_plugin = engine->tuner_plugin;
  const std::string what = "spark-engine of the " + engine->platform.machine + " bundle " +
                           engine->bundle_id.substr(0, 12);
  steps.Done("engine", changed == 0 ? "ok" : (o.plan_only ? "would-change" : "changed"),
             what + (changed ? std::string(o.plan_only ? ": to install on " : ": installed on ") +
                                   std::to_string(changed) + " node(s)"
                             : " on every node") + "\n");
  return Status::Ok();
}

// The memory plan on each node's real MemAvailable (the engine's accounting: spark-engine plan):
// a node that would keep less than the profile's start-up floor stops `up` before anything runs,
// naming the profile key to turn. A plan that cannot be made here (no engine that runs on this
// machine, no readable config.json) is a warning: every rank still checks its own at start-up.
Status MemoryPlan(ssh::Transport& t, const profile::Profile& profile, const UpOptions& o,
                  const LaunchPlan& plan, Steps& steps) {
  steps.Begin();
  std::vector<std::string> nodes;
  for (const RankLaunch& r : plan.ranks) {
    if (std::find(nodes.begin(), nodes.end(), r.node) == nodes.end()) nodes.push_back(r.node);
  }
  auto memory = ReadNodeMemory(t, nodes);
  if (!memory.ok()) return steps.Fail("memory", memory.status());
  const std::string scratch = o.state_dir + "/plan";
  auto checkpoint = PlanCheckpoint(profile, "", &t, nodes.empty() ? "" : nodes.front(), scratch);
  Result<profile::EnginePlan> result =
      checkpoint.ok() ? profile::QueryPlan(o.engine_binary,
                                           profile::PlanArgs(profile, *checkpoint, *memory))
                      : Result<profile::EnginePlan>(checkpoint.status());
  if (!result.ok()) {
    steps.Done("memory", "warn", "memory plan not checked: " + result.status().message() + "\n");
    return Status::Ok();
  }
  FieldErrors problems;
  profile::ValidateAgainstPlan(profile, *result, &problems);
  std::string detail;
  for (const profile::PlanNode& n : result->nodes) {
    detail += "  " + n.name + ": " + HumanBytes(static_cast<uint64_t>(std::max<int64_t>(
                                          0, n.available_bytes))) +
              " available, " + HumanBytes(static_cast<uint64_t>(n.used_bytes)) +
              " planned, " + (n.ok ? "fits" : "DOES NOT FIT") + "\n";
  }
  if (!problems.empty()) {
    std::string why;
    for (const FieldError& e : problems.errors()) why += "  " + e.path + ": " + e.message + "\n";
    return steps.Fail("memory", FailedPreconditionError(
                                    "the memory plan does not fit; nothing was started:\n" + detail +
                                    why));
  }
  steps.Done("memory", "ok", detail);
  return Status::Ok();
}

double Now() { return static_cast<double>(std::time(nullptr)); }

// Starts every rank, records the state and waits for /ready. Stops the ranks on failure.
// The endpoint's TLS (tls_check.h): the fingerprint, or the reason up refuses; without TLS off
// loopback, a warning that the key travels in clear text.
Status TlsCheck(ssh::Transport& t, const profile::Profile& profile, Steps& steps,
                LaunchPlan* plan) {
  steps.Begin();
  if (!profile.api.tls.enabled()) {
    if (plan->clear_text) steps.Done("tls", "warn", ClearTextWarning(profile) + "\n");
    return Status::Ok();
  }
  Result<std::string> fingerprint = CheckEndpointTls(t, profile, *plan);
  if (!fingerprint.ok()) return steps.Fail("tls", fingerprint.status());
  plan->tls_fingerprint = *fingerprint;
  steps.Done("tls", "ok", "SHA-256 " + *fingerprint + "\n");
  return Status::Ok();
}

Status Launch(ssh::Transport& t, const UpOptions& o, const LaunchPlan& plan, UpObserver& observer,
              Steps& steps) {
  steps.Begin();
  auto started = StartRanks(t, plan);
  if (!started.ok()) {
    StopRanks(t, plan).IgnoreError();
    return steps.Fail("launch", started.status());
  }
  UpState state;
  state.cluster_file = o.cluster_file;
  state.profile_file = o.profile_file;
  state.plan = plan;
  state.started = Now();
  state.auto_recover = o.auto_recover;
  std::string pids;
  for (const auto& s : *started) {
    state.pids[s.rank] = s.pid;
    state.systemd[s.rank] = s.systemd;
    pids += " r" + std::to_string(s.rank) + "=" + std::to_string(s.pid);
  }
  Status saved = SaveState(o.state_dir, state);
  if (!saved.ok()) {
    StopRanks(t, plan).IgnoreError();
    return steps.Fail("launch", saved);
  }
  steps.Done("launch", "changed", "pids" + pids + "\n");
  steps.Begin();
  WaitOptions w;
  w.timeout = o.ready_timeout;
  w.on_poll = [&](const ClusterHealth& h) { observer.OnProgress(h); };
  Status ready = WaitReady(t, plan, w);
  if (!ready.ok()) {
    StopRanks(t, plan).IgnoreError();
    RemoveState(o.state_dir).IgnoreError();
    return steps.Fail("ready", ready.WithContext("the model did not come up (ranks stopped, "
                                                 "logs kept: sparkctl logs)"));
  }
  steps.Done("ready", "ok", plan.endpoint + "\n");
  return Status::Ok();
}

// The fast path of a second `up`: the recorded model runs and is ready, and the same profile,
// inventory and engine build give the same launch hash (the fabric's NCCL environment taken as
// recorded). Any doubt returns false and the full sequence runs.
bool AlreadyUp(ssh::Transport& t, const netplan::ClusterSpec& cluster,
               const profile::Profile& profile, const UpOptions& o, LaunchOptions launch,
               UpReport* report) {
  auto previous = LoadState(o.state_dir);
  if (!previous.ok()) return false;
  int missing = 0;
  auto engine = EnsureEngines(t, cluster, o, /*install=*/false, &missing);
  if (!engine.ok() || missing > 0) return false;
  launch.engine_path = engine->path;
  launch.engine_sha256 = engine->bundle_id;
  launch.nccl_tuner_plugin = engine->tuner_plugin;
  for (const auto& r : previous->plan.ranks) {
    launch.control_addresses[r.node] = r.control_address;
    launch.oneshot_links[r.node] = OneShotLinksFromArgv(r.argv);
    auto& env = launch.nccl_env[r.node];
    for (const auto& e : r.env) {
      if (!profile.env.count(e.name)) env.push_back(e);
    }
  }
  auto plan = PlanLaunch(profile, cluster, launch);
  if (!plan.ok() || plan->hash != previous->plan.hash) return false;
  if (Assess(previous->plan, ProbeNodes(t, previous->plan)).health != Health::kReady) return false;
  report->plan = *plan;
  return true;
}

}  // namespace

Status RunUp(ssh::Transport& t, const netplan::ClusterSpec& cluster,
             const profile::Profile& profile, const UpOptions& o, UpObserver& observer,
             UpReport* report) {
  const auto start = Clock::now();
  Steps steps(observer, report);
  LaunchOptions launch;
  launch.master_port = o.master_port;
  launch.stop_deadline_s = o.stop_deadline_s;
  // The inventory and profile are checked before any node is contacted.
  LaunchOptions early = launch;
  early.links_pending = true;
  SPARK_RETURN_IF_ERROR(PlanLaunch(profile, cluster, early).status());
  if (AlreadyUp(t, cluster, profile, o, launch, report)) {
    report->action = "already up";
    report->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    return Status::Ok();
  }
  SPARK_RETURN_IF_ERROR(Preflight(t, cluster, profile, steps));
  SPARK_RETURN_IF_ERROR(PinCheck(t, cluster, profile, steps));
  if (!o.skip_fabric && cluster.nodes.size() > 1) {
    SPARK_RETURN_IF_ERROR(Fabric(t, cluster, o, observer, steps, &launch));
  }
  SPARK_RETURN_IF_ERROR(Weights(t, cluster, profile, o, steps));
  SPARK_RETURN_IF_ERROR(EngineBinary(t, cluster, o, steps, &launch));
  SPARK_ASSIGN_OR_RETURN(report->plan, PlanLaunch(profile, cluster, launch));
  SPARK_RETURN_IF_ERROR(TlsCheck(t, profile, steps, &report->plan));
  const LaunchPlan& plan = report->plan;
  SPARK_RETURN_IF_ERROR(MemoryPlan(t, profile, o, plan, steps));

  auto previous = LoadState(o.state_dir);
  if (!previous.ok() && previous.status().code() != StatusCode::kNotFound) {
    return previous.status();
  }
  bool running = false;
  if (previous.ok()) {
    const Health h = Assess(previous->plan, ProbeNodes(t, previous->plan)).health;
    running = h == Health::kReady || h == Health::kStarting;
    if (running && previous->plan.hash == plan.hash) {
      report->action = "already up";
      report->seconds = std::chrono::duration<double>(Clock::now() - start).count();
      return Status::Ok();
    }
  }
  const bool restart = previous.ok();
  if (o.plan_only) {
    report->action = restart ? (running ? "would restart (launch changed)" : "would restart")
                             : "would start";
    return Status::Ok();
  }
  if (restart) {
    steps.Begin();
    std::vector<std::string> lines;
    Status stopped = StopRanks(t, previous->plan, &lines);
    if (!stopped.ok()) return steps.Fail("stop", stopped);
    std::string detail;
    for (const auto& l : lines) detail += l + "\n";
    steps.Done("stop", "changed", detail);
  }
  SPARK_RETURN_IF_ERROR(Launch(t, o, plan, observer, steps));
  report->action = restart ? "restarted" : "started";
  report->seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return Status::Ok();
}

Status Down(ssh::Transport& t, const std::string& state_dir, std::vector<std::string>* lines) {
  SPARK_ASSIGN_OR_RETURN(UpState state, LoadState(state_dir));
  SPARK_RETURN_IF_ERROR(StopRanks(t, state.plan, lines));
  return RemoveState(state_dir);
}

}  // namespace spark::up
