#include "engine/runtime/plan_broadcast.h"

#include <optional>
#include <vector>

namespace spark::engine::runtime {

Status BroadcastPlan(comm::Communicator& comm, StepPlan* plan) {
  std::vector<uint8_t> bytes;
  if (comm.rank() == 0) bytes = plan->Serialize();
  SPARK_RETURN_IF_ERROR(comm::BroadcastBytes(comm, &bytes, 0));
  if (comm.rank() == 0) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(*plan, StepPlan::Deserialize(bytes));
  return Status::Ok();
}

Result<std::vector<float>> BroadcastingModelRunner::Run(const StepPlan& plan) {
  StepPlan copy = plan;
  SPARK_RETURN_IF_ERROR(BroadcastPlan(*comm_, &copy));
  return local_->Run(plan);
}

Result<std::vector<std::vector<int32_t>>> BroadcastingModelRunner::DraftTokens(
    const StepPlan& plan) {
  StepPlan copy = plan;
  SPARK_RETURN_IF_ERROR(BroadcastPlan(*comm_, &copy));
  return local_->DraftTokens(plan);
}

Status BroadcastingModelRunner::Shutdown() {
  StepPlan plan;
  plan.command = StepCommand::kShutdown;
  return BroadcastPlan(*comm_, &plan);
}

namespace {

// This rank's available memory in MiB (exact in a float up to 16 TiB), -1 when unknown.
float AvailableMib(HostMemory* memory) {
  if (memory == nullptr) return -1.0f;
  Result<HostMemorySample> s = memory->Read();
  return s.ok() ? static_cast<float>(s->available_bytes >> 20) : -1.0f;
}

}  // namespace

Result<GroupMemoryReading> PollGroupMemory(comm::Communicator& comm, HostMemory& memory) {
  StepPlan plan;
  plan.command = StepCommand::kMemoryPoll;
  SPARK_RETURN_IF_ERROR(BroadcastPlan(comm, &plan));
  const float mine = AvailableMib(&memory);
  std::vector<float> all(comm.world_size());
  SPARK_RETURN_IF_ERROR(comm.AllGather(&mine, 1, all.data()));
  std::optional<GroupMemoryReading> least;
  for (int r = 0; r < comm.world_size(); ++r) {
    if (all[r] < 0) continue;
    const int64_t bytes = static_cast<int64_t>(all[r]) << 20;
    if (!least || bytes < least->available_bytes) least = GroupMemoryReading{bytes, r};
  }
  if (!least) return UnavailableError("no rank could read its node's memory (/proc/meminfo)");
  return *least;
}

Status RunWorkerLoop(comm::Communicator& comm, ModelRunner& runner, HostMemory* memory) {
  while (true) {
    StepPlan plan;
    SPARK_RETURN_IF_ERROR(BroadcastPlan(comm, &plan));
    if (plan.command == StepCommand::kShutdown) return Status::Ok();
    if (plan.command == StepCommand::kMemoryPoll) {
      const float mine = AvailableMib(memory);
      std::vector<float> all(comm.world_size());
      SPARK_RETURN_IF_ERROR(comm.AllGather(&mine, 1, all.data()));
      continue;
    }
    if (plan.command == StepCommand::kDraft) {
      SPARK_RETURN_IF_ERROR(runner.DraftTokens(plan).status());
      continue;
    }
    SPARK_RETURN_IF_ERROR(runner.Run(plan).status());
  }
}

}  // namespace spark::engine::runtime
