// The integer inputs of one DeepSeek-V4.1 forward step, worked out on the host from the batch
// once per step. They depend on a KV source's compression ratio, not on the layer, so every
// layer of every group with that ratio shares them: the entries the step's tokens close (and
// the slots each pools) and the entries each query may see, oldest first (dsv4::PlanCompressed
// without overlap; at ratio 1 every token closes its own entry).
// Thread-safety: plain values.
#pragma once

#include <map>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/step_plan.h"
#include "engine/model/forward_batch.h"

namespace spark::engine::model::dsv41 {

struct StepPlan {
  std::vector<backend::AttentionSequence> sequences;  // block tables point into the batch
  std::map<int, dsv4::CompressedPlan> by_ratio;       // one per KV-source ratio
  int stride = 0;  // the largest candidate count of any query (score and mask row width)

  const dsv4::CompressedPlan& ratio(int r) const { return by_ratio.at(r); }
};

// The batch must be validated (block tables cover every position).
StepPlan PlanStep(const ForwardBatch& batch, int block_size, const core::DeepseekV41Settings& s);

}  // namespace spark::engine::model::dsv41
