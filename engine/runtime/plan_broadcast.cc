#include "engine/runtime/plan_broadcast.h"

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

Status BroadcastingModelRunner::Shutdown() {
  StepPlan plan;
  plan.command = StepCommand::kShutdown;
  return BroadcastPlan(*comm_, &plan);
}

Status RunWorkerLoop(comm::Communicator& comm, ModelRunner& runner) {
  while (true) {
    StepPlan plan;
    SPARK_RETURN_IF_ERROR(BroadcastPlan(comm, &plan));
    if (plan.command == StepCommand::kShutdown) return Status::Ok();
    SPARK_RETURN_IF_ERROR(runner.Run(plan).status());
  }
}

}  // namespace spark::engine::runtime
