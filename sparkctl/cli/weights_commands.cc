// `sparkctl weights manifest DIR ...` and `sparkctl weights verify --manifest FILE --dir DIR`:
// the local half of weight management. `verify --json` is also what the controller runs on
// every node over SSH; its stdout is a VerifyReport (sparkctl/weights/verify_report.h).
// The cluster half: `fetch` (download from the Hugging Face Hub), `verify -p PROFILE` (every
// node) and `sync`, with the internal node-side `serve` and `pull-file` that sync starts over SSH
// (weights_cluster_commands below).
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/host/remote.h"
#include "sparkctl/inventory/cluster_yaml.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/weights/cluster_verify.h"
#include "sparkctl/weights/hub_fetch.h"
#include "sparkctl/weights/sync.h"
#include "sparkctl/weights/sync_node.h"
#include "sparkctl/weights/create_manifest.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/manifest_verify.h"
#include "sparkctl/weights/verify_report.h"

namespace spark::cli {
namespace {

using weights::ManifestFormat;

struct ManifestCommandOptions {
  std::string dir;
  std::string repository;
  std::string revision;
  std::string out;
  std::string format = "auto";
  int threads = 0;
  bool no_cache = false;
  bool no_progress = false;
  bool force = false;
  bool json = false;
  bool check_hub = false;
};

struct VerifyCommandOptions {
  std::string manifest;
  std::string dir;
  std::string cache;
  int threads = 0;
  bool no_cache = false;
  bool no_progress = false;
  bool allow_extra = false;
  bool json = false;
  std::string profile;  // set: verify every node of the cluster instead of one local dir
  std::string cluster = "cluster.yaml";
  bool accept_new = false;
  std::string remote_sparkctl;  // empty: install this binary on each node
};

Result<ManifestFormat> ChooseFormat(const ManifestCommandOptions& o) {
  if (o.format == "json") return ManifestFormat::kJson;
  if (o.format == "sha256sums") return ManifestFormat::kSha256Sums;
  if (o.format == "auto") return weights::FormatForOutputPath(o.out);
  return InvalidArgumentError("--format " + o.format + ": use auto, json or sha256sums");
}

Status CheckManifestArgs(const ManifestCommandOptions& o, ManifestFormat format) {
  if ((format == ManifestFormat::kJson || o.check_hub) &&
      (o.repository.empty() || o.revision.empty())) {
    return InvalidArgumentError("a JSON manifest records where the files came from: pass "
                                "--repo OWNER/NAME and --revision COMMIT");
  }
  if (!o.force && ::access(o.out.c_str(), F_OK) == 0) {
    return AlreadyExistsError(o.out + " exists; pass --force to replace it (a pinned manifest "
                              "is only replaced on purpose)");
  }
  return Status::Ok();
}

int RunManifest(const ManifestCommandOptions& o) {
  auto started = std::chrono::steady_clock::now();
  Result<ManifestFormat> format = ChooseFormat(o);
  if (!format.ok()) return ReportError(format.status());
  if (Status s = CheckManifestArgs(o, *format); !s.ok()) return ReportError(s);
  weights::CreateManifestOptions options{.dir = o.dir, .repository = o.repository,
                                         .revision = o.revision, .out_path = o.out,
                                         .use_cache = !o.no_cache, .threads = o.threads};
  options.progress.enabled = !o.no_progress;
  Result<weights::Manifest> manifest = weights::CreateManifest(options);
  if (!manifest.ok()) return ReportError(manifest.status());
  if (o.check_hub) {
    // Trust comes from the source: every size, and every LFS file's SHA-256, must be the Hub's.
    Result<weights::HubListing> hub =
        weights::ListHubRevisionHere(o.repository, o.revision, "--repo / --revision");
    if (!hub.ok()) return ReportError(hub.status());
    Status same = weights::CheckManifestAgainstHub(*manifest, *hub, "the copy in " + o.dir);
    if (!same.ok()) return ReportError(same.WithContext("nothing written"));
    manifest->revision = hub->commit;  // the full commit, whatever the pin's length
  }
  if (Status s = weights::WriteManifestFile(o.out, *manifest, *format); !s.ok()) {
    return ReportError(s);
  }
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (o.json) {
    nlohmann::ordered_json out = {{"schema", "sparkctl-weights-manifest-result/v1"},
                                  {"ok", true},
                                  {"out", o.out},
                                  {"files", manifest->files.size()},
                                  {"bytes", manifest->TotalKnownBytes()},
                                  {"seconds", seconds}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("wrote %s: %zu files, %s, in %.1f s\n", o.out.c_str(), manifest->files.size(),
                HumanBytes(manifest->TotalKnownBytes()).c_str(), seconds);
  }
  return kExitOk;
}

// `--manifest -`: the controller pipes the manifest over SSH instead of writing it on the node.
Result<weights::Manifest> ReadManifestArg(const std::string& path) {
  if (path != "-") return weights::ReadManifestFile(path);
  std::string text;
  char buf[65536];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, stdin)) > 0;) text.append(buf, n);
  if (weights::DetectManifestFormat(text) == ManifestFormat::kJson) {
    return weights::ParseManifestJson(text, "<stdin>");
  }
  return weights::ParseSha256Sums(text, "<stdin>");
}

