// Engram's n-gram hashing front end, as transformers' DeepseekV41NgramHashState computes it:
// token ids go through the tokenizer-derived compressed token map; position p is hashed with the
// max_ngram_size - 1 tokens before it (padded with the pad token's compressed id where the
// look-back would cross the sequence start); per layer, odd multipliers drawn from numpy's
// default_rng(10007 * layer) multiply the ids, and the running XOR over n-gram sizes 2..N,
// modulo one prime per (n-gram size, head), plus the bucket's offset in the layer's table, gives
// (N - 1) x heads row ids. The primes are drawn in order above engram_vocab_size and never
// reused, so the buckets of a table are disjoint.
//
// numpy's generator (SeedSequence -> PCG64 -> integers by Lemire's method) is reproduced here
// bit for bit, so the hash needs nothing from Python at run time.
// Thread-safety: read-only after construction.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "engine/core/model_config.h"

namespace spark::engine::model::dsv41 {

// numpy.random.default_rng(seed).integers(0, high, size=count, dtype=int64) for seed >= 0 below
// 2^32 and high > 2^32 (the 64-bit Lemire path; V4.1's bounds are ~4.7e13).
std::vector<int64_t> NumpyIntegers(uint32_t seed, int64_t high, int count);

// numpy's PCG64(seed) state (128-bit, as high and low words) right after seeding, and its first
// raw 64-bit outputs: exposed for the test against numpy's own values.
struct Pcg64Probe {
  uint64_t state_hi = 0, state_lo = 0, inc_hi = 0, inc_lo = 0;
  std::vector<uint64_t> first;
};
Pcg64Probe ProbePcg64(uint32_t seed, int outputs);

class EngramHashing {
 public:
  // InvalidArgument when the settings cannot hash (no layers, a compressed vocabulary whose
  // multiplier bound is too small).
  static Result<EngramHashing> Create(const core::DeepseekV41Settings& s, int64_t pad_compressed);

  int layers() const { return static_cast<int>(multipliers_.size()); }
  int columns() const { return (max_ngram_ - 1) * heads_; }
  int max_ngram() const { return max_ngram_; }
  // Rows a table of Engram layer `e` must have: the sum of its primes.
  int64_t RowsNeeded(int e) const;
  const std::vector<int64_t>& multipliers(int e) const { return multipliers_[e]; }
  const std::vector<int64_t>& primes(int e) const { return primes_[e]; }
  const std::vector<int64_t>& offsets(int e) const { return offsets_[e]; }

  // Row ids [columns()] of one position for Engram layer `e`: back[s] is the compressed id at
  // position p - s (s < max_ngram), or -1 where p - s < 0. Column (n - 2) * heads + head.
  void Hash(int e, std::span<const int64_t> back, int64_t* out) const;

 private:
  int max_ngram_ = 0, heads_ = 0;
  int64_t pad_ = 0;
  std::vector<std::vector<int64_t>> multipliers_;  // [layer][max_ngram]
  std::vector<std::vector<int64_t>> primes_;       // [layer][columns]
  std::vector<std::vector<int64_t>> offsets_;      // [layer][columns]
};

}  // namespace spark::engine::model::dsv41
