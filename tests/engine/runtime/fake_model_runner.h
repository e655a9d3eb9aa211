// FakeModelRunner: a deterministic stand-in for the model that really uses the KV cache.
// Run() writes each entry's tokens into a token-id "KV cache" through the entry's block table,
// and for a logits row reads the sequence's whole history back through the block table; the
// next token is a hash of that history. So a wrong block table, a wrongly shared prefix block
// or a lost chunk changes the generated text, and ReferenceGreedy() gives the right answer.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "engine/runtime/model_runner.h"

namespace spark::engine::runtime {

class FakeModelRunner : public ModelRunner {
 public:
  FakeModelRunner(int vocab, int num_blocks, int block_size)
      : vocab_(vocab), block_size_(block_size), cache_(size_t(num_blocks) * block_size, -1) {}

  int vocab_size() const override { return vocab_; }
  // It returns a row for each draft token, and keeps nothing but its KV cache.
  std::string WhyNoSpeculation() const override { return ""; }

  Result<std::vector<float>> Run(const StepPlan& plan) override {
    plans_.push_back(plan);
    std::vector<float> logits;
    for (const StepPlanEntry& e : plan.entries) {
      for (size_t j = 0; j < e.token_ids.size(); ++j) {
        SPARK_ASSIGN_OR_RETURN(size_t slot, Slot(e, e.start_pos + int(j)));
        cache_[slot] = e.token_ids[j];
      }
      if (!e.needs_logits) continue;
      const int end = e.start_pos + int(e.token_ids.size());
      // A row for the last token, and one for each draft token (speculative steps).
      for (int last = end - e.logits_rows(); last < end; ++last) {
        std::vector<int32_t> history;
        for (int pos = 0; pos <= last; ++pos) {
          SPARK_ASSIGN_OR_RETURN(size_t slot, Slot(e, pos));
          history.push_back(cache_[slot]);
        }
        if (plan.command == StepCommand::kRunArgMax) {  // the id only, as ModelStepRunner does
          logits.push_back(static_cast<float>(NextToken(history, vocab_)));
          continue;
        }
        std::vector<float> row(vocab_, 0.0f);
        row[NextToken(history, vocab_)] = 10.0f;
        logits.insert(logits.end(), row.begin(), row.end());
      }
    }
    return logits;
  }

  // The token the fake model predicts after `history`.
  static int32_t NextToken(std::span<const int32_t> history, int vocab) {
    uint64_t h = 1469598103934665603ull;
    for (int32_t t : history) h = (h ^ uint32_t(t + 7)) * 1099511628211ull;
    return int32_t((h >> 17) % uint64_t(vocab));
  }

  static std::vector<int32_t> ReferenceGreedy(std::vector<int32_t> tokens, int n, int vocab) {
    std::vector<int32_t> out;
    for (int i = 0; i < n; ++i) {
      out.push_back(NextToken(tokens, vocab));
      tokens.push_back(out.back());
    }
    return out;
  }

  const std::vector<StepPlan>& plans() const { return plans_; }
  const std::vector<int32_t>& cache() const { return cache_; }

 private:
  Result<size_t> Slot(const StepPlanEntry& e, int pos) const {
    const size_t block = size_t(pos / block_size_);
    if (block >= e.block_table.size()) {
      return InternalError("seq " + std::to_string(e.seq_id) + ": position " + std::to_string(pos) +
                           " beyond its block table");
    }
    return size_t(e.block_table[block]) * block_size_ + size_t(pos % block_size_);
  }

  const int vocab_;
  const int block_size_;
  std::vector<int32_t> cache_;
  std::vector<StepPlan> plans_;
};

}  // namespace spark::engine::runtime
