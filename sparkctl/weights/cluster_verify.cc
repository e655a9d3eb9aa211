#include "sparkctl/weights/cluster_verify.h"

#include <algorithm>
#include <cstdio>
#include <mutex>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/profile/profile_yaml.h"
#include "sparkctl/ssh/parallel.h"
#include "sparkctl/bundle/deploy.h"
#include "sparkctl/weights/atomic_file.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/verify_report.h"

namespace spark::weights {
namespace {

using Clock = std::chrono::steady_clock;

Result<Manifest> ParseManifestText(const std::string& text, const std::string& source) {
  return DetectManifestFormat(text) == ManifestFormat::kJson ? ParseManifestJson(text, source)
                                                             : ParseSha256Sums(text, source);
}

std::string VerifyCommand(const std::string& sparkctl, const std::string& dir,
                          const ClusterVerifyOptions& o) {
  std::string cmd = ssh::ShellQuote(sparkctl) + " weights verify --manifest - --dir " +
                    ssh::ShellQuote(dir) + " --json --no-progress";
  if (o.allow_extra) cmd += " --allow-extra";
  if (!o.use_cache) cmd += " --no-cache";
  if (o.create_dir) cmd = "mkdir -p " + ssh::ShellQuote(dir) + " && " + cmd;
  return cmd;
}

// Runs the node-side verify and turns its stdout into a report. The node exits 2 both for a
// failed check (report on stdout) and for an unusable directory (message on stderr only).
Result<VerifyReport> VerifyOneNode(ssh::Transport& transport, const std::string& node,
                                   const std::string& manifest_path,
                                   const std::string& manifest_text, const std::string& dir,
                                   const ClusterVerifyOptions& o) {
  std::string sparkctl = o.sparkctl_path;
  if (sparkctl.empty()) {
    SPARK_ASSIGN_OR_RETURN(auto self, bundle::EnsureProgram(transport, bundle::DefaultCatalog(),
                                                            node, "sparkctl"));
    sparkctl = self.path;
  }
  ssh::RunOptions run;
  run.timeout = o.timeout;
  run.stdin_data = manifest_text;
  std::string cmd = VerifyCommand(sparkctl, dir, o);
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, transport.Run(node, cmd, run));
  if (r.exit_code != 0 && r.exit_code != 2) return ssh::CommandFailedError(node, cmd, r);
  // A node's verify that stopped before its work prints the error document of its schema
  // ({"ok": false, "error": {...}}) instead of a report.
  const nlohmann::json doc = nlohmann::json::parse(r.stdout_data, nullptr, false);
  const bool error_doc = doc.is_object() && doc.contains("error") && doc["error"].is_object();
  if (error_doc || r.stdout_data.find_first_not_of(" \n\t") == std::string::npos) {
    std::string why = error_doc ? doc["error"].value("message", std::string())
                                : ssh::Tail(r.stderr_data, 400);
    while (!why.empty() && why.back() == '\n') why.pop_back();
    return FailedPreconditionError(node + ": cannot verify " + dir + ": " +
                                   (why.empty() ? "no report (exit " +
                                                      std::to_string(r.exit_code) + ")"
                                                : why) +
                                   "; fix the directory on " + node +
                                   " or run `sparkctl weights sync`");
  }
  SPARK_ASSIGN_OR_RETURN(VerifyReport report,
                         ParseVerifyReportJson(r.stdout_data, node + ": verify stdout"));
  report.node = node;  // the inventory name, which may differ from the node's hostname
  report.manifest = manifest_path;
  return report;
}

}  // namespace

bool ClusterVerifyReport::ok() const {
  if (nodes.empty()) return false;
  return std::all_of(nodes.begin(), nodes.end(),
                     [&](const NodeVerify& n) { return n.ok(allow_extra); });
}

size_t ClusterVerifyReport::Unreachable() const {
  return std::count_if(nodes.begin(), nodes.end(),
                       [](const NodeVerify& n) { return !n.status.ok(); });
}

std::vector<std::string> RingOrder(const netplan::ClusterSpec& cluster) {
  std::vector<const netplan::NodeSpec*> nodes;
  for (const auto& n : cluster.nodes) nodes.push_back(&n);
  bool ranked = std::all_of(nodes.begin(), nodes.end(), [](auto* n) { return n->rank.has_value(); });
  if (ranked) {
    std::stable_sort(nodes.begin(), nodes.end(), [](auto* a, auto* b) { return *a->rank < *b->rank; });
  }
  std::vector<std::string> names;
  for (auto* n : nodes) names.push_back(n->name);
  return names;
}

