// Deploying bundles to nodes: every program sparkctl runs on a node (sparkctl itself for the
// node-side commands, spark-engine, spark-bench) comes from the bundle made for that node's
// machine, installed by content.
//
// The catalog knows which bundles this controller has: the one made from the running build
// (its own programs and the libraries they use here, for this machine; or, when sparkctl runs
// from a bundle, that bundle) and the bundle folders named in SPARKCTL_BUNDLES (cli/app.cc), for
// other machines (an aarch64 bundle made on a Spark, for an x86-64 controller).
//
// On a node, under /usr/local/lib/sparkctl:
//   objects/<sha256>         every file ever installed, by content (so a new build uploads only
//                            the files that changed, usually the programs)
//   bundles/<id>/            one complete bundle: bin/ (copies), lib/ (hard links to objects),
//                            manifest.json, and .complete once every file was checked by SHA-256
// Installing: (1) one round trip reads the node's platform and its complete bundles; the bundle
// for its machine is chosen and checked (platform.h: nothing is copied to a node that cannot run
// it); (2) when not complete there, the missing objects are uploaded and (3) the bundle is
// assembled in a temporary folder, checked, and renamed into place, so concurrent installs of
// one bundle are safe. Bundles beyond the four newest, older than a day, are removed.
// Thread-safety: Catalog is safe to use from many threads (EnsureProgram runs per node).
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/status.h"
#include "sparkctl/bundle/bundle.h"
#include "sparkctl/bundle/platform.h"
#include "sparkctl/ssh/transport.h"

namespace spark::bundle {

inline constexpr char kRemoteRoot[] = "/usr/local/lib/sparkctl";

struct CatalogOptions {
  std::string self_dir;                  // folder of the running sparkctl ("" = none)
  std::vector<std::string> bundle_dirs;  // bundles, or folders holding bundles
  std::string version;                   // this sparkctl's version; bundles must match it
  ResolveOptions resolve;                // for bundles made here
};

class Catalog {
 public:
  explicit Catalog(CatalogOptions options);

  // The bundle for `machine`, with `overrides` (program name -> local file of that machine) in
  // place of the bundle's own programs. NotFound when there is none for the machine (the
  // message lists what there is and how to make one); FailedPrecondition for a bundle of
  // another sparkctl version; InvalidArgument for an override of another machine.
  Result<std::shared_ptr<const Bundle>> For(
      const std::string& machine, const std::map<std::string, std::string>& overrides = {});

  // Machine -> id of the plain bundle, for every machine the catalog has (hashes the bundle
  // made from this build the first time). Bundles that fail to load are left out.
  std::map<std::string, std::string> Ids();

  // One line per bundle: "x86_64: <description> from <where>", or why it could not be loaded.
  std::vector<std::string> Describe();

 private:
  struct Source {
    std::string where;  // "this build (dir)" or the bundle folder
    std::string dir;    // bundle folder, "" for the bundle made from this build
    std::string machine;
    std::shared_ptr<const Bundle> bundle;  // loaded on first use
    Status status;                         // why loading failed
  };
  void Discover();
  Result<std::shared_ptr<const Bundle>> Load(Source& source);
  std::string NoBundleMessage(const std::string& machine) const;

  CatalogOptions options_;
  std::mutex mu_;
  bool discovered_ = false;
  std::vector<Source> sources_;
  std::map<std::string, std::shared_ptr<const Bundle>> with_overrides_;
};

// The process-wide catalog, configured once by the CLI before any command runs.
void ConfigureDefaultCatalog(CatalogOptions options);
Catalog& DefaultCatalog();

struct ProgramOnNode {
  std::string path;       // remote path of the program
  std::string bundle_id;  // full id of the bundle it is in
  std::string tuner_plugin;  // remote path of the bundle's kTunerPlugin; "" when it has none
  bool installed = true;  // false only with install=false when the node lacks the bundle
  bool uploaded = false;  // this call installed the bundle
  NodePlatform platform;
};

struct EnsureOptions {
  std::map<std::string, std::string> overrides;  // program -> local file (Catalog::For)
  bool install = true;  // false: find out what would be installed, change nothing
  std::string remote_root = kRemoteRoot;  // where bundles live on the node (tests change it)
};

// Makes sure `node` has the bundle for its machine holding `program` and returns the program's
// path there. FailedPrecondition (with the fix) when the node cannot run it or the bundle has
// no such program; the errors of Catalog::For; DataLoss when a file differs after upload;
// connection errors name the node.
Result<ProgramOnNode> EnsureProgram(ssh::Transport& transport, Catalog& catalog,
                                    const std::string& node, const std::string& program,
                                    const EnsureOptions& options = {});

// A shell command that runs `program ARGS` from the node's installed plain bundle when the
// node has it, and otherwise prints `marker` to stderr and exits `missing_exit` (one round trip
// when installed). The bundle ids come from Catalog::Ids.
std::string RunInstalledCommand(const std::map<std::string, std::string>& ids,
                                const std::string& program, const std::string& args,
                                const std::string& marker, int missing_exit,
                                const std::string& root = kRemoteRoot);

// The remote path of `program` in bundle `id`.
std::string RemoteProgramPath(const std::string& id, const std::string& program,
                              const std::string& root = kRemoteRoot);

}  // namespace spark::bundle
