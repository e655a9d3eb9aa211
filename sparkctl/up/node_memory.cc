#include "sparkctl/up/node_memory.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "base/strings.h"
#include "sparkctl/ssh/parallel.h"

namespace spark::up {

Result<std::vector<profile::NodeMemory>> ReadNodeMemory(ssh::Transport& transport,
                                                        const std::vector<std::string>& nodes) {
  std::vector<ssh::NodeRun> runs =
      ssh::RunAll(transport, nodes, "grep '^MemAvailable:' /proc/meminfo");
  std::vector<profile::NodeMemory> out;
  std::string failed;
  for (const ssh::NodeRun& r : runs) {
    if (!r.result.ok()) {
      failed += "\n  " + r.node + ": " + r.result.status().message();
      continue;
    }
    const std::vector<std::string> words = Split(Trim(r.result->stdout_data), ' ', true);
    const std::optional<int64_t> kib = words.size() >= 2 ? ParseInt(words[1]) : std::nullopt;
    if (!r.result->ok() || !kib) {
      failed += "\n  " + r.node + ": no 'MemAvailable: N kB' line in /proc/meminfo";
      continue;
    }
    out.push_back({r.node, *kib * 1024});
  }
  if (!failed.empty()) return UnavailableError("cannot read the nodes' memory:" + failed);
  return out;
}

Result<std::string> PlanCheckpoint(const profile::Profile& p, const std::string& override_dir,
                                   ssh::Transport* transport, const std::string& node,
                                   const std::string& scratch_dir) {
  std::error_code ec;
  if (!override_dir.empty()) {
    if (override_dir.ends_with(".json") && std::filesystem::is_regular_file(override_dir, ec)) {
      return override_dir;  // a config.json alone
    }
    if (!std::filesystem::is_regular_file(override_dir + "/config.json", ec)) {
      return NotFoundError(override_dir +
                           "/config.json: not found (--model-dir must name a copy "
                           "of the checkpoint, or at least its config.json)");
    }
    return override_dir;
  }
  if (std::filesystem::is_regular_file(p.model.path + "/config.json", ec)) return p.model.path;
  if (transport == nullptr) {
    return NotFoundError(p.model.path +
                         "/config.json is not on this machine: give --model-dir "
                         "DIR (a copy, or a folder with its config.json), or -c "
                         "CLUSTER to read it from a node");
  }
  SPARK_ASSIGN_OR_RETURN(std::string text,
                         transport->ReadFile(node, p.model.path + "/config.json"));
  std::filesystem::create_directories(scratch_dir, ec);
  const std::string path = scratch_dir + "/config.json";
  std::ofstream(path) << text;
  return path;
}

}  // namespace spark::up
