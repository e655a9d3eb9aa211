// `sparkctl weights manifest DIR ...` and `sparkctl weights verify --manifest FILE --dir DIR`:
// the local half of weight management. `verify --json` is also what the controller will run on
// every node over SSH; its stdout is a VerifyReport (sparkctl/weights/verify_report.h).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "sparkctl/cli/families.h"
#include "sparkctl/weights/create_manifest.h"
#include "sparkctl/weights/manifest.h"
#include "sparkctl/weights/verify.h"
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
};

Result<ManifestFormat> ChooseFormat(const ManifestCommandOptions& o) {
  if (o.format == "json") return ManifestFormat::kJson;
  if (o.format == "sha256sums") return ManifestFormat::kSha256Sums;
  if (o.format == "auto") return weights::FormatForOutputPath(o.out);
  return InvalidArgumentError("--format " + o.format + ": use auto, json or sha256sums");
}

Status CheckManifestArgs(const ManifestCommandOptions& o, ManifestFormat format) {
  if (format == ManifestFormat::kJson && (o.repository.empty() || o.revision.empty())) {
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

int RunVerify(const VerifyCommandOptions& o) {
  Result<weights::Manifest> manifest = weights::ReadManifestFile(o.manifest);
  if (!manifest.ok()) return ReportError(manifest.status());
  weights::VerifyOptions options{.dir = o.dir, .manifest_path = o.manifest,
                                 .use_cache = !o.no_cache, .cache_path = o.cache,
                                 .threads = o.threads};
  options.progress.enabled = !o.no_progress;
  Result<weights::VerifyReport> report = weights::VerifyDirectory(*manifest, options);
  if (!report.ok()) return ReportError(report.status());
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
  c->add_flag("--json", o->json, "Machine-readable result on stdout");
  SetExample(c, "sparkctl weights manifest /models/Qwen3-0.6B --repo Qwen/Qwen3-0.6B "
                "--revision c1899de --out profiles/checkpoints/Qwen--Qwen3-0.6B/c1899de.json");
  c->callback([o, &context] { context.exit_code = RunManifest(*o); });
}

void AddVerifyCommand(CLI::App* weights, CommandContext& context) {
  auto o = std::make_shared<VerifyCommandOptions>();
  CLI::App* c = weights->add_subcommand(
      "verify", "Check a local copy against its manifest: every file's size and SHA-256, "
                "missing and extra files. Exit 2 on any mismatch");
  c->add_option("--manifest", o->manifest, "Manifest (JSON or SHA256SUMS)")->required();
  c->add_option("--dir", o->dir, "Directory holding the checkpoint")->required();
  c->add_option("--cache", o->cache, "Verify cache file (default DIR/.sparkctl-verify-cache.json)");
  c->add_option("--threads", o->threads, "Files hashed at once (default: every CPU)");
  c->add_flag("--no-cache", o->no_cache, "Hash every file; neither read nor write the cache");
  c->add_flag("--no-progress", o->no_progress, "No progress display on stderr");
  c->add_flag("--allow-extra", o->allow_extra, "Files not in the manifest do not fail the check");
  c->add_flag("--json", o->json, "Result as JSON on stdout (schema sparkctl-weights-verify/v1)");
  SetExample(c, "sparkctl weights verify --manifest "
                "profiles/checkpoints/Qwen--Qwen3-0.6B/c1899de.json --dir /models/Qwen3-0.6B");
  c->callback([o, &context] { context.exit_code = RunVerify(*o); });
}

}  // namespace

void RegisterWeightsCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* weights =
      parent.add_subcommand("weights", "Checkpoint manifests and SHA-256 verification");
  weights->require_subcommand(1);
  AddManifestCommand(weights, context);
  AddVerifyCommand(weights, context);
}

}  // namespace spark::cli
