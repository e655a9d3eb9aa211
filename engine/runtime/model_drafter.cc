#include "engine/runtime/model_drafter.h"

namespace spark::engine::runtime {

std::vector<int32_t> ModelDrafter::ProposeFor(const Sequence& seq, int max_tokens) {
  const DraftRequest one{&seq, max_tokens};
  return std::move(ProposeForAll(std::span(&one, 1))[0]);
}

std::vector<std::vector<int32_t>> ModelDrafter::ProposeForAll(
    std::span<const DraftRequest> requests) {
  std::vector<std::vector<int32_t>> out(requests.size());
  StepPlan plan;
  plan.command = StepCommand::kDraft;
  std::vector<size_t> asked;  // the request of each plan entry
  for (size_t i = 0; i < requests.size(); ++i) {
    const Sequence& seq = *requests[i].seq;
    if (requests[i].max_tokens < 1 || seq.num_tokens() < 2) continue;
    StepPlanEntry& e = plan.entries.emplace_back();
    e.seq_id = seq.id();
    e.token_ids = {seq.token_ids().back()};
    e.start_pos = seq.num_tokens() - 1;
    e.block_table = seq.block_table();
    e.num_draft_tokens = block_;
    asked.push_back(i);
  }
  if (!status_.ok() || plan.entries.empty()) return out;
  Result<std::vector<std::vector<int32_t>>> drafts = runner_->DraftTokens(plan);
  if (drafts.ok() && drafts->size() != asked.size()) {
    drafts = InternalError("the draft model answered " + std::to_string(drafts->size()) +
                           " blocks for " + std::to_string(asked.size()));
  }
  if (!drafts.ok()) {
    std::string ids;
    for (const StepPlanEntry& e : plan.entries) {
      ids += (ids.empty() ? "" : ", ") + std::to_string(e.seq_id);
    }
    status_ = drafts.status().WithContext("drafting for sequences " + ids);
    return out;
  }
  for (size_t k = 0; k < asked.size(); ++k) {
    std::vector<int32_t>& d = (*drafts)[k];
    const int max_tokens = requests[asked[k]].max_tokens;
    if (d.size() > static_cast<size_t>(max_tokens)) d.resize(max_tokens);
    out[asked[k]] = std::move(d);
  }
  return out;
}

}  // namespace spark::engine::runtime
