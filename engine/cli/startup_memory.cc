#include "engine/cli/startup_memory.h"

#include <unistd.h>

#include <algorithm>

#include "base/logging.h"
#include "base/strings.h"
#include "engine/model/model_family.h"

namespace spark::engine::cli {
namespace {

std::string Bytes(int64_t b) { return HumanBytes(static_cast<uint64_t>(std::max<int64_t>(0, b))); }

}  // namespace

model::MemoryFloors ScaledFloors(int64_t total_bytes) {
  model::MemoryFloors f;
  f.startup = std::min(f.startup, total_bytes / 16);
  f.admit = std::min(f.admit, total_bytes / 32);
  f.hard = std::min(f.hard, total_bytes / 64);
  return f;
}

std::string HostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "this node";
  return name;
}

Result<StartupCheck> CheckStartupMemory(const core::ModelConfig& config,
                                        const model::PlanRequest& request,
                                        runtime::HostMemory& memory, int ranks_on_host) {
  const model::ModelFamily* family = model::FindModelFamily(config.model_type);
  if (family == nullptr) return UnimplementedError("no model family reads " + config.model_type);
  StartupCheck c;
  SPARK_ASSIGN_OR_RETURN(c.plan, model::PlanRank(config, *family, request));
  SPARK_ASSIGN_OR_RETURN(c.sample, memory.Read());
  c.fit = model::FitNode(c.plan, request, HostName(), c.sample.available_bytes, ranks_on_host);
  Logger("engine.memory")
      ->info(
          "memory plan: {} per rank ({} weights, activations and buffers, {} KV cache) x {} "
          "on {}: {}; {} would stay, floor {}",
          Bytes(c.plan.fixed_bytes + c.fit.kv_bytes), Bytes(c.plan.fixed_bytes),
          Bytes(c.fit.kv_bytes), c.fit.ranks, c.fit.node, c.sample.Describe(),
          Bytes(c.fit.headroom_bytes), Bytes(request.floors.startup));
  if (!c.fit.ok) {
    return FailedPreconditionError("start-up memory guard: " + c.fit.message +
                                   " (spark-engine plan shows every item)");
  }
  return c;
}

int64_t StillToAllocate(const model::RankPlan& plan) {
  int64_t bytes = 0;
  for (const model::PlanItem& item : plan.fixed) {
    if (item.name != "weights" && item.name != "engine process") bytes += item.bytes;
  }
  return bytes;
}

Status CheckLoadedMemory(const model::RankPlan& plan, const model::MemoryFloors& floors,
                         runtime::HostMemory& memory) {
  SPARK_ASSIGN_OR_RETURN(runtime::HostMemorySample s, memory.Read());
  const int64_t after = s.available_bytes - StillToAllocate(plan);
  if (after >= floors.startup) return Status::Ok();
  return FailedPreconditionError(
      "start-up memory guard: with the weights and KV cache loaded, " + HostName() + " has " +
      s.Describe() + "; the steps' activations and buffers (" + Bytes(StillToAllocate(plan)) +
      ") would leave " + Bytes(after) + ", below the " + Bytes(floors.startup) +
      " floor: something else took memory while loading, or the plan undercounts; lower "
      "--num-kv-blocks / --kv-memory-fraction or free memory on the node");
}

}  // namespace spark::engine::cli
