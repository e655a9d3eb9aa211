// The speculative step's cost on a model, as the serving engine runs it: runtime::Engine over
// ModelStepRunner (decode graphs on, verify steps eager), greedy, at each k against plain
// decode, with two drafters that bound what any drafter gets (random weights accept almost
// nothing from a real one): "wrong" proposes k tokens a step none of which is accepted (each
// step a verify step of 1 + k rows that keeps one token), "oracle" proposes the tokens the wrong
// run produced at this k (the verify path's own greedy output), so nearly all are accepted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/model/model.h"

namespace spark::engine::bench {

struct SpeculativeRow {
  int batch = 0;
  int k = 0;                // draft tokens per sequence and step; 0 = plain decode
  std::string drafter;      // "none", "oracle" or "wrong"
  int64_t steps = 0;        // engine steps after the prefill
  int64_t tokens = 0;       // tokens produced by those steps, all sequences
  double seconds = 0;       // wall clock of those steps
  int64_t draft_tokens = 0, accepted_tokens = 0;
  bool ids_equal_plain = true;  // greedy is lossless: the ids of the plain run
  int first_difference = -1;    // the earliest output position (any sequence) that differs
  double tok_s() const { return seconds > 0 ? tokens / seconds : 0; }
  double ms_per_step() const { return steps > 0 ? seconds * 1e3 / steps : 0; }
};

struct SpeculativeSweepOptions {
  int batch = 1;
  int prompt = 64;    // prompt tokens per sequence
  int tokens = 128;   // greedy tokens per sequence (EOS ignored)
  int block_size = 16;
  int max_len = 1024;
  std::vector<int> ks{1, 2, 3, 4, 5, 6, 7};
};

// Plain decode (warm-up run first: it captures the graphs), then oracle and wrong at each k.
std::vector<SpeculativeRow> RunSpeculativeSweep(model::Model* model, backend::Backend& backend,
                                                const SpeculativeSweepOptions& options);

// The acceptance rate per draft token at which drafting k tokens with a verify step of
// verify_ms breaks even with plain steps of plain_ms: expected tokens per verify step
// (1 - a^(k+1)) / (1 - a) equal to verify_ms / plain_ms. 1 when it never pays.
double BreakEvenAcceptance(int k, double verify_ms, double plain_ms);

}  // namespace spark::engine::bench
