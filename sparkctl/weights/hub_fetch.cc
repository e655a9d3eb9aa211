#include "sparkctl/weights/hub_fetch.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "base/process.h"
#include "base/strings.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/weights/atomic_file.h"
#include "sparkctl/weights/cluster_verify.h"
#include "sparkctl/weights/progress.h"

namespace spark::weights {
namespace {

using Clock = std::chrono::steady_clock;
using ssh::ShellQuote;

constexpr char kTreeMarker[] = "@@sparkctl-hub-tree@@";

// sparkctl's own files on the node, beside hf's: ignored by manifests and verify.
std::string StateDir(const std::string& dir) { return dir + "/.cache/sparkctl"; }

// Exports the HF_* lines the controller sends on stdin (the token never is on a command line).
constexpr char kReadEnv[] =
    "while IFS= read -r kv; do case \"$kv\" in "
    "HF_TOKEN=*|HF_ENDPOINT=*|HF_HUB_DISABLE_TELEMETRY=*|HF_HUB_DISABLE_UPDATE_CHECK=*) export "
    "\"$kv\";; "
    "esac; done; ";
constexpr char kNeedHf[] =
    "command -v hf >/dev/null 2>&1 || { echo 'hf: command not found' >&2; exit 127; }; ";

std::string EnvInput(const HubFetchOptions& options) {
  std::string in;
  for (const auto& [k, v] : options.hub_env) {
    if (IsHubVariable(k) && !v.empty() && v.find('\n') == std::string::npos) {
      in += k + "=" + v + "\n";
    }
  }
  return in;
}

struct Preflight {
  HubListing listing;
  uint64_t bytes_present = 0;
  uint64_t bytes_free = 0;
};

// One round trip: hf is there, the Hub's info and file list, bytes present and free in dir.
Result<Preflight> RunPreflight(ssh::Transport& transport, const std::string& node,
                               const profile::Profile& profile, const HubFetchOptions& options) {
  const auto& m = profile.model;
  const std::string dir = ShellQuote(m.path);
  const std::string args = ShellQuote(m.repository) + " --revision " + ShellQuote(m.revision);
  // HF_DEBUG=1: the CLI's tracebacks name the error class (GatedRepoError, ...).
  std::string cmd = std::string(kNeedHf) + kReadEnv + "export HF_DEBUG=1; mkdir -p " + dir +
                    " || exit 1; hf models info " + args + " --expand sha --json && echo " +
                    kTreeMarker + " && hf models ls " + args + " -R --json || exit $?; " +
                    "echo \"space $(du -sb " + dir + " | cut -f1) $(stat -f -c '%a %S' " + dir +
                    ")\"";
  ssh::RunOptions run;
  run.stdin_data = EnvInput(options);
  run.timeout = std::chrono::minutes(5);
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, transport.Run(node, cmd, run));
  if (!r.ok()) {
    return HubCommandError(node, r.exit_code, r.stderr_data + r.stdout_data, m.repository,
                           m.revision, profile.source_file);
  }
  Preflight p;
  const std::string& out = r.stdout_data;
  unsigned long long present = 0, blocks = 0, block_size = 0;
  size_t space = out.rfind("\nspace ");
  if (space != std::string::npos) {
    ++space;
    std::sscanf(out.c_str() + space, "space %llu %llu %llu", &present, &blocks, &block_size);
  }
  p.bytes_present = present;
  p.bytes_free = blocks * block_size;
  size_t marker = out.find(kTreeMarker);
  size_t info_at = out.find('{');
  if (marker == std::string::npos || info_at == std::string::npos || info_at > marker) {
    return InternalError(node + ": unexpected output of hf: " + ssh::Tail(out, 400));
  }
  std::string tree = out.substr(
      marker + sizeof(kTreeMarker) - 1,
      space == std::string::npos ? std::string::npos : space - marker - sizeof(kTreeMarker) + 1);
  SPARK_ASSIGN_OR_RETURN(
      p.listing, ParseHubListing(m.repository, m.revision, out.substr(info_at, marker - info_at),
                                 tree.substr(std::min(tree.find('['), tree.size())), node));
  return p;
}

struct Started {
  bool attached = false;   // a download started earlier still runs
  int stale_partials = 0;  // removed leftovers of a killed hf
};

// Starts `hf download` detached, or reports that one started earlier still runs.
Result<Started> StartDownload(ssh::Transport& transport, const std::string& node,
                              const profile::Profile& profile, const std::string& commit,
                              const HubFetchOptions& options) {
  const std::string s = ShellQuote(StateDir(profile.model.path));
  std::string cmd =
      std::string(kNeedHf) + "mkdir -p " + s +
      " || exit 1; "
      "if [ -f " +
      s + "/hf.pid ] && kill -0 \"$(cat " + s +
      "/hf.pid)\" 2>/dev/null; then "
      "echo attached; exit 0; fi; " +
      kReadEnv + "rm -f " + s + "/hf.rc; " +
      // hf (2.x) downloads into NAME.ETAG.XXXXXXXX.incomplete, unique per process, and never
      // reuses one: those a killed hf left behind only take space. (Older hf resumes from
      // NAME.ETAG.incomplete, which is kept.)
      "find " + ShellQuote(profile.model.path + "/.cache/huggingface/download") +
      " -name '*.????????.incomplete' -print -delete 2>/dev/null | wc -l | "
      "sed 's/^/stale /'; "
      "setsid sh -c 'hf download \"$1\" --revision \"$2\" --local-dir \"$3\" >\"$4/hf.log\" 2>&1; "
      "echo $? >\"$4/hf.rc.tmp\"; mv \"$4/hf.rc.tmp\" \"$4/hf.rc\"' sh " +
      ShellQuote(profile.model.repository) + " " + ShellQuote(commit) + " " +
      ShellQuote(profile.model.path) + " " + s +
      " </dev/null >/dev/null 2>&1 & "
      "echo $! >" +
      s + "/hf.pid; echo started";
  ssh::RunOptions run;
  run.stdin_data = EnvInput(options);
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, cmd, run));
  Started started{.attached = r.stdout_data.find("attached") != std::string::npos};
  size_t at = r.stdout_data.find("stale ");
  if (at != std::string::npos) started.stale_partials = std::atoi(r.stdout_data.c_str() + at + 6);
  return started;
}

