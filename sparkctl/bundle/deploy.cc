#include "sparkctl/bundle/deploy.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "base/logging.h"
#include "base/strings.h"

namespace spark::bundle {
namespace {

namespace fs = std::filesystem;
using ssh::ShellQuote;

// Bundles kept on a node besides the one being installed, and how old the others must be
// before they go (a model started from one may still be running and restart from it).
constexpr int kKeepBundles = 4;
constexpr int kPruneAfterMinutes = 24 * 60;

std::string ObjectName(const BundleFile& f) { return fmt::format("{}-{:o}", f.sha256, f.mode); }

bool Exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

std::string MachineCase(const std::string& machine) {
  return machine == "aarch64" ? "aarch64|arm64" : machine;
}

// Round trip 1: the platform, then the ids of the node's complete bundles.
std::string SurveyScript(const std::string& root) {
  return PlatformProbeScript() + "for f in " + ShellQuote(root) +
         "/bundles/*/.complete; do [ -e \"$f\" ] && d=${f%/.complete} && "
         "echo \"complete=${d##*/}\"; done\ntrue\n";
}

// Round trip 3: assemble the bundle from the objects in a temporary folder, check it, move it
// into place, prune old bundles. Prints "installed", or the failed files after "corrupt".
std::string AssembleScript(const Bundle& b, const std::string& id, const std::string& root) {
  std::string s = "set -e\nR=" + ShellQuote(root) + "\nB=\"$R/bundles/" + id + "\"\n" +
                  "if [ -f \"$B/.complete\" ]; then echo installed; exit 0; fi\n"
                  "t=$(mktemp -d \"$R/bundles/.tmp-XXXXXXXX\")\nmkdir -p \"$t/bin\" \"$t/lib\"\n";
  for (const auto& f : b.files) {
    s += "ln \"$R/objects/" + ObjectName(f) + "\" \"$t/" + f.path + "\"\n";
  }
  s += "cat > \"$t/manifest.json\" <<'SPARKCTL_MANIFEST_END'\n" + b.ManifestText() +
       "SPARKCTL_MANIFEST_END\n";
  s += "if ! (cd \"$t\" && sha256sum -c --quiet - <<'SPARKCTL_SUMS_END'\n";
  for (const auto& f : b.files) s += f.sha256 + "  " + f.path + "\n";
  s += "SPARKCTL_SUMS_END\n); then rm -rf \"$t\"; echo corrupt; exit 3; fi\n";
  s += "chmod 755 \"$t\"\ntouch \"$t/.complete\"\n"
       "mv -T \"$t\" \"$B\" 2>/dev/null || { [ -f \"$B/.complete\" ] && rm -rf \"$t\"; }\n";
  s += fmt::format(
      "cd \"$R/bundles\"\nn=0\nfor d in $(ls -1t); do\n"
      "  [ -f \"$d/.complete\" ] || continue; n=$((n + 1))\n"
      "  [ \"$n\" -le {0} ] || [ \"$d\" = {1} ] && continue\n"
      "  [ -n \"$(find \"$d/.complete\" -mmin +{2})\" ] && rm -rf \"$d\"\n"
      "done\n"
      "find \"$R/bundles\" -maxdepth 1 -name '.tmp-*' -mmin +60 -exec rm -rf {{}} + || true\n"
      "find \"$R/objects\" -type f -links 1 -mmin +{2} -delete || true\n"
      "echo installed\n",
      kKeepBundles, id, kPruneAfterMinutes);
  return s;
}

struct Survey {
  NodePlatform platform;
  std::set<std::string> complete;
};

Result<Survey> SurveyNode(ssh::Transport& transport, const std::string& node,
                          const std::string& root) {
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r,
                         ssh::RunChecked(transport, node, SurveyScript(root)));
  Survey survey;
  SPARK_ASSIGN_OR_RETURN(survey.platform, ParsePlatform(node, r.stdout_data));
  for (const std::string& line : Split(r.stdout_data, '\n', true)) {
    if (StartsWith(line, "complete=")) survey.complete.insert(line.substr(9));
  }
  return survey;
}

// Uploads the objects the node lacks; returns how many bytes went over.
Result<uint64_t> UploadObjects(ssh::Transport& transport, const std::string& node,
                               const Bundle& b, const std::string& root) {
  const std::string objects = root + "/objects";
  std::string check = "mkdir -p " + ShellQuote(objects) + " " + ShellQuote(root + "/bundles") +
                      " && cd " + ShellQuote(objects) + " && for o in";
  for (const auto& f : b.files) check += " " + ObjectName(f);
  check += "; do [ -f \"$o\" ] || echo \"$o\"; done";
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, ssh::RunChecked(transport, node, check));
  std::set<std::string> missing;
  for (const std::string& line : Split(r.stdout_data, '\n', true)) missing.insert(line);
  uint64_t bytes = 0;
  for (const auto& f : b.files) {
    const std::string name = ObjectName(f);
    if (!missing.erase(name)) continue;
    SPARK_RETURN_IF_ERROR(transport.Upload(node, f.source, objects + "/" + name, f.mode)
                              .WithContext(node + ": uploading " + f.path));
    bytes += f.size;
  }
  return bytes;
}

