// NodePlatform: what decides which programs can run on a node — its machine (uname -m), its OS
// (/etc/os-release), its C and C++ runtime versions (getconf GNU_LIBC_VERSION, the newest
// GLIBCXX_ version in its libstdc++.so.6) and which of the libraries a bundle leaves to the node
// it has (rdma-core's, the NVIDIA driver's).
//
// Read by a small POSIX shell script over SSH before anything is copied to the node (no sparkctl
// runs there yet), and by `sparkctl node facts/probe` on the node (facts_gather.cc), which run
// the same commands. CheckRunnable says whether a bundle's programs can run there and, when not,
// what to do.
// Thread-safety: values and functions only.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "sparkctl/bundle/bundle.h"

namespace spark::bundle {

struct NodePlatform {
  std::string machine;     // uname -m, normalised: "aarch64", "x86_64"
  std::string os_id;       // ID from /etc/os-release: "ubuntu", "debian"
  std::string os_version;  // VERSION_ID: "24.04", "12"
  std::string os_name;     // PRETTY_NAME: "Ubuntu 24.04.3 LTS"
  std::string glibc;       // "2.39", "" when unknown (no getconf, not glibc)
  std::string glibcxx;     // newest GLIBCXX_ version of libstdc++.so.6, "" when it has none
  std::vector<std::string> libraries;  // of kProbedLibraries, the ones the node has

  // "aarch64, Ubuntu 24.04.3 LTS, glibc 2.39".
  std::string Describe() const;
  bool HasLibrary(const std::string& soname) const;
};

// The node libraries the probe looks for (those a bundle may leave to the node beyond glibc).
inline constexpr const char* kProbedLibraries[] = {"libstdc++.so.6", "libibverbs.so.1",
                                                   "librdmacm.so.1", "libcuda.so.1",
                                                   "libnvidia-ml.so.1"};

// The POSIX shell script that prints the platform as key=value lines (ParsePlatform reads it).
std::string PlatformProbeScript();

// Parses the script's output. InvalidArgument naming the node when there is no machine line.
Result<NodePlatform> ParsePlatform(const std::string& node, const std::string& text);

// OK when `bundle`'s programs can run on `platform`. FailedPrecondition naming the node, what is
// missing or too old, which bundle file needs it, and the fix.
Status CheckRunnable(const Bundle& bundle, const NodePlatform& platform, const std::string& node);

nlohmann::ordered_json PlatformToJson(const NodePlatform& platform);
// InvalidArgument naming the missing or mistyped key.
Result<NodePlatform> PlatformFromJson(const nlohmann::json& json);

}  // namespace spark::bundle