int RunClusterVerify(const VerifyCommandOptions& o);
void AddClusterWeightsCommands(CLI::App* weights, CommandContext& context);

int RunVerify(const VerifyCommandOptions& o) {
  if (!o.profile.empty()) return RunClusterVerify(o);
  const std::string schema = o.json ? std::string(weights::kVerifyReportSchema) : "";
  if (o.manifest.empty() || o.dir.empty()) {
    return ReportError(InvalidArgumentError(
        "verify needs --manifest FILE --dir DIR (this machine) or -p PROFILE (every node)"),
        schema);
  }
  Result<weights::Manifest> manifest = ReadManifestArg(o.manifest);
  if (!manifest.ok()) return ReportError(manifest.status(), schema);
  weights::VerifyOptions options{.dir = o.dir, .manifest_path = o.manifest,
                                 .use_cache = !o.no_cache, .cache_path = o.cache,
                                 .threads = o.threads};
  options.progress.enabled = !o.no_progress;
  Result<weights::VerifyReport> report = weights::VerifyDirectory(*manifest, options);
  if (!report.ok()) return ReportError(report.status(), schema);
  std::string out = o.json ? weights::FormatVerifyReportJson(*report, o.allow_extra)
                           : weights::FormatVerifyReportText(*report, o.allow_extra);
  std::fputs(out.c_str(), stdout);
  return report->ok(o.allow_extra) ? kExitOk : kExitFailed;
}

void AddManifestCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<ManifestCommandOptions>();
  CLI::App* c = weights->add_subcommand(
      "manifest", "Create a manifest (path, size, SHA-256 of every file) from a local copy");
  c->add_option("dir", o->dir, "Directory holding the checkpoint")->required()->check(CLI::ExistingDirectory);
  c->add_option("--repo", o->repository, "Repository the files came from, OWNER/NAME");
  c->add_option("--revision", o->revision, "Commit hash or tag the files came from");
  c->add_option("--out", o->out,
                "Output file: profiles/checkpoints/OWNER--NAME/REVISION.json, or SHA256SUMS")
      ->required();
  c->add_option("--format", o->format, "auto (from the --out name), json or sha256sums");
  c->add_option("--threads", o->threads, "Files hashed at once (default: every CPU)");
  c->add_flag("--no-cache", o->no_cache, "Neither read nor update DIR/.sparkctl-verify-cache.json");
  c->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  c->add_flag("--force", o->force, "Replace --out when it exists");
  c->add_flag("--check-hub", o->check_hub,
              "Compare with the Hub's listing of --repo at --revision (the `hf` CLI here, "
              "HF_TOKEN/HF_ENDPOINT honoured): every file, size and LFS SHA-256; exit 2 on a "
              "difference, nothing written");
  AddJsonFlag(c, &o->json);
  SetExample(c, "sparkctl weights manifest /models/Qwen3-0.6B --repo Qwen/Qwen3-0.6B "
                "--revision c1899de --out profiles/checkpoints/Qwen--Qwen3-0.6B/c1899de.json");
  c->callback([o, &context] { context.exit_code = RunManifest(*o); });
}

void AddVerifyCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<VerifyCommandOptions>();
  CLI::App* c = weights->add_subcommand(
      "verify", "Check a local copy against its manifest: every file's size and SHA-256, "
                "missing and extra files. Exit 2 on any mismatch");
  c->add_option("--manifest", o->manifest, "Manifest (JSON or SHA256SUMS; - reads stdin)");
  c->add_option("--dir", o->dir, "Directory holding the checkpoint");
  c->add_option("-p,--profile", o->profile,
                "Verify model.path on every node of the cluster against model.manifest");
  AddClusterFlag(c, &o->cluster, "Cluster inventory for -p (default ./cluster.yaml)");
  c->add_flag("--accept-new", o->accept_new, "With -p: trust unknown host keys on first contact");
  c->add_option("--remote-sparkctl", o->remote_sparkctl,
                "With -p: sparkctl path to run on the nodes (default: install this binary)");
  c->add_option("--cache", o->cache, "Verify cache file (default DIR/.sparkctl-verify-cache.json)");
  c->add_option("--threads", o->threads, "Files hashed at once (default: every CPU)");
  c->add_flag("--no-cache", o->no_cache, "Hash every file; neither read nor write the cache");
  c->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  c->add_flag("--allow-extra", o->allow_extra, "Files not in the manifest do not fail the check");
  AddJsonFlag(c, &o->json,
              "schema sparkctl-weights-verify/v1; with -p sparkctl-weights-cluster-verify/v1");
  SetExample(c, "sparkctl weights verify --manifest "
                "profiles/checkpoints/Qwen--Qwen3-0.6B/c1899de.json --dir /models/Qwen3-0.6B\n"
                "  sparkctl weights verify -p profiles/qwen3-tiny-demo.yaml -c cluster.yaml");
  c->callback([o, &context] { context.exit_code = RunVerify(*o); });
}

// ---- Cluster commands: verify -p, sync, and the node-side serve / fetch they start. ----

struct ClusterTarget {
  netplan::ClusterSpec cluster;
  profile::Profile profile;
  std::unique_ptr<ssh::Transport> transport;
};

Result<ClusterTarget> LoadClusterTarget(const std::string& cluster_file,
                                        const std::string& profile_file, bool accept_new) {
  ClusterTarget t;
  SPARK_ASSIGN_OR_RETURN(t.cluster, inventory::LoadClusterFile(cluster_file));
  SPARK_ASSIGN_OR_RETURN(t.profile, profile::LoadProfileFile(profile_file));
  SPARK_ASSIGN_OR_RETURN(t.transport, host::MakeTransport(t.cluster, {.accept_new = accept_new}));
  return t;
}

// Node results as they arrive, plus a "waiting for" line every 10 s while nodes are still busy
// (the transport returns a node's output only at its end, so there is no per-byte progress).
class NodeWaitDisplay {
 public:
  NodeWaitDisplay(std::vector<std::string> nodes, bool enabled)
      : pending_(nodes.begin(), nodes.end()), enabled_(enabled) {
    if (enabled_) thread_ = std::thread([this] { Loop(); });
  }
  ~NodeWaitDisplay() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void Done(const weights::NodeVerify& n, size_t done, size_t total) {
    std::lock_guard<std::mutex> lock(mu_);
    pending_.erase(n.node);
    if (enabled_) std::fprintf(stderr, "%s\n", weights::FormatNodeDoneLine(n, done, total).c_str());
  }

