// The start-up memory guard of a rank: before it loads anything, the rank makes its own memory
// plan (memory_plan.h, the same one `spark-engine plan` prints) and refuses to start when the
// node would be left with less than the start-up floor; once its weights and KV cache are in,
// it checks again against what the node really has left. Exhausting a GB10's unified memory
// freezes the host, so refusing early, with the numbers and the setting to change, is the point.
// Thread-safety: pure functions apart from the memory reading.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "base/status.h"
#include "engine/core/model_config.h"
#include "engine/model/memory_plan.h"
#include "engine/runtime/host_memory.h"

namespace spark::engine::cli {

// Floors for a node of `total_bytes`: a DGX Spark's (5 GiB start-up, 3 GiB admit, 1 GiB hard),
// scaled down on machines with less than 80 GiB (1/16, 1/32 and 1/64 of their memory) so that a
// small test machine is not refused for lacking a Spark's headroom.
model::MemoryFloors ScaledFloors(int64_t total_bytes);

// This machine's name, for messages ("spark-1").
std::string HostName();

struct StartupCheck {
  model::RankPlan plan;
  model::NodeFit fit;
  runtime::HostMemorySample sample;
};

// Plans the rank and fits it onto this machine's available memory (`ranks_on_host` ranks of the
// group share it). FailedPrecondition "start-up memory guard: ..." naming the node, the numbers
// and the setting to change when the floor would not stay; the plan's and the reading's errors.
Result<StartupCheck> CheckStartupMemory(const core::ModelConfig& config,
                                        const model::PlanRequest& request,
                                        runtime::HostMemory& memory, int ranks_on_host);

// Bytes the rank has yet to allocate once its weights and KV cache are in: the step's
// activations, the graph arena, the transport's buffers and the CUDA runtime (the plan's items
// other than the weights and the engine process).
int64_t StillToAllocate(const model::RankPlan& plan);

// After loading: FailedPrecondition when the node's available memory less what the rank has
// still to allocate is below the start-up floor.
Status CheckLoadedMemory(const model::RankPlan& plan, const model::MemoryFloors& floors,
                         runtime::HostMemory& memory);

}  // namespace spark::engine::cli
