#include "engine/model/model_runner.h"

#include <algorithm>
#include <string>

namespace spark::engine::model {

Result<std::unique_ptr<ModelStepRunner>> ModelStepRunner::Create(Model* model,
                                                                 backend::Backend& backend,
                                                                 int64_t num_blocks, int block_size,
                                                                 bool return_logits,
                                                                 bool decode_graphs) {
  if (model == nullptr) return InvalidArgumentError("ModelStepRunner: no model");
  SPARK_ASSIGN_OR_RETURN(PagedKvCache cache, PagedKvCache::Create(backend, model->kv_cache_spec(),
                                                                  num_blocks, block_size));
  return std::unique_ptr<ModelStepRunner>(
      new ModelStepRunner(model, &backend, std::move(cache), return_logits, decode_graphs));
}

ForwardBatch ModelStepRunner::MakeBatch(const runtime::StepPlan& plan, int block_size) {
  ForwardBatch batch;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    // start_pos is how many of the sequence's tokens are already in its KV blocks (a prefix
    // cache hit or earlier chunks); the block table covers them and the new tokens.
    batch.AddSequence(e.token_ids, e.start_pos, e.block_table, block_size);
  }
  return batch;
}

Result<std::vector<float>> ModelStepRunner::Run(const runtime::StepPlan& plan) {
  if (plan.entries.empty()) return std::vector<float>();
  for (const runtime::StepPlanEntry& e : plan.entries) {
    if (e.token_ids.empty() || e.start_pos < 0) {
      return InvalidArgumentError("step " + std::to_string(plan.step) + ": sequence " +
                                  std::to_string(e.seq_id) + " has no tokens to run");
    }
  }
  const ForwardBatch batch = MakeBatch(plan, cache_.block_size());
  if (plan.command == runtime::StepCommand::kRunArgMax) {
    std::vector<int32_t> ids;
    MaybeBeginGraph(plan);
    // A graph step must reach its Download: one that fails before (a bad batch) is dropped.
    if (Status s = model_->ForwardArgMax(batch, cache_, &ids); !s.ok()) {
      backend_->CancelDecodeGraph();
      return s;
    }
    SPARK_RETURN_IF_ERROR(backend_->status());
    std::vector<float> rows;
    if (!return_logits_) return rows;
    for (size_t i = 0; i < plan.entries.size() && i < ids.size(); ++i) {
      if (plan.entries[i].needs_logits) rows.push_back(static_cast<float>(ids[i]));
    }
    return rows;
  }
  SPARK_RETURN_IF_ERROR(model_->Forward(batch, cache_, &logits_));
  SPARK_RETURN_IF_ERROR(backend_->status());
  const size_t vocab = static_cast<size_t>(vocab_size());
  // One row per sequence: the logits of its last new token.
  if (logits_.size() != vocab * plan.entries.size()) {
    return InternalError("model returned " + std::to_string(logits_.size()) + " logits for " +
                         std::to_string(plan.entries.size()) + " sequences of vocab " +
                         std::to_string(vocab));
  }
  std::vector<float> rows;
  if (!return_logits_) return rows;
  rows.reserve(vocab * static_cast<size_t>(plan.num_logits_rows()));
  for (size_t i = 0; i < plan.entries.size(); ++i) {
    if (!plan.entries[i].needs_logits) continue;
    rows.insert(rows.end(), logits_.begin() + i * vocab, logits_.begin() + (i + 1) * vocab);
  }
  return rows;
}

void ModelStepRunner::MaybeBeginGraph(const runtime::StepPlan& plan) {
  if (!decode_graphs_ || !model_->decode_graphs_ok() ||
      plan.entries.size() > static_cast<size_t>(kMaxGraphBatch)) {
    return;
  }
  int64_t blocks = 1;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    if (e.token_ids.size() != 1) return;  // prefill chunks run eagerly
    blocks = std::max<int64_t>(blocks, (e.start_pos + cache_.block_size()) / cache_.block_size());
  }
  int bucket = 4;
  while (bucket < blocks) bucket *= 2;
  backend_->BeginDecodeGraph("decode-b" + std::to_string(plan.entries.size()), bucket);
}

}  // namespace spark::engine::model
