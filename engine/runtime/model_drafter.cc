#include "engine/runtime/model_drafter.h"

namespace spark::engine::runtime {

std::vector<int32_t> ModelDrafter::ProposeFor(const Sequence& seq, int max_tokens) {
  if (!status_.ok() || max_tokens < 1 || seq.num_tokens() < 2) return {};
  const int position = seq.num_tokens() - 1;
  Result<std::vector<int32_t>> drafts =
      runner_->DraftTokens(seq.token_ids().back(), position, seq.block_table(), block_);
  if (!drafts.ok()) {
    status_ = drafts.status().WithContext("drafting for sequence " + std::to_string(seq.id()));
    return {};
  }
  if (drafts->size() > static_cast<size_t>(max_tokens)) drafts->resize(max_tokens);
  return std::move(*drafts);
}

}  // namespace spark::engine::runtime
