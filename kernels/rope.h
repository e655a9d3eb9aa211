// Rotary position embedding in the "rotate half" layout (pairs i and i + head_dim/2), as the
// CPU backend and transformers' Qwen3/Llama code apply it, with optional YaRN scaling.
// The frequency table is computed once on the host (RopeInvFreq) and kept on the device; the
// kernel only rotates.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "base/status.h"

namespace spark::kernels {

struct RopeScaling {
  enum class Type { kNone, kYarn };
  Type type = Type::kNone;
  double factor = 1.0;               // context extension factor (YaRN "factor")
  int original_max_position = 4096;  // original_max_position_embeddings
  double beta_fast = 32.0;           // rotations where extrapolation ends
  double beta_slow = 1.0;            // rotations where interpolation starts
  double mscale = 0.0;               // DeepSeek-style mscale; 0 = unset
  double mscale_all_dim = 0.0;       // 0 = unset
  double attention_factor = 0.0;     // explicit cos/sin multiplier; 0 = derive from factor
  bool truncate = true;              // round the correction range to whole dimensions
};

struct RopeTable {
  std::vector<float> inv_freq;    // head_dim / 2 entries
  float attention_factor = 1.0f;  // multiplies cos and sin (1 without YaRN)
};

// inv_freq[i] = 1 / theta^(2i / head_dim) in fp32, as transformers computes it; under YaRN the
// blend of interpolated and extrapolated frequencies of transformers' _compute_yarn_parameters.
RopeTable RopeInvFreq(int head_dim, double theta, const RopeScaling& scaling = {});

// Rotates x [tokens, heads, head_dim] in place: angle = positions[t] * inv_freq[i];
// (a, b) = (x[i], x[i + d/2]) -> (a cos - b sin, b cos + a sin) * attention_factor.
// positions and inv_freq are device pointers.
template <typename T>
Status Rope(T* x, const int32_t* positions, int64_t tokens, int heads, int head_dim,
            const float* inv_freq, float attention_factor, cudaStream_t stream);

// Qwen3's per-layer attention inputs in one launch: per-head RMSNorm of q (q_weight) and of k
// (k_weight), v = x[t, h] / sqrt(mean(x[t, h]^2) + eps) * weight, then RoPE of both as Rope does
// (attention factor 1), in place; the rotated k and the v rows are also written to their cache
// slots ([slot, kv_heads * head_dim]). head_dim 64, 128 or 256 (InvalidArgument otherwise).
// fp32 activations, an fp32 or bf16 cache (rounded to nearest even); device pointers.
struct QkvHeads {
  float* q = nullptr;  // [tokens, heads, head_dim]
  float* k = nullptr;  // [tokens, kv_heads, head_dim]
  const float* v = nullptr;
  const float* q_weight = nullptr;
  const float* k_weight = nullptr;
  void* k_cache = nullptr;
  void* v_cache = nullptr;
  bool bf16_cache = false;  // the cache's elements: bf16, or fp32
  int heads = 0, kv_heads = 0, head_dim = 0;
  // When set, q, k and v are read from one stacked row per token instead (q at column 0, k
  // after the heads, v after the KV heads; src_stride floats per row, as one GEMM over stacked
  // weights writes them) and written to q, k and v_out as well: the column split folded in.
  const float* src = nullptr;
  int64_t src_stride = 0;
  float* v_out = nullptr;
};
Status QkNormRopeWriteKv(const QkvHeads& heads, const int32_t* positions, const int64_t* slots,
                         int64_t tokens, float eps, const float* inv_freq, cudaStream_t stream);

}  // namespace spark::kernels
