#include "engine/model/step_runner.h"

#include <algorithm>
#include <string>

#include "base/logging.h"

namespace spark::engine::model {
namespace {

// One token per sequence: a decode step (graphs take only those).
bool IsDecode(const runtime::StepPlan& plan) {
  return std::all_of(plan.entries.begin(), plan.entries.end(),
                     [](const runtime::StepPlanEntry& e) { return e.token_ids.size() == 1; });
}

}  // namespace

Result<std::unique_ptr<ModelStepRunner>> ModelStepRunner::Create(
    Model* model, backend::Backend& backend, int64_t num_blocks, int block_size, bool return_logits,
    bool decode_graphs, bool launch_ahead) {
  if (model == nullptr) return InvalidArgumentError("ModelStepRunner: no model");
  SPARK_ASSIGN_OR_RETURN(PagedKvCache cache, PagedKvCache::Create(backend, model->kv_cache_spec(),
                                                                  num_blocks, block_size));
  return std::unique_ptr<ModelStepRunner>(new ModelStepRunner(
      model, &backend, std::move(cache), return_logits, decode_graphs, launch_ahead));
}

ModelStepRunner::~ModelStepRunner() {
  // The step in flight is lost with the runner; the model must not keep it as launched.
  if (Status s = DropAhead(); !s.ok())
    Logger("engine.model")->warn("model runner: {}", s.message());
}

Status ModelStepRunner::DropAhead() {
  if (ahead_entries_.empty()) return Status::Ok();
  ahead_entries_.clear();
  std::vector<int32_t> unused;
  return model_->TakeArgMax(&unused);
}

ForwardBatch ModelStepRunner::MakeBatch(const runtime::StepPlan& plan, int block_size) {
  ForwardBatch batch;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    // start_pos is how many of the sequence's tokens are already in its KV blocks (a prefix
    // cache hit or earlier chunks); the block table covers them and the new tokens.
    batch.AddSequence(e.token_ids, e.start_pos, e.block_table, block_size, e.logits_rows());
  }
  return batch;
}

Result<std::vector<std::vector<int32_t>>> ModelStepRunner::DraftTokens(
    const runtime::StepPlan& plan) {
  if (plan.command != runtime::StepCommand::kDraft) {
    return InvalidArgumentError("DraftTokens takes a draft plan, not command " +
                                std::to_string(static_cast<int>(plan.command)));
  }
  std::vector<DraftBlock> blocks;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    if (e.token_ids.size() != 1) {
      return InvalidArgumentError("draft plan: sequence " + std::to_string(e.seq_id) + " has " +
                                  std::to_string(e.token_ids.size()) +
                                  " tokens; a draft starts from one anchor");
    }
    blocks.push_back({e.token_ids[0], e.start_pos, e.block_table, e.num_draft_tokens});
  }
  std::vector<std::vector<int32_t>> drafts;
  SPARK_RETURN_IF_ERROR(model_->DraftTokens(blocks, cache_, &drafts));
  return drafts;
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
  const bool drafts =
      std::any_of(plan.entries.begin(), plan.entries.end(),
                  [](const runtime::StepPlanEntry& e) { return e.num_draft_tokens > 0; });
  if (drafts) {
    if (const std::string why = model_->WhyNoSpeculation(); !why.empty()) {
      return FailedPreconditionError("step " + std::to_string(plan.step) +
                                     ": speculative step refused: " + why);
    }
  }
  if (plan.command == runtime::StepCommand::kRunArgMax) {
    std::vector<int32_t> ids;
    if (drafts) {  // verify rows: no graph, nothing launched ahead
      SPARK_RETURN_IF_ERROR(DropAhead());
      SPARK_RETURN_IF_ERROR(model_->ForwardArgMax(batch, cache_, &ids));
      SPARK_RETURN_IF_ERROR(backend_->status());
    } else {
      SPARK_ASSIGN_OR_RETURN(ids, RunArgMax(plan, batch));
    }
    std::vector<float> rows;
    if (!return_logits_) return rows;
    size_t row = 0;
    for (const runtime::StepPlanEntry& e : plan.entries) {
      for (int r = 0; r < e.logits_rows() && row < ids.size(); ++r, ++row) {
        if (e.needs_logits) rows.push_back(static_cast<float>(ids[row]));
      }
    }
    return rows;
  }
  SPARK_RETURN_IF_ERROR(DropAhead());
  if (decode_graphs_ && IsDecode(plan)) {
    CountEager("a sampled or scored step (graphs take greedy ones)");
  }
  SPARK_RETURN_IF_ERROR(model_->Forward(batch, cache_, &logits_));
  SPARK_RETURN_IF_ERROR(backend_->status());
  const size_t vocab = static_cast<size_t>(vocab_size());
  // Per sequence: the logits of its last new token, or of its last 1 + num_draft_tokens.
  if (logits_.size() != vocab * static_cast<size_t>(batch.num_logit_rows())) {
    return InternalError("model returned " + std::to_string(logits_.size()) + " logits for " +
                         std::to_string(batch.num_logit_rows()) + " rows of vocab " +
                         std::to_string(vocab));
  }
  std::vector<float> rows;
  if (!return_logits_) return rows;
  rows.reserve(vocab * static_cast<size_t>(plan.num_logits_rows()));
  size_t row = 0;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    const size_t n = static_cast<size_t>(e.logits_rows());
    if (e.needs_logits) {
      rows.insert(rows.end(), logits_.begin() + row * vocab, logits_.begin() + (row + n) * vocab);
    }
    row += n;
  }
  return rows;
}