Status Assemble(ssh::Transport& transport, const std::string& node, const Bundle& b,
                const std::string& id, const std::string& root) {
  SPARK_ASSIGN_OR_RETURN(ssh::CommandResult r, transport.Run(node, AssembleScript(b, id, root)));
  if (r.ok() && r.stdout_data.find("installed") != std::string::npos) return Status::Ok();
  if (r.exit_code == 3) {
    // sha256sum -c --quiet names each file that differs ("bin/sparkctl: FAILED"); their objects
    // go, so the next attempt uploads them again.
    std::vector<std::string> bad;
    std::string rm = "rm -f";
    for (const std::string& line : Split(r.stdout_data, '\n', true)) {
      const std::string path = line.substr(0, line.find(':'));
      if (const BundleFile* f = b.Find(path)) {
        bad.push_back(path);
        rm += " " + ShellQuote(root + "/objects/" + ObjectName(*f));
      }
    }
    transport.Run(node, rm).status().IgnoreError();
    return DataLossError(node + ": after upload these bundle files differ from their SHA-256: " +
                         (bad.empty() ? std::string("(unknown)") : Join(bad, ", ")) +
                         " (removed; run the command again)");
  }
  return ssh::CommandFailedError(node, "install bundle " + id.substr(0, 12), r);
}

std::vector<std::string> LibraryDirsOf(const Bundle& b) {
  std::vector<std::string> dirs;
  for (const auto& f : b.files) {
    if (!StartsWith(f.path, "lib/")) continue;
    std::string d = fs::path(f.source).parent_path().string();
    if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
  }
  return dirs;
}

}  // namespace

Catalog::Catalog(CatalogOptions options) : options_(std::move(options)) {}

void Catalog::Discover() {
  if (discovered_) return;
  discovered_ = true;
  auto add_dir = [&](const std::string& dir) {
    Source s{.where = dir, .dir = dir};
    auto b = LoadBundle(dir, false);
    if (b.ok()) {
      s.machine = b->machine;
      s.bundle = std::make_shared<const Bundle>(std::move(*b));
    } else {
      s.status = b.status();
    }
    sources_.push_back(std::move(s));
  };
  for (const auto& dir : options_.bundle_dirs) {
    std::error_code dir_ec;
    if (Exists(dir + "/" + kManifestName) || !fs::is_directory(dir, dir_ec)) {
      add_dir(dir);
      continue;
    }
    std::vector<std::string> subdirs;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(dir, ec)) {
      if (Exists(e.path().string() + "/" + kManifestName)) subdirs.push_back(e.path().string());
    }
    std::sort(subdirs.begin(), subdirs.end());
    if (subdirs.empty()) add_dir(dir);  // reports "not a bundle"
    for (const auto& d : subdirs) add_dir(d);
  }
  if (options_.self_dir.empty()) return;
  const std::string parent = fs::path(options_.self_dir).parent_path().string();
  if (Exists(parent + "/" + kManifestName)) {
    add_dir(parent);
    sources_.back().where = "the bundle this sparkctl runs from (" + parent + ")";
    return;
  }
  const std::string self = options_.self_dir + "/sparkctl";
  auto elf = ReadElfFile(self);
  sources_.push_back(Source{.where = "this build (" + options_.self_dir + ")",
                            .machine = elf.ok() ? elf->machine : HostMachine()});
}

