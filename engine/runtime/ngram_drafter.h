// NgramDrafter: prompt lookup. The last n tokens of a sequence (n from prompt_lookup_max down
// to prompt_lookup_min) are searched for earlier in the same sequence (prompt and output); at
// the most recent earlier match followed by k tokens (else the one followed by the most), the
// tokens that followed it are the draft. Free to compute and
// model-agnostic; it pays where the output repeats its input (code editing, quoting, RAG).
// Thread-safety: stateless after construction.
#pragma once

#include "engine/runtime/drafter.h"

namespace spark::engine::runtime {

class NgramDrafter : public Drafter {
 public:
  // 1 <= min_n <= max_n (SpeculativeOptions::Validate checks).
  NgramDrafter(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {}
  std::vector<int32_t> Propose(std::span<const int32_t> tokens, int max_tokens) override;

 private:
  const int min_n_;
  const int max_n_;
};

}  // namespace spark::engine::runtime