struct PollResult {
  bool done = false;
  int exit_code = 0;
  uint64_t bytes = 0;
  std::string log;
};

Result<PollResult> Poll(ssh::Transport& transport, const std::string& node,
                        const std::string& dir) {
  const std::string s = ShellQuote(StateDir(dir));
  std::string cmd = "alive=0; [ -f " + s + "/hf.pid ] && kill -0 \"$(cat " + s +
                    "/hf.pid)\" 2>/dev/null && alive=1; rc=$(cat " + s +
                    "/hf.rc 2>/dev/null); "
                    "echo \"poll $alive $(du -sb " +
                    ShellQuote(dir) +
                    " | cut -f1) ${rc:--}\"; "
                    "[ $alive = 1 ] || tail -c 3000 " +
                    s + "/hf.log 2>/dev/null";
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, cmd));
  int alive = 0;
  unsigned long long bytes = 0;
  char rc[32] = "";
  if (std::sscanf(r.stdout_data.c_str(), "poll %d %llu %31s", &alive, &bytes, rc) != 3) {
    return InternalError(node +
                         ": cannot read the download's state: " + ssh::Tail(r.stdout_data, 200));
  }
  PollResult p{.done = alive == 0, .bytes = bytes};
  if (p.done) {
    p.exit_code = std::string(rc) == "-" ? -1 : std::atoi(rc);
    size_t nl = r.stdout_data.find('\n');
    p.log = nl == std::string::npos ? "" : r.stdout_data.substr(nl + 1);
  }
  return p;
}

Status DownloadError(const std::string& node, const PollResult& p,
                     const profile::Profile& profile) {
  const auto& m = profile.model;
  if (p.exit_code == -1 || p.exit_code == 137 || p.exit_code == 143) {
    return AbortedError(node + ": hf download of " + m.repository +
                        " was stopped before it "
                        "finished (" +
                        (p.exit_code == -1 ? "no exit status" : "killed") +
                        "); run `sparkctl weights fetch` again: it keeps the finished files "
                        "and downloads the rest");
  }
  return HubCommandError(node, p.exit_code, p.log, m.repository, m.revision, profile.source_file);
}

