#include "engine/runtime/sequence.h"

namespace spark::engine::runtime {

const char* FinishReasonName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kAbort:
      return "abort";
    case FinishReason::kNone:
      break;
  }
  return "";
}

Sequence::Sequence(uint64_t id, std::vector<int32_t> prompt, SamplingParams params,
                   uint64_t rng_seed)
    : id_(id),
      params_(std::move(params)),
      rng_(rng_seed),
      token_ids_(std::move(prompt)),
      prompt_len_(static_cast<int>(token_ids_.size())) {}

void Sequence::Finish(FinishReason reason) {
  status_ = SequenceStatus::kFinished;
  finish_reason_ = reason;
}

}  // namespace spark::engine::runtime