 private:
  void Loop() {
    auto start = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mu_);
    while (!wake_.wait_for(lock, std::chrono::seconds(10), [&] { return stop_; })) {
      if (pending_.empty()) continue;
      std::vector<std::string> names(pending_.begin(), pending_.end());
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::fprintf(stderr, "verify: waiting for %s (%s)\n", Join(names, ", ").c_str(),
                   weights::FormatDuration(s).c_str());
    }
  }
  std::set<std::string> pending_;
  bool enabled_;
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable wake_;
  std::thread thread_;
};

int RunClusterVerify(const VerifyCommandOptions& o) {
  const std::string schema = o.json ? std::string(weights::kClusterVerifySchema) : "";
  Result<ClusterTarget> t = LoadClusterTarget(o.cluster, o.profile, o.accept_new);
  if (!t.ok()) return ReportError(t.status(), schema);
  NodeWaitDisplay display(weights::RingOrder(t->cluster), !o.no_progress);
  weights::ClusterVerifyOptions options{.sparkctl_path = o.remote_sparkctl,
                                        .allow_extra = o.allow_extra, .use_cache = !o.no_cache};
  options.on_node_done = [&](const weights::NodeVerify& n, size_t done, size_t total) {
    display.Done(n, done, total);
  };
  Result<weights::ClusterVerifyReport> report =
      weights::VerifyOnAllNodes(*t->transport, t->cluster, t->profile, options);
  if (!report.ok()) return ReportError(report.status(), schema);
  std::string out = o.json ? weights::FormatClusterVerifyJson(*report)
                           : weights::FormatClusterVerifyText(*report);
  std::fputs(out.c_str(), stdout);
  return report->ok() ? kExitOk : kExitFailed;
}

struct SyncCommandOptions {
  std::string profile;
  std::string cluster = "cluster.yaml";
  int port = weights::kDefaultSyncPort;
  bool plan = false;
  bool accept_new = false;
  bool json = false;
  std::string remote_sparkctl;
};

int RunSync(const SyncCommandOptions& o) {
  Result<ClusterTarget> t = LoadClusterTarget(o.cluster, o.profile, o.accept_new);
  if (!t.ok()) return ReportError(t.status());
  weights::SyncOptions options{.sparkctl_path = o.remote_sparkctl, .port = o.port,
                               .plan_only = o.plan};
  options.on_event = [](const std::string& line) { std::fprintf(stderr, "sync: %s\n", line.c_str()); };
  Result<weights::SyncReport> r =
      weights::SyncOnAllNodes(*t->transport, t->cluster, t->profile, options);
  if (!r.ok()) return ReportError(r.status());
  if (o.json) {
    nlohmann::ordered_json transfers = nlohmann::ordered_json::array();
    for (const auto& x : r->plan.transfers) {
      auto via = r->addresses.find(x.from);
      transfers.push_back({{"file", x.file}, {"from", x.from}, {"to", x.to}, {"size", x.size},
                           {"via", via == r->addresses.end() ? "" : via->second}});
    }
    nlohmann::ordered_json out = {{"schema", "sparkctl-weights-sync/v1"}, {"ok", r->ok()},
                                  {"plan_only", o.plan}, {"ring", r->plan.ring},
                                  {"transfers", transfers}, {"bytes_moved", r->bytes_moved},
                                  {"seconds", r->seconds}, {"warnings", r->warnings},
                                  {"errors", r->errors}};
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    for (const auto& x : r->plan.transfers) {
      std::printf("%s -> %s: %s (%s)\n", x.from.c_str(), x.to.c_str(), x.file.c_str(),
                  HumanBytes(x.size).c_str());
    }
    for (const auto& e : r->errors) std::printf("ERROR: %s\n", e.c_str());
    if (!r->after.nodes.empty()) std::fputs(weights::FormatClusterVerifyText(r->after).c_str(), stdout);
    std::printf("%s: %zu transfer(s), %s moved in %.1f s\n", r->ok() ? "OK" : "FAILED",
                r->plan.transfers.size(), HumanBytes(r->bytes_moved).c_str(), r->seconds);
  }
  return r->ok() ? kExitOk : kExitFailed;
}

void AddSyncCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<SyncCommandOptions>();
  CLI::App* c = weights->add_subcommand(
      "sync", "Copy missing or corrupt files node to node along the ring until every node "
              "holds a verified copy. Exit 2 on any failure");
  c->add_option("-p,--profile", o->profile, "Profile (model.path, model.manifest)")->required();
  AddClusterFlag(c, &o->cluster);
  c->add_option("--port", o->port, "TCP port of the node-side file servers (default 51893)");
  c->add_flag("--plan", o->plan, "Verify and show the transfers; copy nothing");
  c->add_option("--remote-sparkctl", o->remote_sparkctl,
                "sparkctl path to run on the nodes (default: install this binary)");
  c->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  AddJsonFlag(c, &o->json, "schema sparkctl-weights-sync/v1");
  SetExample(c, "sparkctl weights sync -p profiles/qwen3-tiny-demo.yaml -c cluster.yaml");
  c->callback([o, &context] { context.exit_code = RunSync(*o); });
}

void AddServeCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<weights::ServeOptions>();
  auto idle = std::make_shared<int>(1800);
  auto key_file = std::make_shared<std::string>();
  CLI::App* c = weights->add_subcommand(
      "serve", "Node side of sync: serve DIR's files over TCP to `weights pull-file` holding "
               "the same key");
  c->group("");  // internal: `weights sync` starts it on the nodes
  c->add_option("--dir", o->dir, "Model directory")->required();
  c->add_option("--port", o->port, "TCP port (default 51893)");
  c->add_option("--bind", o->bind, "Address to listen on (default 0.0.0.0)");
  c->add_option("--key-file", *key_file,
                "File whose first line is the sync's key (- = stdin; sync passes it so)")
      ->required();
  c->add_option("--idle-exit", *idle, "Exit after this many seconds without a connection");
  c->add_option("--rate-limit", o->rate_limit, "Bytes per second per connection (0: no limit)");
  SetExample(c, "sparkctl weights serve --dir /models/Qwen3-0.6B --port 51893 --key-file - "
                "< key");
  c->callback([o, idle, key_file, &context] {
    Result<std::string> key = weights::ReadSyncKey(*key_file);
    if (!key.ok()) {
      context.exit_code = ReportError(key.status());
      return;
    }
    o->key = *key;
    o->idle_exit = std::chrono::seconds(*idle);
    // The controller waits for this line before it starts the fetches.
    o->on_listening = [o](int port) {
      std::fprintf(stderr, "serve: listening on %s:%d, dir %s\n", o->bind.c_str(), port,
                   o->dir.c_str());
      std::fflush(stderr);
    };
    Status s = weights::ServeFiles(*o);
    context.exit_code = s.ok() ? kExitOk : ReportError(s);
  });
}

void AddPullFileCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<weights::FetchOptions>();
  auto quit = std::make_shared<bool>(false);
  auto json = std::make_shared<bool>(false);
  auto connect_ms = std::make_shared<int64_t>(60000);
  auto key_file = std::make_shared<std::string>();
  CLI::App* c = weights->add_subcommand(
      "pull-file", "Node side of sync: fetch one file from `weights serve`, resume a partial, "
                   "verify its SHA-256, rename it into place");
  c->group("");  // internal: `weights sync` runs it on the nodes
  c->add_option("--from", o->from, "HOST:PORT of the server")->required();
  c->add_option("--key-file", *key_file, "File whose first line is the sync's key (- = stdin)")
      ->required();
  c->add_option("--file", o->file, "Relative path as in the manifest");
  c->add_option("--dir", o->dir, "Model directory");
  c->add_option("--sha256", o->sha256, "Expected SHA-256");
  c->add_option("--size", o->size, "Expected size in bytes");
  c->add_option("--connect-timeout-ms", *connect_ms, "Retry connecting this long (default 60000)");
  c->add_flag("--quit", *quit, "Ask the server to exit instead");
  AddJsonFlag(c, json.get());
  SetExample(c, "sparkctl weights pull-file --from 10.0.0.1:51893 --key-file - --file a.bin --dir "
                "/models/x --sha256 <64 hex> --size 1048576 < key");
  c->callback([o, quit, json, connect_ms, key_file, &context] {
    Result<std::string> key = weights::ReadSyncKey(*key_file);
    if (!key.ok()) {
      context.exit_code = ReportError(key.status());
      return;
    }
    o->key = *key;
    if (*quit) {
      Status s = weights::SendQuit(o->from, o->key);
      context.exit_code = s.ok() ? kExitOk : ReportError(s);
      return;
    }
    if (o->file.empty() || o->dir.empty() || o->sha256.empty()) {
      context.exit_code = ReportError(
          InvalidArgumentError("pull-file needs --file, --dir, --sha256, --size"));
      return;
    }
    o->connect_timeout = std::chrono::milliseconds(*connect_ms);
    Result<weights::FetchResult> r = weights::FetchFile(*o);
    if (!r.ok()) {
      context.exit_code = ReportError(r.status());
      return;
    }
    nlohmann::ordered_json out = {{"state", r->state}, {"file", o->file},
                                  {"bytes_received", r->bytes_received},
                                  {"resumed_from", r->resumed_from}, {"seconds", r->seconds}};
    if (*json) std::printf("%s\n", out.dump().c_str());
    else std::printf("%s: %s\n", o->file.c_str(), r->state.c_str());
    context.exit_code = kExitOk;
  });
}

struct HubFetchCommandOptions {
  std::string profile;
  std::string cluster = "cluster.yaml";
  std::string node;
  bool each_node = false;
  int port = weights::kDefaultSyncPort;
  double poll_seconds = 2;
  bool accept_new = false;
  bool json = false;
  bool no_progress = false;
  std::string remote_sparkctl;
};

// "fetch: 1.2 GiB / 4.0 GiB (30.0%)  12.0 MiB/s  ETA 3m55s": the rate counts only this run's
// bytes, so a resumed download's ETA is not flattered by what was already there.
class FetchProgress {
 public:
  explicit FetchProgress(bool enabled) : enabled_(enabled), tty_(isatty(STDERR_FILENO) == 1) {}
  void Update(uint64_t done, uint64_t total, uint64_t at_start, double seconds) {
    if (!enabled_) return;
    auto now = std::chrono::steady_clock::now();
    bool last = done >= total;
    if (!tty_ && !last && now - printed_ < std::chrono::seconds(10)) return;
    printed_ = now;
    double rate = seconds > 0 && done > at_start ? (done - at_start) / seconds : 0;
    char line[200];
    std::snprintf(line, sizeof line, "fetch: %s / %s (%.1f%%)  %s/s  ETA %s",
                  HumanBytes(done).c_str(), HumanBytes(total).c_str(),
                  total ? 100.0 * done / total : 100.0,
                  HumanBytes(static_cast<uint64_t>(rate)).c_str(),
                  rate > 0 ? weights::FormatDuration((total - std::min(done, total)) / rate).c_str()
                           : "?");
    std::fprintf(stderr, tty_ ? "\r%s\x1b[K" : "%s\n", line);
    drawn_ = tty_;
  }
  void Line(const std::string& text) {
    if (drawn_) std::fputc('\n', stderr);
    drawn_ = false;
    std::fprintf(stderr, "fetch: %s\n", text.c_str());
  }
  ~FetchProgress() {
    if (drawn_) std::fputc('\n', stderr);
  }

