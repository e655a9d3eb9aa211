#include "engine/runtime/host_memory.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <vector>

#include "base/strings.h"

namespace spark::engine::runtime {
namespace {

// Limits at or above this are "no limit" (cgroup v1 writes 2^63 rounded down to a page).
constexpr int64_t kNoLimit = int64_t{1} << 60;

std::optional<std::string> ReadText(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::optional<int64_t> ReadNumber(const std::string& path) {
  std::optional<std::string> text = ReadText(path);
  if (!text) return std::nullopt;
  std::string_view t = Trim(*text);
  if (t == "max") return kNoLimit;
  char* end = nullptr;
  const long long v = std::strtoll(std::string(t).c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

// The value of `key` in a memory.stat file (0 when absent).
int64_t StatValue(const std::string& path, std::string_view key) {
  std::optional<std::string> text = ReadText(path);
  if (!text) return 0;
  std::istringstream in(*text);
  std::string name;
  long long value = 0;
  while (in >> name >> value) {
    if (name == key) return value;
  }
  return 0;
}

struct CgroupView {
  int64_t limit = kNoLimit;
  int64_t used = 0;
};

// The tightest limit of `dir` and its ancestors up to `root`: v2 files when `v2`, else v1.
std::optional<CgroupView> Tightest(std::filesystem::path dir, const std::filesystem::path& root,
                                   bool v2) {
  const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
  const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
  const char* inactive = v2 ? "inactive_file" : "total_inactive_file";
  std::optional<CgroupView> best;
  while (true) {
    std::optional<int64_t> limit = ReadNumber((dir / limit_file).string());
    std::optional<int64_t> usage = ReadNumber((dir / usage_file).string());
    if (limit && usage && *limit < kNoLimit) {
      const int64_t used =
          std::max<int64_t>(0, *usage - StatValue((dir / "memory.stat").string(), inactive));
      if (!best || *limit - used < best->limit - best->used) best = CgroupView{*limit, used};
    }
    if (dir == root || !dir.has_parent_path() || dir.parent_path() == dir) break;
    if (dir.string().size() <= root.string().size()) break;
    dir = dir.parent_path();
  }
  return best;
}

// The memory cgroup of this process from /proc/self/cgroup, as (path, v2).
std::optional<std::pair<std::string, bool>> OwnCgroup(const std::string& self_cgroup) {
  std::optional<std::string> text = ReadText(self_cgroup);
  if (!text) return std::nullopt;
  std::optional<std::pair<std::string, bool>> v2;
  for (const std::string& line : Split(*text, '\n', true)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    for (const std::string& c : Split(controllers, ',', true)) {
      if (c == "memory") return std::pair{path, false};
    }
    if (line.starts_with("0::")) v2 = std::pair{path, true};
  }
  return v2;
}

std::optional<CgroupView> CgroupOf(const ProcHostMemory::Paths& p) {
  std::optional<std::pair<std::string, bool>> own = OwnCgroup(p.self_cgroup);
  if (!own) return std::nullopt;
  const std::filesystem::path root = own->second ? std::filesystem::path(p.cgroup_root)
                                                 : std::filesystem::path(p.cgroup_root) / "memory";
  std::filesystem::path dir = root / std::filesystem::path(own->first).relative_path();
  std::error_code ec;
  // In a container the path names the host's hierarchy; the container sees its own at the root.
  if (!std::filesystem::is_directory(dir, ec)) dir = root;
  return Tightest(dir, root, own->second);
}

std::string Gib(int64_t bytes) {
  return HumanBytes(static_cast<uint64_t>(std::max<int64_t>(0, bytes)));
}

}  // namespace

std::string HostMemorySample::Describe() const {
  if (!cgroup_limit_bytes) return Gib(available_bytes) + " available (MemAvailable)";
  return Gib(available_bytes) + " available (cgroup limit " + Gib(*cgroup_limit_bytes) + ", " +
         Gib(cgroup_used_bytes.value_or(0)) + " used; MemAvailable " +
         Gib(meminfo_available_bytes) + ")";
}

Result<Meminfo> ParseMeminfo(std::string_view text, const std::string& source) {
  Meminfo m;
  bool total = false, available = false;
  for (const std::string& line : Split(text, '\n', true)) {
    std::istringstream fields(line);
    std::string key, unit;
    long long kib = -1;
    fields >> key >> kib >> unit;
    if (kib < 0 || unit != "kB") continue;
    if (key == "MemTotal:") m.total_bytes = kib * 1024, total = true;
    if (key == "MemAvailable:") m.available_bytes = kib * 1024, available = true;
  }
  if (!total || !available) {
    return InvalidArgumentError(source + ": no 'MemTotal: N kB' and 'MemAvailable: N kB' lines");
  }
  return m;
}

Result<ProcessMemory> ReadProcessMemory(const std::string& status_path) {
  std::optional<std::string> text = ReadText(status_path);
  if (!text) return NotFoundError("cannot read " + status_path);
  ProcessMemory m;
  bool rss = false, hwm = false;
  for (const std::string& line : Split(*text, '\n', true)) {
    std::istringstream fields(line);
    std::string key, unit;
    long long kib = -1;
    fields >> key >> kib >> unit;
    if (kib < 0 || unit != "kB") continue;
    if (key == "VmRSS:") m.resident_bytes = kib * 1024, rss = true;
    if (key == "VmHWM:") m.peak_resident_bytes = kib * 1024, hwm = true;
  }
  if (!rss || !hwm) return InvalidArgumentError(status_path + ": no VmRSS and VmHWM lines");
  return m;
}

Result<HostMemorySample> ProcHostMemory::Read() {
  std::optional<std::string> text = ReadText(paths_.meminfo);
  if (!text) return NotFoundError("cannot read " + paths_.meminfo);
  SPARK_ASSIGN_OR_RETURN(Meminfo m, ParseMeminfo(*text, paths_.meminfo));
  HostMemorySample s;
  s.meminfo_available_bytes = s.available_bytes = m.available_bytes;
  s.total_bytes = m.total_bytes;
  if (std::optional<CgroupView> cg = CgroupOf(paths_)) {
    const int64_t free = std::max<int64_t>(0, cg->limit - cg->used);
    if (free < s.available_bytes || cg->limit < s.total_bytes) {
      s.cgroup_limit_bytes = cg->limit;
      s.cgroup_used_bytes = cg->used;
      s.available_bytes = std::min(s.available_bytes, free);
      s.total_bytes = std::min(s.total_bytes, cg->limit);
    }
  }
  return s;
}

}  // namespace spark::engine::runtime
