// ZeroCostRunner: a ModelRunner that does no model work — each logits row peaks at a letter
// derived from the entry's last token — so tests and benchmarks measure only the server,
// scheduler, block manager and sampler. Vocabulary: ByteCodec's (257); never emits EOS.
// Thread-safety: none needed (the engine thread calls it).
#pragma once

#include <vector>

#include "engine/runtime/model_runner.h"
#include "engine/server/text_codec.h"

namespace spark::engine::server::testing {

class ZeroCostRunner : public runtime::ModelRunner {
 public:
  int vocab_size() const override { return ByteCodec::kVocabSize; }
  Result<std::vector<float>> Run(const runtime::StepPlan& plan) override {
    std::vector<float> logits(static_cast<size_t>(plan.num_logits_rows()) * ByteCodec::kVocabSize,
                              0.0f);
    size_t row = 0;
    for (const runtime::StepPlanEntry& e : plan.entries) {
      if (!e.needs_logits) continue;
      const int32_t next = 'a' + (e.token_ids.back() + e.start_pos) % 26;
      float* r = &logits[row++ * ByteCodec::kVocabSize];
      r[next] = 50.0f;  // Certain even at temperature 1.
      r[ByteCodec::kEos] = -1e30f;
    }
    return logits;
  }
};

}  // namespace spark::engine::server::testing
