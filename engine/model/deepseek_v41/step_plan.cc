#include "engine/model/deepseek_v41/step_plan.h"

#include <algorithm>

namespace spark::engine::model::dsv41 {

StepPlan PlanStep(const ForwardBatch& batch, int block_size, const core::DeepseekV41Settings& s) {
  StepPlan plan;
  int64_t start = 0;
  for (const BatchSequence& seq : batch.sequences) {
    plan.sequences.push_back({start, seq.query_len, seq.context_len, seq.block_table});
    start += seq.query_len;
  }
  for (int layer : s.kv_source_layer_ids) {
    const int r = s.compress_ratios[layer];
    if (plan.by_ratio.count(r)) continue;
    dsv4::CompressedPlan p = dsv4::PlanCompressed(batch, block_size, r, /*overlap=*/false);
    for (int32_t count : p.candidates.count) plan.stride = std::max(plan.stride, int{count});
    plan.by_ratio.emplace(r, std::move(p));
  }
  return plan;
}

}  // namespace spark::engine::model::dsv41