Result<ClusterVerifyReport> VerifyNodes(ssh::Transport& transport,
                                        const std::vector<std::string>& nodes,
                                        const std::string& manifest_path,
                                        const std::string& manifest_text, const std::string& dir,
                                        const ClusterVerifyOptions& options) {
  SPARK_ASSIGN_OR_RETURN(Manifest manifest, ParseManifestText(manifest_text, manifest_path));
  if (manifest.files.empty()) {
    return InvalidArgumentError(manifest_path + " lists no files, so it would verify nothing: "
                                "recreate it from a full copy with `sparkctl weights manifest`");
  }
  if (nodes.empty()) return InvalidArgumentError("no nodes to verify: the inventory lists none");
  if (dir.empty() || dir[0] != '/') {
    return InvalidArgumentError("model.path \"" + dir + "\": must be an absolute directory");
  }
  ClusterVerifyReport out{.manifest = manifest_path, .dir = dir,
                          .repository = manifest.repository, .revision = manifest.revision,
                          .allow_extra = options.allow_extra};
  out.nodes.resize(nodes.size());
  std::mutex mu;
  size_t done = 0;
  ssh::ParallelFor(nodes.size(), ssh::kDefaultMaxParallel, [&](size_t i) {
    auto started = Clock::now();
    Result<VerifyReport> r =
        VerifyOneNode(transport, nodes[i], manifest_path, manifest_text, dir, options);
    NodeVerify& n = out.nodes[i];
    n.node = nodes[i];
    n.seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (r.ok()) {
      n.report = std::move(*r);
    } else {
      // Transport errors already start with the node name; others get it here.
      const std::string& m = r.status().message();
      n.status = m.rfind(nodes[i] + ":", 0) == 0 ? r.status() : r.status().WithContext(nodes[i]);
    }
    std::lock_guard<std::mutex> lock(mu);
    ++done;
    if (options.on_node_done) options.on_node_done(n, done, nodes.size());
  });
  return out;
}

Result<ClusterVerifyReport> VerifyOnAllNodes(ssh::Transport& transport,
                                             const netplan::ClusterSpec& cluster,
                                             const profile::Profile& profile,
                                             const ClusterVerifyOptions& options) {
  std::string path = profile::ResolvedManifestPath(profile);
  if (path.empty()) {
    return FailedPreconditionError(profile.source_file +
                                   ": model.manifest is not set: create one with `sparkctl "
                                   "weights manifest` and point model.manifest at it");
  }
  Result<std::string> text = ReadWholeFile(path);
  if (!text.ok()) {
    return text.status().WithContext(profile.source_file + ": model.manifest");
  }
  return VerifyNodes(transport, RingOrder(cluster), path, *text, profile.model.path, options);
}

std::string FormatClusterVerifyJson(const ClusterVerifyReport& report) {
  nlohmann::ordered_json nodes = nlohmann::ordered_json::array();
  size_t ok_nodes = 0;
  for (const auto& n : report.nodes) {
    nlohmann::ordered_json j = {{"node", n.node}, {"ok", n.ok(report.allow_extra)},
                                {"seconds", n.seconds}};
    if (n.status.ok()) {
      j["error"] = nullptr;
      j["report"] = nlohmann::ordered_json::parse(
          FormatVerifyReportJson(n.report, report.allow_extra));
    } else {
      j["error"] = n.status.message();
      j["report"] = nullptr;
    }
    ok_nodes += n.ok(report.allow_extra);
    nodes.push_back(std::move(j));
  }
  nlohmann::ordered_json out = {
      {"schema", kClusterVerifySchema}, {"ok", report.ok()},
      {"manifest", report.manifest},    {"dir", report.dir},
      {"repository", report.repository}, {"revision", report.revision},
      {"counts", {{"nodes", report.nodes.size()}, {"ok", ok_nodes},
                  {"unreachable", report.Unreachable()}}},
      {"nodes", std::move(nodes)}};
  return out.dump(2) + "\n";
}

std::string FormatNodeDoneLine(const NodeVerify& n, size_t done, size_t total) {
  std::string progress = " (" + std::to_string(done) + "/" + std::to_string(total) + ")";
  if (!n.status.ok()) return n.node + ": ERROR: " + n.status.message() + progress;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f s", n.seconds);
  size_t bad = n.report.files.size() - n.report.Count(FileState::kOk);
  std::string verdict = n.report.ok() ? "ok" : std::to_string(bad) + " problem(s)";
  return n.node + ": " + verdict + ", " + std::to_string(n.report.files.size()) + " files, " +
         HumanBytes(n.report.bytes_total) + " (" + HumanBytes(n.report.bytes_hashed) +
         " hashed) in " + seconds + progress;
}

std::string FormatClusterVerifyText(const ClusterVerifyReport& report) {
  std::string out;
  size_t bad_nodes = 0;
  for (const auto& n : report.nodes) {
    if (!n.status.ok()) {
      out += n.node + ": UNREACHABLE or unusable: " + n.status.message() + "\n";
      ++bad_nodes;
      continue;
    }
    for (const auto& f : n.report.files) {
      if (f.state == FileState::kOk) continue;
      if (f.state == FileState::kExtra && report.allow_extra) continue;
      out += n.node + ": " + report.dir + "/" + f.path + ": " +
             std::string(FileStateName(f.state)) + (f.detail.empty() ? "" : ": " + f.detail) +
             "\n";
    }
    bad_nodes += !n.ok(report.allow_extra);
  }
  std::string what = report.repository + (report.revision.empty() ? "" : "@" + report.revision);
  if (bad_nodes == 0) {
    out += "OK: " + what + " verified on all " + std::to_string(report.nodes.size()) +
           " nodes at " + report.dir + "\n";
  } else {
    out += "FAILED: " + std::to_string(bad_nodes) + " of " + std::to_string(report.nodes.size()) +
           " nodes do not hold a verified copy of " + what + " at " + report.dir +
           "; fix: `sparkctl weights sync` copies good files from a node that has them\n";
  }
  return out;
}

}  // namespace spark::weights
