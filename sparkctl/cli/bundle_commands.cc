// `sparkctl bundle make|show|list`: the self-contained program bundles that nodes run
// (sparkctl/bundle/, docs/bundles.md).
#include <cstdio>
#include <filesystem>
#include <memory>

#include <nlohmann/json.hpp>

#include "base/strings.h"
#include "base/version.h"
#include "sparkctl/bundle/deploy.h"
#include "sparkctl/cli/families.h"

namespace spark::cli {
namespace {

using nlohmann::ordered_json;

struct MakeFlags {
  std::string out;
  std::string from;  // folder with the programs; default: this sparkctl's
  std::vector<std::string> lib_dirs;
  bool json = false;
};

struct ShowFlags {
  std::string dir;
  bool verify = false;
  bool json = false;
};

std::string NeedsText(const bundle::Bundle& b) {
  std::string out;
  if (!b.needs.glibc.empty()) out += "  glibc >= " + b.needs.glibc + " (" + b.needs.glibc_from + ")\n";
  if (!b.needs.glibcxx.empty()) {
    out += "  libstdc++ GLIBCXX >= " + b.needs.glibcxx + " (" + b.needs.glibcxx_from + ")\n";
  }
  for (const auto& [soname, provider] : b.needs.node_libraries) {
    out += "  " + soname + " from " + provider + "\n";
  }
  return out;
}

std::string FilesText(const bundle::Bundle& b) {
  std::string out;
  for (const auto& f : b.files) {
    out += "  " + f.sha256.substr(0, 12) + "  " + HumanBytes(f.size) + "\t" + f.path + "\n";
  }
  return out;
}

int RunMake(const MakeFlags& f) {
  const std::string schema = f.json ? "sparkctl-bundle-make/v1" : "";
  const std::string from = f.from.empty() ? SelfDir() : f.from;
  bundle::MakeOptions make{.version = kVersion};
  make.resolve.extra_dirs = f.lib_dirs;
  for (const char* p : bundle::kPrograms) {
    const std::string path = from + "/" + p;
    if (std::filesystem::exists(path)) make.programs[p] = path;
  }
  if (const std::string plugin = from + "/../lib/" + bundle::kTunerPlugin;
      std::filesystem::exists(plugin)) {
    make.plugins[bundle::kTunerPlugin] = plugin;
  }
  if (make.programs.empty()) {
    return ReportError(NotFoundError(from + " holds none of sparkctl, spark-engine, spark-bench: "
                                     "build them first, or pass --from BUILD/bin"),
                       schema);
  }
  auto b = bundle::MakeBundle(make);
  if (!b.ok()) return ReportError(b.status(), schema);
  if (Status s = bundle::WriteBundle(*b, f.out); !s.ok()) return ReportError(s, schema);
  if (f.json) {
    ordered_json j = {{"schema", "sparkctl-bundle-make/v1"}, {"ok", true}, {"dir", f.out},
                      {"id", b->Id()}, {"manifest", bundle::BundleToJson(*b)}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s\nin %s\nthe node must provide:\n%s", b->Describe().c_str(), f.out.c_str(),
              NeedsText(*b).c_str());
  return kExitOk;
}

int RunShow(const ShowFlags& f) {
  const std::string schema = f.json ? "sparkctl-bundle-show/v1" : "";
  auto b = bundle::LoadBundle(f.dir, f.verify);
  if (!b.ok()) return ReportError(b.status(), schema);
  if (f.json) {
    ordered_json j = {{"schema", "sparkctl-bundle-show/v1"}, {"ok", true}, {"dir", f.dir},
                      {"id", b->Id()}, {"verified", f.verify},
                      {"manifest", bundle::BundleToJson(*b)}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  std::printf("%s%s\nthe node must provide:\n%sfiles:\n%s", b->Describe().c_str(),
              f.verify ? ", every file checked" : "", NeedsText(*b).c_str(),
              FilesText(*b).c_str());
  return kExitOk;
}

int RunList(bool json) {
  std::vector<std::string> lines = bundle::DefaultCatalog().Describe();
  if (json) {
    ordered_json j = {{"schema", "sparkctl-bundle-list/v1"}, {"ok", true}, {"bundles", lines}};
    std::printf("%s\n", j.dump(2).c_str());
    return kExitOk;
  }
  for (const auto& l : lines) std::printf("%s\n", l.c_str());
  if (lines.empty()) std::printf("no bundles\n");
  return kExitOk;
}

}  // namespace

void RegisterBundleCommands(CLI::App& parent, CommandContext& context) {
  CLI::App* group = parent.add_subcommand(
      "bundle", "Self-contained program bundles: what nodes run, one per machine (aarch64, x86_64)");
  group->require_subcommand(1);

  auto make = std::make_shared<MakeFlags>();
  CLI::App* m = group->add_subcommand(
      "make", "Bundle sparkctl, spark-engine and spark-bench with the libraries a node lacks");
  m->add_option("--out", make->out, "New folder for the bundle")->required();
  m->add_option("--from", make->from,
                "Folder holding the programs (default: this sparkctl's; a cross build's bin/ "
                "makes a bundle for its machine)");
  m->add_option("--lib-dir", make->lib_dirs,
                "Also look for libraries here (after the programs' RPATH, before the system's)");
  AddJsonFlag(m, &make->json, "schema sparkctl-bundle-make/v1");
  SetExample(m, "sparkctl bundle make --out sparkctl-aarch64   # on a DGX Spark, after "
                "scripts/build-spark.sh\nThen on an x86-64 controller: "
                "SPARKCTL_BUNDLES=sparkctl-aarch64 sparkctl discover");
  m->callback([make, &context] { context.exit_code = RunMake(*make); });

  auto show = std::make_shared<ShowFlags>();
  CLI::App* s = group->add_subcommand("show", "What a bundle holds and what a node must provide");
  s->add_option("DIR", show->dir, "The bundle's folder")->required();
  s->add_flag("--verify", show->verify, "Check every file's SHA-256 against the manifest");
  AddJsonFlag(s, &show->json, "schema sparkctl-bundle-show/v1");
  SetExample(s, "sparkctl bundle show sparkctl-aarch64 --verify");
  s->callback([show, &context] { context.exit_code = RunShow(*show); });

  auto json = std::make_shared<bool>(false);
  CLI::App* l = group->add_subcommand(
      "list", "The bundles this sparkctl deploys: its own build's and those in SPARKCTL_BUNDLES");
  AddJsonFlag(l, json.get(), "schema sparkctl-bundle-list/v1");
  SetExample(l, "SPARKCTL_BUNDLES=/opt/sparkctl-aarch64 sparkctl bundle list");
  l->callback([json, &context] { context.exit_code = RunList(*json); });
}

}  // namespace spark::cli