Result<std::vector<int32_t>> ModelStepRunner::RunArgMax(const runtime::StepPlan& plan,
                                                        const ForwardBatch& batch) {
  std::vector<int32_t> ids;
  if (plan.entries == ahead_entries_) {  // launched by the step before (plans have entries)
    ahead_entries_.clear();
    ++taken_ahead_;
    ++decode_steps_.graph;
  } else {
    SPARK_RETURN_IF_ERROR(DropAhead());
    const bool graph = MaybeBeginGraph(plan, launch_ahead_ ? "decode-first-b" : "decode-b");
    const bool launch = graph && launch_ahead_;
    // A graph step must reach its Download: one that fails before (a bad batch) is dropped.
    const Status s = launch ? model_->LaunchArgMax(batch, cache_, false)
                            : model_->ForwardArgMax(batch, cache_, &ids);
    if (!s.ok()) {
      backend_->CancelDecodeGraph();
      return s;
    }
    if (!launch) {
      SPARK_RETURN_IF_ERROR(backend_->status());
      return ids;
    }
  }
  // This plan's step is launched and not taken: the step after it goes out now, fed from it,
  // so the host stages it while the GPU runs this one.
  const bool next = MaybeLaunchAhead(plan);
  Status s = model_->TakeArgMax(&ids);
  if (s.ok()) s = backend_->status();
  if (!s.ok() || ids.size() != plan.entries.size()) {
    if (Status dropped = DropAhead(); !dropped.ok()) return dropped;
    return s.ok() ? InternalError("model runner: " + std::to_string(ids.size()) +
                                  " ids for a plan of " + std::to_string(plan.entries.size()))
                  : s;
  }
  if (next) {
    for (size_t i = 0; i < ids.size(); ++i) ahead_entries_[i].token_ids = {ids[i]};
  }
  return ids;
}

bool ModelStepRunner::MaybeLaunchAhead(const runtime::StepPlan& plan) {
  if (!launch_ahead_) return false;
  runtime::StepPlan next;
  next.command = plan.command;
  next.step = plan.step + 1;
  next.entries = plan.entries;  // token ids: placeholders until this plan's ids are taken
  for (runtime::StepPlanEntry& e : next.entries) {
    if (e.token_ids.size() != 1 || !e.needs_logits) return false;
    e.start_pos += 1;
    // The next position must lie in a block the sequence holds already.
    if (e.start_pos >= static_cast<int64_t>(e.block_table.size()) * cache_.block_size()) {
      return false;
    }
  }
  if (!MaybeBeginGraph(next, "decode-fed-b", /*count=*/false)) return false;
  if (!model_->LaunchArgMax(MakeBatch(next, cache_.block_size()), cache_, true).ok()) {
    backend_->CancelDecodeGraph();  // not run: the next Run runs its plan as usual
    return false;
  }
  ahead_entries_ = std::move(next.entries);
  ++launched_ahead_;
  return true;
}

bool ModelStepRunner::MaybeBeginGraph(const runtime::StepPlan& plan, const char* kind,
                                      bool count) {
  if (!decode_graphs_ || !IsDecode(plan)) return false;  // prefill chunks run eagerly
  auto eager = [&](const std::string& reason) {
    if (count) CountEager(reason);
    return false;
  };
  if (const std::string why = model_->WhyNoDecodeGraphs(); !why.empty()) return eager(why);
  const size_t n = plan.entries.size();
  if (n > static_cast<size_t>(kMaxGraphBatch)) {
    return eager("more than " + std::to_string(kMaxGraphBatch) + " sequences");
  }
  if (warmed_batches_.insert(n).second) {
    return eager("the first decode step of its batch size (builds tables, tunes GEMMs)");
  }
  int64_t blocks = 1;
  for (const runtime::StepPlanEntry& e : plan.entries) {
    blocks = std::max<int64_t>(blocks, (e.start_pos + cache_.block_size()) / cache_.block_size());
  }
  int bucket = 4;
  while (bucket < blocks) bucket *= 2;
  if (!backend_->BeginDecodeGraph(kind + std::to_string(n), bucket)) {
    return eager("the " + backend_->name() + " backend ran it eagerly");
  }
  if (count) ++decode_steps_.graph;
  return true;
}

void ModelStepRunner::CountEager(const std::string& reason) {
  if (decode_steps_.eager[reason]++ == 0) {
    Logger("engine.model")->info("decode steps run eagerly when they are {}", reason);
  }
}

}  // namespace spark::engine::model
