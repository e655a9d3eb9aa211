// Bundles: sparkctl's programs for one machine plus the shared libraries they need that a node
// does not provide (library_resolver.h), so that a node runs them with nothing of its own /usr
// beyond glibc, libstdc++, the NVIDIA driver and rdma-core. docs/bundles.md.
//
// Layout of a bundle folder (what `sparkctl bundle make` writes and `up` installs):
//   bin/<program>       sparkctl, spark-engine, spark-bench (those present); each finds its
//                       libraries through its DT_RPATH $ORIGIN/../lib (cmake/SparkHelpers.cmake)
//   lib/<soname>        the bundled libraries, named as the programs ask for them
//   manifest.json       schema sparkctl-bundle/v1: machine, version, what the node must provide
//                       (newest glibc / libstdc++ symbol versions, node libraries) and every
//                       file's path, size, mode and SHA-256
// A bundle's id is the SHA-256 of its manifest text, so any changed byte gives another id; nodes
// keep installed bundles by id (deploy.h).
// Thread-safety: values and functions only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/bundle/library_resolver.h"

namespace spark::bundle {

inline constexpr char kBundleSchema[] = "sparkctl-bundle/v1";
inline constexpr char kManifestName[] = "manifest.json";
// The DT_RPATH entry every bundled program carries (cmake/SparkHelpers.cmake).
inline constexpr char kBundleRpath[] = "$ORIGIN/../lib";
// The programs a bundle may hold, in the order `bundle make` looks for them.
inline constexpr const char* kPrograms[] = {"sparkctl", "spark-engine", "spark-bench"};
// NCCL's tuner plugin for Spark fabrics (nccl-patches/): no program links it, NCCL dlopen()s it
// when NCCL_TUNER_PLUGIN names it. A build has it next to its programs' ../lib.
inline constexpr char kTunerPlugin[] = "libnccl-tuner-spark.so";

struct BundleFile {
  std::string path;    // "bin/sparkctl", "lib/libssh.so.4"
  std::string sha256;  // lower-case hex
  uint64_t size = 0;
  int mode = 0644;     // 0755 for programs
  std::string source;  // local file it comes from (not part of the manifest)
};

struct Requirements {
  std::string glibc;          // newest GLIBC_ version asked for, "" when none
  std::string glibc_from;     // bundle path of the file that asks for it
  std::string glibcxx;        // newest GLIBCXX_ version
  std::string glibcxx_from;
  std::map<std::string, std::string> node_libraries;  // soname -> provider
};

struct Bundle {
  std::string schema = kBundleSchema;
  std::string machine;  // "aarch64", "x86_64"
  std::string version;  // sparkctl version the programs were built from
  bool cuda = false;    // spark-engine was built with the CUDA backend
  Requirements needs;  // what the node must provide
  std::vector<BundleFile> files;  // sorted by path

  // The manifest text (stable key order); Id() hashes it.
  std::string ManifestText() const;
  std::string Id() const;
  const BundleFile* Find(const std::string& path) const;
  bool HasProgram(const std::string& name) const { return Find("bin/" + name) != nullptr; }
  // "aarch64 bundle 1a2b3c4d5e6f (sparkctl 0.1.0, 3 programs, 17 libraries, 48.2 MiB)".
  std::string Describe() const;
};

struct MakeOptions {
  // Program name -> local file (e.g. {"sparkctl", "build/bin/sparkctl"}); at least one.
  std::map<std::string, std::string> programs;
  // Library file name -> local file: libraries no program links that the bundle carries in lib/
  // (kTunerPlugin); their own dependencies are resolved like the programs'.
  std::map<std::string, std::string> plugins;
  std::string version;  // recorded as the bundle's version
  ResolveOptions resolve;
};

// Resolves the programs' libraries and hashes every file. Errors of ResolveLibraries and of
// reading the files; InvalidArgument for an unknown program name; FailedPrecondition for a
// program without the DT_RPATH kBundleRpath.
Result<Bundle> MakeBundle(const MakeOptions& options);

// Copies the files into `dir` (which must not exist, or be empty) and writes manifest.json.
// FailedPrecondition when dir holds something; errno errors naming the file.
Status WriteBundle(const Bundle& bundle, const std::string& dir);

// Reads dir/manifest.json (sources become dir/<path>). With `verify`, hashes every file and
// returns DataLoss naming the first that differs. NotFound when there is no manifest;
// InvalidArgument naming the key for a malformed one.
Result<Bundle> LoadBundle(const std::string& dir, bool verify);

Result<Bundle> BundleFromJson(const nlohmann::json& json);
nlohmann::ordered_json BundleToJson(const Bundle& bundle);

}  // namespace spark::bundle
