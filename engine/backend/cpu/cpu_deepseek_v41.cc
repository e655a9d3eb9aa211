// CpuDeepseekOps: DeepSeek-V4.1's fake quantisers (FP8 window KV, FP4 compressed entries and
// indexer keys and queries), the candidate-block level of the two-level top-k and Engram's
// gated write into the residual streams.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_deepseek_math.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"
#include "engine/core/dtype.h"

namespace spark::engine::backend::cpu {
namespace {

constexpr float kFp8Max = 448.0f;
constexpr float kFp4Max = 6.0f;
constexpr float kE2m1[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};

// 2^ceil(log2(t)) for a normal t > 0, from the bits as the reference computes it (exponent
// field minus 127, plus one when any mantissa bit is set): the UE8M0 scale rounding.
float Pow2Ceil(float t) {
  const uint32_t bits = std::bit_cast<uint32_t>(t);
  const int k = static_cast<int>((bits >> 23) & 0xFF) - 127 + ((bits & 0x7FFFFF) != 0 ? 1 : 0);
  return std::ldexp(1.0f, k);
}

// Nearest e2m1 value of q in [-6, 6], ties to the even code (the reference's thresholds: a tie
// at 0.25, 1.25, 2.5 or 5 rounds down, at 0.75, 1.75 or 3.5 up).
float E2m1(float q) {
  constexpr float kBounds[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
  const float m = std::fabs(q);
  int code = 0;
  for (int i = 0; i < 7; ++i) {
    const bool tie_up = i % 2 == 1;
    code += tie_up ? (m >= kBounds[i]) : (m > kBounds[i]);
  }
  return std::signbit(q) ? -kE2m1[code] : kE2m1[code];
}

float BlockScale(FakeQuantFormat format, float amax) {
  switch (format) {
    case FakeQuantFormat::kFp8Ue8m0:
      return Pow2Ceil(std::max(amax, 1e-4f) * (1.0f / kFp8Max));
    case FakeQuantFormat::kFp4Ue8m0:
      return Pow2Ceil(std::max(amax, 6.0f * 0x1p-126f) * (1.0f / kFp4Max));
    case FakeQuantFormat::kFp4E4m3:
      return core::F8E4M3ToFloat(core::FloatToF8E4M3(std::max(amax, 6.0f * 0x1p-9f) / kFp4Max));
  }
  return 1.0f;
}

void QuantizeBlock(FakeQuantFormat format, float* x, int n) {
  float amax = 0;
  for (int i = 0; i < n; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float scale = BlockScale(format, amax);
  const bool fp8 = format == FakeQuantFormat::kFp8Ue8m0;
  const float limit = fp8 ? kFp8Max : kFp4Max;
  for (int i = 0; i < n; ++i) {
    const float q = std::clamp(x[i] / scale, -limit, limit);
    x[i] = (fp8 ? core::F8E4M3ToFloat(core::FloatToF8E4M3(q)) : E2m1(q)) * scale;
  }
}

}  // namespace

void CpuDeepseekOps::FakeQuant(const FakeQuantArgs& a) {
  if (a.block <= 0 || a.width % a.block != 0) return;
  const int64_t blocks = a.rows * (a.width / a.block);
  pool_.ParallelFor(blocks, 64, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) QuantizeBlock(a.format, a.x + b * a.block, a.block);
  });
}

void CpuDeepseekOps::CandidateBlocks(const CandidateBlockArgs& a) {
  const float minus_inf = -std::numeric_limits<float>::infinity();
  const float plus_inf = std::numeric_limits<float>::infinity();
  const int blocks = (a.stride + a.block_size - 1) / a.block_size;
  for (size_t t = 0; t < a.count.size(); ++t) {
    const float* scores = a.scores + t * a.stride;
    std::vector<float> block(blocks, minus_inf);
    for (int c = 0; c < a.stride; ++c) {
      block[c / a.block_size] = std::max(block[c / a.block_size], scores[c]);
    }
    if (a.count[t] > 0) block[(a.count[t] - 1) / a.block_size] = plus_inf;
    const std::vector<int> top = TopK(block, std::min(a.top_blocks, blocks));
    std::vector<bool> keep(blocks, false);
    for (int b : top) keep[b] = block[b] > minus_inf;
    float* mask = a.mask + t * a.stride;
    for (int c = 0; c < a.stride; ++c) mask[c] = keep[c / a.block_size] ? 0.0f : minus_inf;
  }
}

void CpuDeepseekOps::EngramGate(const EngramGateArgs& a) {
  const int n = a.n, hidden = a.hidden;
  pool_.ParallelFor(a.tokens, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* kv = a.kv + t * (n + 1) * hidden;
      const float* value = kv + n * hidden;
      for (int j = 0; j < n; ++j) {
        float* h = a.streams + (t * n + j) * hidden;
        const float* key = kv + j * hidden;
        const float* w = a.weight + j * hidden;
        float hh = 0, kk = 0, dot = 0;
        for (int c = 0; c < hidden; ++c) {
          hh += h[c] * h[c];
          kk += key[c] * key[c];
          dot += h[c] * w[c] * key[c];
        }
        const float rstd =
            (1.0f / std::sqrt(hh / hidden + a.eps)) * (1.0f / std::sqrt(kk / hidden + a.eps));
        const float d = dot * rstd * (1.0f / std::sqrt(static_cast<float>(hidden)));
        const float gate = Sigmoid(std::copysign(std::sqrt(std::max(std::fabs(d), 1e-6f)), d));
        for (int c = 0; c < hidden; ++c) h[c] += gate * value[c];
      }
    }
  });
}

}  // namespace spark::engine::backend::cpu