Result<std::shared_ptr<const Bundle>> Catalog::Load(Source& s) {
  if (s.bundle) return s.bundle;
  if (!s.status.ok()) return s.status;
  MakeOptions make{.version = options_.version, .resolve = options_.resolve};
  for (const char* p : kPrograms) {
    const std::string path = options_.self_dir + "/" + p;
    if (Exists(path)) make.programs[p] = path;
  }
  if (const std::string plugin = options_.self_dir + "/../lib/" + kTunerPlugin; Exists(plugin)) {
    make.plugins[kTunerPlugin] = plugin;
  }
  auto b = MakeBundle(make);
  if (!b.ok()) {
    s.status = b.status().WithContext("making the bundle of " + s.where);
    return s.status;
  }
  Logger("bundle")->debug("made {} from {}", b->Describe(), s.where);
  s.bundle = std::make_shared<const Bundle>(std::move(*b));
  return s.bundle;
}

std::string Catalog::NoBundleMessage(const std::string& machine) const {
  std::vector<std::string> have;
  for (const auto& s : sources_) {
    if (!s.machine.empty()) have.push_back(s.machine + " from " + s.where);
  }
  return "this sparkctl has no bundle for " + machine + " (it has: " +
         (have.empty() ? std::string("none") : Join(have, "; ")) +
         "). Make one where that machine's programs are built — for a DGX Spark, on a Spark: "
         "scripts/build-spark.sh && build/bin/sparkctl bundle make --out sparkctl-" + machine +
         " (or a CPU-only one here: scripts/build-aarch64.sh) — then name it here with "
         "SPARKCTL_BUNDLES=DIR, or run sparkctl on one of the nodes (docs/bundles.md)";
}

Result<std::shared_ptr<const Bundle>> Catalog::For(
    const std::string& machine, const std::map<std::string, std::string>& overrides) {
  std::lock_guard<std::mutex> lock(mu_);
  Discover();
  std::shared_ptr<const Bundle> base;
  Status first_error;
  for (auto& s : sources_) {
    if (s.machine != machine) continue;
    auto b = Load(s);
    if (b.ok()) {
      base = *b;
      break;
    }
    if (first_error.ok()) first_error = b.status();
  }
  if (!base) return first_error.ok() ? NotFoundError(NoBundleMessage(machine)) : first_error;
  if (base->version != options_.version) {
    return FailedPreconditionError("the " + machine + " bundle " + base->Id().substr(0, 12) +
                                   " was made from sparkctl " + base->version +
                                   ", this is sparkctl " + options_.version +
                                   ": make it again from this version (sparkctl bundle make)");
  }
  if (overrides.empty()) return base;
  std::string key = machine;
  MakeOptions make{.version = options_.version, .resolve = options_.resolve};
  for (const auto& f : base->files) {
    if (StartsWith(f.path, "bin/")) make.programs[f.path.substr(4)] = f.source;
    if (f.path == std::string("lib/") + kTunerPlugin) make.plugins[kTunerPlugin] = f.source;
  }
  for (const auto& [name, path] : overrides) {
    SPARK_ASSIGN_OR_RETURN(ElfFile elf, ReadElfFile(path));
    if (elf.machine != machine) {
      return InvalidArgumentError(path + " is an " + elf.machine + " program but the node is " +
                                  machine + ": give a " + name + " built for " + machine +
                                  ", or none to use the " + machine + " bundle's own");
    }
    make.programs[name] = path;
    key += "\n" + name + "=" + path;
  }
  if (auto it = with_overrides_.find(key); it != with_overrides_.end()) return it->second;
  std::vector<std::string> dirs = LibraryDirsOf(*base);
  dirs.insert(dirs.end(), make.resolve.extra_dirs.begin(), make.resolve.extra_dirs.end());
  make.resolve.extra_dirs = dirs;
  SPARK_ASSIGN_OR_RETURN(Bundle b, MakeBundle(make));
  auto shared = std::make_shared<const Bundle>(std::move(b));
  with_overrides_[key] = shared;
  return shared;
}

