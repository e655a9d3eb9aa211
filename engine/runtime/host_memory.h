// HostMemory: how much memory this machine can still give the engine, read where the kernel
// says it: /proc/meminfo's MemAvailable, bounded by the memory limit of the cgroup the process
// runs in (v2 memory.max / memory.current, v1 memory.limit_in_bytes / memory.usage_in_bytes, the
// reclaimable inactive file pages counted as free, the tightest of the process's cgroup and its
// ancestors). On a DGX Spark the GPU allocates from the same unified memory, so this is what is
// left for weights, KV cache and activations on either backend.
// The start-up guard, the KV budget from a fraction and the steady-state guard read it through
// this interface; tests substitute a fake (or ProcHostMemory over files of their own).
// Thread-safety: Read() may be called from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::engine::runtime {

struct HostMemorySample {
  int64_t available_bytes = 0;  // what the engine may still use (the smaller of the two views)
  int64_t total_bytes = 0;      // MemTotal, or the cgroup limit when smaller
  int64_t meminfo_available_bytes = 0;
  std::optional<int64_t> cgroup_limit_bytes;  // the binding limit, when there is one
  std::optional<int64_t> cgroup_used_bytes;   // its usage, reclaimable file pages excluded

  // "117.2 GiB available (MemAvailable)" or "3.1 GiB available (cgroup limit 8 GiB, 4.9 GiB
  // used; MemAvailable 117.2 GiB)".
  std::string Describe() const;
};

class HostMemory {
 public:
  virtual ~HostMemory() = default;
  // NotFound / InvalidArgument when /proc/meminfo cannot be read or has no MemAvailable line.
  virtual Result<HostMemorySample> Read() = 0;
};

class ProcHostMemory : public HostMemory {
 public:
  struct Paths {
    std::string meminfo = "/proc/meminfo";
    std::string self_cgroup = "/proc/self/cgroup";
    std::string cgroup_root = "/sys/fs/cgroup";
  };
  ProcHostMemory() = default;
  explicit ProcHostMemory(Paths paths) : paths_(std::move(paths)) {}
  Result<HostMemorySample> Read() override;

 private:
  Paths paths_;
};

// This process's resident memory now and at its peak (VmRSS, VmHWM of /proc/self/status), in
// bytes. NotFound / InvalidArgument as for meminfo.
struct ProcessMemory {
  int64_t resident_bytes = 0;
  int64_t peak_resident_bytes = 0;
};
Result<ProcessMemory> ReadProcessMemory(const std::string& status_path = "/proc/self/status");

// MemTotal and MemAvailable of a meminfo text, in bytes. InvalidArgument naming `source` when
// either line is missing.
struct Meminfo {
  int64_t total_bytes = 0;
  int64_t available_bytes = 0;
};
Result<Meminfo> ParseMeminfo(std::string_view text, const std::string& source);

}  // namespace spark::engine::runtime