// Starts every download and polls until each has ended.
void RunDownloads(ssh::Transport& transport, const std::vector<std::string>& nodes,
                  const profile::Profile& profile, const HubListing& hub,
                  const HubFetchOptions& options, std::vector<NodeDownload>* downloads) {
  auto started_at = Clock::now();
  std::vector<bool> running(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    NodeDownload& d = (*downloads)[i];
    Result<Started> started = StartDownload(transport, nodes[i], profile, hub.commit, options);
    if (!started.ok()) {
      d.status = started.status();
      continue;
    }
    d.attached = started->attached;
    running[i] = true;
    if (options.on_event && started->stale_partials > 0) {
      options.on_event(nodes[i] + ": removed " + std::to_string(started->stale_partials) +
                       " partial file(s) of an interrupted hf download (hf restarts unfinished "
                       "files; finished ones are kept)");
    }
    if (options.on_event) {
      options.on_event(nodes[i] + ": " + (d.attached ? "attached to the running " : "started ") +
                       "hf download " + profile.model.repository + " --revision " + hub.commit);
    }
  }
  const uint64_t total = hub.TotalBytes() * nodes.size();
  uint64_t at_start = 0;
  bool first_round = true;
  while (std::find(running.begin(), running.end(), true) != running.end()) {
    uint64_t done = 0;
    for (size_t i = 0; i < nodes.size(); ++i) {
      NodeDownload& d = (*downloads)[i];
      if (running[i]) {
        Result<PollResult> p = Poll(transport, nodes[i], profile.model.path);
        if (!p.ok()) {
          d.status = p.status();
          running[i] = false;
        } else {
          d.bytes_after = p->bytes;
          if (first_round) d.bytes_before = p->bytes;
          if (p->done) {
            running[i] = false;
            d.seconds = std::chrono::duration<double>(Clock::now() - started_at).count();
            if (p->exit_code != 0) d.status = DownloadError(nodes[i], *p, profile);
          }
        }
      }
      done += std::min<uint64_t>(d.bytes_after, hub.TotalBytes());
    }
    if (first_round) at_start = done;  // what an earlier run left (stale partials removed)
    first_round = false;
    double seconds = std::chrono::duration<double>(Clock::now() - started_at).count();
    if (options.on_progress) options.on_progress(done, total, at_start, seconds);
    if (std::find(running.begin(), running.end(), true) != running.end()) {
      std::this_thread::sleep_for(options.poll_interval);
    }
  }
}

// `sparkctl weights manifest` on the node, read back and checked against the Hub.
Result<std::string> MakeManifestOnNode(ssh::Transport& transport, const std::string& node,
                                       const std::string& sparkctl, const profile::Profile& profile,
                                       const HubListing& hub) {
  const std::string out = StateDir(profile.model.path) + "/manifest.json";
  std::string cmd = ShellQuote(sparkctl) + " weights manifest " + ShellQuote(profile.model.path) +
                    " --repo " + ShellQuote(hub.repository) + " --revision " + hub.commit +
                    " --out " + ShellQuote(out) + " --force --no-progress >/dev/null && cat " +
                    ShellQuote(out);
  ssh::RunOptions run;
  run.timeout = std::chrono::hours(6);
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, cmd, run));
  SPARK_ASSIGN_OR_RETURN(Manifest manifest, ParseManifestJson(r.stdout_data, node + ":" + out));
  SPARK_RETURN_IF_ERROR(
      CheckManifestAgainstHub(manifest, hub, "the manifest of " + node + "'s download"));
  return r.stdout_data;
}

Result<std::vector<std::string>> DownloadNodes(const netplan::ClusterSpec& cluster,
                                               const HubFetchOptions& options) {
  std::vector<std::string> ring = RingOrder(cluster);
  if (ring.empty()) return InvalidArgumentError("the inventory has no nodes");
  if (options.each_node) {
    if (!options.node.empty())
      return InvalidArgumentError("--node and --each-node exclude each other");
    return ring;
  }
  if (options.node.empty()) return std::vector<std::string>{ring.front()};
  if (std::find(ring.begin(), ring.end(), options.node) == ring.end()) {
    return NotFoundError("--node " + options.node + ": not in the inventory" +
                         DidYouMean(options.node, ring) + " (nodes: " + Join(ring, ", ") + ")");
  }
  return std::vector<std::string>{options.node};
}

}  // namespace

bool IsHubVariable(const std::string& name) {
  return std::find(std::begin(kHubVariables), std::end(kHubVariables), name) !=
         std::end(kHubVariables);
}