std::map<std::string, std::string> Catalog::Ids() {
  std::set<std::string> machines;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Discover();
    for (const auto& s : sources_) {
      if (!s.machine.empty()) machines.insert(s.machine);
    }
  }
  std::map<std::string, std::string> ids;
  for (const auto& m : machines) {
    auto b = For(m);
    if (b.ok()) ids[m] = (*b)->Id();
  }
  return ids;
}

std::vector<std::string> Catalog::Describe() {
  std::lock_guard<std::mutex> lock(mu_);
  Discover();
  std::vector<std::string> lines;
  for (auto& s : sources_) {
    auto b = Load(s);
    lines.push_back(b.ok() ? (*b)->Describe() + " from " + s.where
                           : s.where + ": " + b.status().message());
  }
  return lines;
}

namespace {
std::mutex g_catalog_mu;
std::unique_ptr<Catalog> g_catalog;
}  // namespace

void ConfigureDefaultCatalog(CatalogOptions options) {
  std::lock_guard<std::mutex> lock(g_catalog_mu);
  g_catalog = std::make_unique<Catalog>(std::move(options));
}

Catalog& DefaultCatalog() {
  std::lock_guard<std::mutex> lock(g_catalog_mu);
  if (!g_catalog) g_catalog = std::make_unique<Catalog>(CatalogOptions{});
  return *g_catalog;
}

std::string RemoteProgramPath(const std::string& id, const std::string& program,
                              const std::string& root) {
  return root + "/bundles/" + id + "/bin/" + program;
}

Result<ProgramOnNode> EnsureProgram(ssh::Transport& transport, Catalog& catalog,
                                    const std::string& node, const std::string& program,
                                    const EnsureOptions& options) {
  const std::string& root = options.remote_root;
  SPARK_ASSIGN_OR_RETURN(Survey survey, SurveyNode(transport, node, root));
  const NodePlatform& platform = survey.platform;
  auto bundle = catalog.For(platform.machine, options.overrides);
  if (!bundle.ok()) {
    const Status& s = bundle.status();
    return Status(s.code() == StatusCode::kNotFound ? StatusCode::kFailedPrecondition : s.code(),
                  node + " is " + platform.Describe() + ": " + s.message());
  }
  const Bundle& b = **bundle;
  SPARK_RETURN_IF_ERROR(CheckRunnable(b, platform, node));
  if (!b.HasProgram(program)) {
    return FailedPreconditionError(node + ": " + b.Describe() + " has no " + program +
                                   ": make the bundle from a build that has bin/" + program);
  }
  const std::string id = b.Id();
  ProgramOnNode out{.path = RemoteProgramPath(id, program, root), .bundle_id = id,
                    .platform = platform};
  if (b.Find(std::string("lib/") + kTunerPlugin) != nullptr) {
    out.tuner_plugin = root + "/bundles/" + id + "/lib/" + kTunerPlugin;
  }
  if (survey.complete.count(id)) return out;
  if (!options.install) {
    out.installed = false;
    return out;
  }
  SPARK_ASSIGN_OR_RETURN(uint64_t bytes, UploadObjects(transport, node, b, root));
  SPARK_RETURN_IF_ERROR(Assemble(transport, node, b, id, root));
  Logger("bundle")->info("{}: installed {} ({} uploaded)", node, b.Describe(), HumanBytes(bytes));
  out.uploaded = true;
  return out;
}

std::string RunInstalledCommand(const std::map<std::string, std::string>& ids,
                                const std::string& program, const std::string& args,
                                const std::string& marker, int missing_exit,
                                const std::string& root) {
  std::string s = "b=\ncase \"$(uname -m)\" in\n";
  for (const auto& [machine, id] : ids) {
    s += "  " + MachineCase(machine) + ") b=" + ShellQuote(root + "/bundles/" + id) + " ;;\n";
  }
  s += "esac\nif [ -n \"$b\" ] && [ -f \"$b/.complete\" ]; then exec \"$b/bin/" + program + "\" " +
       args + "; fi\necho " + marker + " >&2; exit " + std::to_string(missing_exit);
  return s;
}

}  // namespace spark::bundle