 private:
  bool enabled_, tty_;
  bool drawn_ = false;
  std::chrono::steady_clock::time_point printed_{};
};

int RunHubFetch(const HubFetchCommandOptions& o) {
  const std::string schema = o.json ? weights::kHubFetchSchema : "";
  Result<ClusterTarget> t = LoadClusterTarget(o.cluster, o.profile, o.accept_new);
  if (!t.ok()) return ReportError(t.status(), schema);
  FetchProgress progress(!o.no_progress);
  weights::HubFetchOptions options{.node = o.node, .each_node = o.each_node,
                                   .sparkctl_path = o.remote_sparkctl,
                                   .hub_env = HubEnvironment()};
  options.poll_interval = std::chrono::milliseconds(static_cast<int64_t>(o.poll_seconds * 1000));
  options.sync.port = o.port;
  options.sync.on_event = [&](const std::string& line) { progress.Line("sync: " + line); };
  options.on_event = [&](const std::string& line) { progress.Line(line); };
  options.on_progress = [&](uint64_t done, uint64_t total, uint64_t at_start, double seconds) {
    progress.Update(done, total, at_start, seconds);
  };
  Result<weights::HubFetchReport> r =
      weights::FetchFromHub(*t->transport, t->cluster, t->profile, options);
  if (!r.ok()) return ReportError(r.status(), schema);
  std::string out = o.json ? weights::FormatHubFetchJson(*r) : weights::FormatHubFetchText(*r);
  std::fputs(out.c_str(), stdout);
  return r->ok() ? kExitOk : kExitFailed;
}

void AddHubFetchCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<HubFetchCommandOptions>();
  CLI::App* c = weights->add_subcommand(
      "fetch", "Download the profile's pinned revision from the Hugging Face Hub with `hf "
               "download` on one node (or each), write or check the manifest, sync the rest "
               "node to node. Resumable. Exit 2 on any failure");
  c->add_option("-p,--profile", o->profile,
                "Profile (model.repository, model.revision, model.path, model.manifest)")
      ->required();
  AddClusterFlag(c, &o->cluster);
  c->add_option("--node", o->node, "Node that downloads (default: rank 0's)");
  c->add_flag("--each-node", o->each_node, "Every node downloads over its own internet link");
  c->add_option("--port", o->port, "TCP port of the sync's node-side file servers (default 51893)");
  c->add_option("--poll-interval", o->poll_seconds, "Seconds between progress polls (default 2)")
      ->check(CLI::Range(0.1, 600.0));
  c->add_option("--remote-sparkctl", o->remote_sparkctl,
                "sparkctl path to run on the nodes (default: install this binary)");
  c->add_flag("--accept-new", o->accept_new, "Trust unknown host keys on first contact");
  c->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  AddJsonFlag(c, &o->json, "schema sparkctl-weights-fetch/v1");
  SetExample(c, "HF_TOKEN=hf_... sparkctl weights fetch "
                "-p profiles/deepseek-v41-flash-tp4-ring.yaml -c cluster.yaml");
  c->callback([o, &context] { context.exit_code = RunHubFetch(*o); });
}

void AddClusterWeightsCommands(CLI::App* weights, CommandContext& context) {
  AddHubFetchCommand(weights, context);
  AddSyncCommand(weights, context);
  AddServeCommand(weights, context);
  AddPullFileCommand(weights, context);
}

}  // namespace

void RegisterWeightsCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* weights =
      parent.add_subcommand("weights", "Checkpoint manifests and SHA-256 verification");
  weights->require_subcommand(1);
  AddManifestCommand(weights, context);
  AddVerifyCommand(weights, context);
  AddClusterWeightsCommands(weights, context);
}

}  // namespace spark::cli