bool HubFetchReport::ok() const {
  for (const auto& d : downloads) {
    if (!d.status.ok()) return false;
  }
  return sync.ok() && !sync.after.nodes.empty();
}

Result<HubListing> ListHubRevisionHere(const std::string& repository, const std::string& revision,
                                       const std::string& fix_in) {
  ProcessRunner runner;
  std::string out[2];
  const std::vector<std::string> what[2] = {
      {"info", repository, "--revision", revision, "--expand", "sha", "--json"},
      {"ls", repository, "--revision", revision, "-R", "--json"}};
  for (int i = 0; i < 2; ++i) {
    std::vector<std::string> argv = {"env", "HF_DEBUG=1", "hf", "models"};
    argv.insert(argv.end(), what[i].begin(), what[i].end());
    SPARK_ASSIGN_OR_RETURN(CommandResult r, runner.Run(argv));
    if (r.exit_code != 0) {
      return HubCommandError("this machine", r.exit_code, r.err + r.out, repository, revision,
                             fix_in);
    }
    out[i] = r.out;
  }
  return ParseHubListing(repository, revision,
                         out[0].substr(std::min(out[0].find('{'), out[0].size())),
                         out[1].substr(std::min(out[1].find('['), out[1].size())), "this machine");
}

std::string DefaultManifestPathFor(const profile::Profile& profile) {
  std::string rel = ManifestRelativePath(profile.model.repository, profile.model.revision)
                        .value_or("profiles/checkpoints/unknown.json");
  rel = rel.substr(std::string("profiles/").size());
  std::filesystem::path folder = std::filesystem::path(profile.source_file).parent_path();
  return (folder / rel).string();
}

Result<HubFetchReport> FetchFromHub(ssh::Transport& transport, const netplan::ClusterSpec& cluster,
                                    const profile::Profile& profile,
                                    const HubFetchOptions& options) {
  auto started = Clock::now();
  SPARK_ASSIGN_OR_RETURN(std::vector<std::string> nodes, DownloadNodes(cluster, options));
  HubFetchReport report;
  report.manifest_path = profile::ResolvedManifestPath(profile);
  report.manifest_in_profile = !report.manifest_path.empty();
  if (report.manifest_path.empty()) report.manifest_path = DefaultManifestPathFor(profile);
  std::optional<Manifest> pinned;
  if (std::filesystem::exists(report.manifest_path)) {
    SPARK_ASSIGN_OR_RETURN(pinned, ReadManifestFile(report.manifest_path));
  }
  auto checks = ssh::ForEachNode<Preflight>(nodes, [&](const std::string& node) {
    return RunPreflight(transport, node, profile, options);
  });
  SPARK_RETURN_IF_ERROR(ssh::JoinNodeErrors(checks));
  report.hub = checks[0]->listing;
  if (pinned)
    SPARK_RETURN_IF_ERROR(CheckManifestAgainstHub(*pinned, report.hub, report.manifest_path));
  for (size_t i = 0; i < nodes.size(); ++i) {
    uint64_t need =
        report.hub.TotalBytes() - std::min(report.hub.TotalBytes(), checks[i]->bytes_present);
    if (checks[i]->bytes_free < need) {
      return ResourceExhaustedError(nodes[i] + ": " + profile.model.path + " needs " +
                                    HumanBytes(need) + " more for " + report.hub.repository +
                                    " but only " + HumanBytes(checks[i]->bytes_free) +
                                    " are free; free space there (nothing was downloaded)");
    }
    report.downloads.push_back({.node = nodes[i],
                                .bytes_before = checks[i]->bytes_present,
                                .bytes_after = checks[i]->bytes_present});
  }
  RunDownloads(transport, nodes, profile, report.hub, options, &report.downloads);
  for (const auto& d : report.downloads) {
    if (!d.status.ok()) return report;
  }
  std::string text;
  if (pinned) {
    SPARK_ASSIGN_OR_RETURN(text, ReadWholeFile(report.manifest_path));
  } else {
    SPARK_ASSIGN_OR_RETURN(auto sparkctl,
                           NodeSparkctlPaths(transport, {nodes[0]}, options.sparkctl_path));
    SPARK_ASSIGN_OR_RETURN(
        text, MakeManifestOnNode(transport, nodes[0], sparkctl.at(nodes[0]), profile, report.hub));
    std::filesystem::create_directories(std::filesystem::path(report.manifest_path).parent_path());
    SPARK_RETURN_IF_ERROR(WriteFileAtomically(report.manifest_path, text));
    report.manifest_written = true;
    if (options.on_event) options.on_event("wrote " + report.manifest_path);
    if (!report.manifest_in_profile) {
      report.manifest_field =
          std::filesystem::path(report.manifest_path)
              .lexically_relative(std::filesystem::path(profile.source_file).parent_path())
              .string();
    }
  }
  SyncOptions sync = options.sync;
  sync.sparkctl_path = options.sparkctl_path;
  SPARK_ASSIGN_OR_RETURN(report.sync, SyncManifestOnAllNodes(transport, cluster, profile.model.path,
                                                             report.manifest_path, text, sync));
  report.seconds = std::chrono::duration<double>(Clock::now() - started).count();
  return report;
}

