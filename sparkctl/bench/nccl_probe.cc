// Which NCCL the engine loads (see nccl_probe.h).
#include "sparkctl/bench/nccl_probe.h"

#include <dlfcn.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <sstream>

#include "base/process.h"

namespace spark::bench {
namespace {

// "libnccl.so.2 => /usr/lib/.../libnccl.so.2 (0x...)" from the loader's trace of `engine`;
// "" when the engine does not load NCCL. NotFound when it cannot be asked.
Result<std::string> EngineNccl(const std::string& engine) {
  ProcessRunner runner;
  SPARK_ASSIGN_OR_RETURN(
      CommandResult r,
      runner.Run({"/bin/sh", "-c", "LD_TRACE_LOADED_OBJECTS=1 exec \"$0\" </dev/null", engine}));
  if (r.exit_code != 0) {
    return NotFoundError(engine + " could not be inspected (exit " + std::to_string(r.exit_code) +
                         "): " + r.err.substr(0, 200));
  }
  std::istringstream in(r.out);
  for (std::string line; std::getline(in, line);) {
    const size_t name = line.find("libnccl.so");
    const size_t arrow = line.find("=> ");
    if (name == std::string::npos || arrow == std::string::npos) continue;
    std::string path = line.substr(arrow + 3);
    path = path.substr(0, path.find(' '));
    if (path == "not") return NotFoundError(engine + " needs libnccl.so.2, which is not found");
    return path;
  }
  return std::string();
}

}  // namespace

std::string NcclProbe::VersionText() const {
  if (version <= 0) return "unknown";
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

NcclProbe ProbeNccl(const std::string& engine, const std::string& library) {
  NcclProbe p;
  utsname u{};
  if (uname(&u) == 0) p.arch = u.machine;
  p.engine = engine;
  std::string path = library;
  if (path.empty() && !engine.empty()) {
    p.engine_found = access(engine.c_str(), X_OK) == 0;
    if (p.engine_found) {
      Result<std::string> linked = EngineNccl(engine);
      if (!linked.ok()) {
        p.note = linked.status().message();
        return p;
      }
      p.engine_links_nccl = !linked->empty();
      if (!p.engine_links_nccl) {
        p.note = engine + " does not load NCCL (a CPU build)";
        return p;
      }
      path = *linked;
    } else {
      p.note = engine + " is not installed yet: asked the loader for libnccl.so.2";
    }
  }
  const std::string open = path.empty() ? "libnccl.so.2" : path;
  void* lib = dlopen(open.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    p.note += (p.note.empty() ? "" : "; ") + std::string("no NCCL: ") + dlerror();
    return p;
  }
  using GetVersion = int (*)(int*);
  auto get = reinterpret_cast<GetVersion>(dlsym(lib, "ncclGetVersion"));
  Dl_info info{};
  if (get != nullptr && dladdr(reinterpret_cast<void*>(get), &info) != 0 && info.dli_fname) {
    p.library = info.dli_fname;
  } else {
    p.library = open;
  }
  int v = 0;
  if (get == nullptr || get(&v) != 0) {
    p.note += (p.note.empty() ? "" : "; ") + p.library + " has no working ncclGetVersion";
  } else {
    p.version = v;
  }
  dlclose(lib);
  return p;
}

nlohmann::json ToJson(const NcclProbe& p) {
  return {{"arch", p.arch},       {"engine", p.engine},   {"engine_found", p.engine_found},
          {"engine_links_nccl", p.engine_links_nccl},  {"library", p.library},
          {"version", p.version}, {"note", p.note}};
}

Result<NcclProbe> NcclProbeFromJson(const nlohmann::json& j) {
  NcclProbe p;
  for (const char* key : {"arch", "engine", "engine_found", "engine_links_nccl", "library",
                          "version", "note"}) {
    if (!j.contains(key)) return InvalidArgumentError(std::string("nccl-info: no \"") + key + "\"");
  }
  try {
    p.arch = j["arch"];
    p.engine = j["engine"];
    p.engine_found = j["engine_found"];
    p.engine_links_nccl = j["engine_links_nccl"];
    p.library = j["library"];
    p.version = j["version"];
    p.note = j["note"];
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgumentError(std::string("nccl-info: ") + e.what());
  }
  return p;
}

}  // namespace spark::bench
