// What scoring a prompt (SamplingParams::prompt_logprobs: a logits row and a log-softmax per
// prompt position) costs against a plain prefill, as the serving engine runs it on a model:
// `batch` prompts of each length, prefilled and ended after one token (plain) or scored and
// ended without one (max_tokens 0), each timed over the whole run after a warm-up run.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace spark::engine::bench {

struct ScoringRow {
  int batch = 0;
  int prompt = 0;       // tokens a prompt
  bool scored = false;  // prompt_logprobs 0, max_tokens 0; else max_tokens 1
  int64_t steps = 0;
  double seconds = 0;
  double tok_s() const { return seconds > 0 ? static_cast<double>(batch) * prompt / seconds : 0; }
};

struct ScoringSweepOptions {
  int batch = 1;
  std::vector<int> prompts{512, 2048, 8192};
  int block_size = 16;
  int max_num_batched_tokens = 8192;
};

// Plain then scored at each prompt length; rows in that order.
std::vector<ScoringRow> RunScoringSweep(model::Model* model, backend::Backend& backend,
                                        const ScoringSweepOptions& options);

}  // namespace spark::engine::bench