std::string FormatHubFetchJson(const HubFetchReport& r) {
  nlohmann::ordered_json downloads = nlohmann::ordered_json::array();
  for (const auto& d : r.downloads) {
    downloads.push_back({{"node", d.node},
                         {"ok", d.status.ok()},
                         {"attached", d.attached},
                         {"bytes_before", d.bytes_before},
                         {"bytes_after", d.bytes_after},
                         {"seconds", d.seconds},
                         {"error", d.status.ok() ? nlohmann::ordered_json()
                                                 : nlohmann::ordered_json(d.status.ToString())}});
  }
  nlohmann::ordered_json transfers = nlohmann::ordered_json::array();
  for (const auto& x : r.sync.plan.transfers) {
    auto via = r.sync.addresses.find(x.from);
    transfers.push_back({{"file", x.file},
                         {"from", x.from},
                         {"to", x.to},
                         {"size", x.size},
                         {"via", via == r.sync.addresses.end() ? "" : via->second}});
  }
  nlohmann::ordered_json files = nlohmann::ordered_json::array();
  for (const auto& f : r.hub.files) {
    files.push_back({{"path", f.path}, {"size", f.size}, {"lfs_sha256", f.lfs_sha256}});
  }
  nlohmann::ordered_json out = {
      {"schema", kHubFetchSchema},
      {"ok", r.ok()},
      {"repository", r.hub.repository},
      {"revision", r.hub.revision},
      {"commit", r.hub.commit},
      {"bytes_total", r.hub.TotalBytes()},
      {"files", files},
      {"downloads", downloads},
      {"manifest",
       {{"path", r.manifest_path},
        {"written", r.manifest_written},
        {"in_profile", r.manifest_in_profile},
        {"profile_field", r.manifest_field}}},
      {"sync",
       {{"transfers", transfers},
        {"bytes_moved", r.sync.bytes_moved},
        {"warnings", r.sync.warnings},
        {"errors", r.sync.errors}}},
      {"verify", r.sync.after.nodes.empty()
                     ? nlohmann::ordered_json()
                     : nlohmann::ordered_json::parse(FormatClusterVerifyJson(r.sync.after))},
      {"seconds", r.seconds}};
  return out.dump(2) + "\n";
}

std::string FormatHubFetchText(const HubFetchReport& r) {
  std::string out;
  for (const auto& d : r.downloads) {
    out += d.status.ok() ? d.node + ": downloaded " + r.hub.repository + "@" + r.hub.commit + " (" +
                               HumanBytes(r.hub.TotalBytes()) + ")\n"
                         : "ERROR: " + d.status.message() + "\n";
  }
  if (!r.manifest_path.empty() && !r.sync.after.nodes.empty()) {
    out +=
        (r.manifest_written ? "manifest written: " : "manifest checked: ") + r.manifest_path + "\n";
    if (r.manifest_written && !r.manifest_in_profile) {
      out += "note: add it to the profile's model section: manifest: " + r.manifest_field + "\n";
    }
    for (const auto& e : r.sync.errors) out += "ERROR: " + e + "\n";
    out += FormatClusterVerifyText(r.sync.after);
  }
  char tail[160];
  std::snprintf(tail, sizeof tail, "%s: fetch of %s in %.1f s, %zu sync transfer(s)\n",
                r.ok() ? "OK" : "FAILED", r.hub.repository.c_str(), r.seconds,
                r.sync.plan.transfers.size());
  return out + tail;
}

}  // namespace spark::weights
