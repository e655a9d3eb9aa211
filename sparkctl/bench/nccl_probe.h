// Which NCCL a node's engine loads, and its version (`spark-bench nccl-info`, run on every node
// by `sparkctl selftest` for its NCCL.VERSION check). With --engine, the engine binary is asked
// the way ldd asks (LD_TRACE_LOADED_OBJECTS: the dynamic loader prints what it would load, with
// the binary's own RUNPATH, and runs nothing), so the answer is the library that binary loads;
// otherwise (or when the engine is not installed yet) "libnccl.so.2" as the node's loader finds
// it. The library is then dlopen()ed and its ncclGetVersion called.
// Thread-safety: functions.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "base/status.h"

namespace spark::bench {

struct NcclProbe {
  std::string arch;          // uname -m: "aarch64", "x86_64"
  std::string engine;        // the engine binary asked ("" when none was)
  bool engine_found = false;
  bool engine_links_nccl = false;
  std::string library;       // the libnccl path that was opened ("" when none)
  int version = 0;           // ncclGetVersion: major * 10000 + minor * 100 + patch; 0 unknown
  std::string note;          // why something is unknown, in words

  // "2.28.9" (or "unknown").
  std::string VersionText() const;
};

// `engine` may be empty; `library` (when not empty) is opened instead of the engine's.
NcclProbe ProbeNccl(const std::string& engine, const std::string& library);

nlohmann::json ToJson(const NcclProbe& probe);
// InvalidArgument naming a missing field.
Result<NcclProbe> NcclProbeFromJson(const nlohmann::json& json);

}  // namespace spark::bench
