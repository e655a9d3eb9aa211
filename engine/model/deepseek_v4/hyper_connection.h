// Manifold-constrained hyper-connections (mHC): the residual of DeepSeek-V4 is N = hc_mult
// streams per token. At each site (before attention, before the MoE) the streams are
// RMS-normalised as one flat vector (no weight) and projected to N pre weights, N post weights
// and an N x N mixing matrix made doubly stochastic by Sinkhorn iterations. The block reads
// sum_j pre_j X_j; afterwards X'_k = post_k * y + sum_j C[j][k] X_j (C used transposed).
// At the end of the model the hc_head collapses the streams with its own pre weights only.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/weights.h"

namespace spark::engine::model::dsv4 {

// Per token: post [N] and comb [N * N] (comb[j * N + k] mixes stream j into stream k).
struct HyperMix {
  std::vector<float> post, comb;
};

// For each of `tokens` tokens of streams [tokens, N, hidden]: writes the block input
// (collapsed, [tokens, hidden]) and returns the mixing weights to apply after the block.
std::vector<HyperMix> HyperPre(const float* streams, int64_t tokens, const core::ModelConfig& c,
                               const HyperConnectionWeights& w, float* collapsed);

// streams[t][k] = post_k * block_out[t] + sum_j comb[j][k] * streams[t][j], in place.
void HyperPost(float* streams, int64_t tokens, const core::ModelConfig& c,
               const std::vector<HyperMix>& mix, const float* block_out);

// The final collapse of one token's streams [N, hidden] into out [hidden].
void HyperHead(const float* streams, const core::ModelConfig& c, const Weights& w, float* out);

}  // namespace spark::engine::model::dsv4
