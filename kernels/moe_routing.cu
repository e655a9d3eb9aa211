// MoE routing: one warp per token. Scores go to shared memory, grouped selection masks the
// losing groups, then top-k is k rounds of a warp argmax (ties to the lower expert id).
#include <algorithm>

#include "kernels/cuda_check.h"
#include "kernels/device_math.cuh"
#include "kernels/moe.h"

namespace spark::kernels {
namespace {

constexpr int kWarps = 4;
constexpr int kMaxExperts = 1024;
constexpr int kMaxTopK = 32;

// Warp argmax over (value, index): larger value wins, then the lower index.
__device__ __forceinline__ void WarpArgMax(float& v, int& idx) {
#pragma unroll
  for (int offset = 16; offset > 0; offset >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, v, offset);
    const int oi = __shfl_xor_sync(0xffffffffu, idx, offset);
    if (ov > v || (ov == v && oi < idx)) {
      v = ov;
      idx = oi;
    }
  }
}

__global__ void RouteKernel(const float* __restrict__ logits, int64_t rows, RouterOptions o,
                            int32_t* __restrict__ ids, float* __restrict__ weights) {
  extern __shared__ float smem[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = blockIdx.x * int64_t{kWarps} + warp;
  if (row >= rows) return;
  const int E = o.num_experts;
  float* score = smem + warp * 2 * E;  // the weight each expert would get
  float* select = score + E;           // what selection ranks by (-inf once taken or masked)
  const float* lg = logits + row * E;
  float mx = -INFINITY;
  if (o.scoring == RouterOptions::Scoring::kSoftmax) {
    for (int e = lane; e < E; e += 32) mx = fmaxf(mx, lg[e]);
    mx = detail::WarpMax(mx);
  }
  float sum = 0.0f;
  for (int e = lane; e < E; e += 32) {
    const float x = lg[e];
    float s;
    if (o.scoring == RouterOptions::Scoring::kSoftmax) {
      s = expf(x - mx);
      sum += s;
    } else if (o.scoring == RouterOptions::Scoring::kSigmoid) {
      s = 1.0f / (1.0f + expf(-x));
    } else {
      s = sqrtf(x > 20.0f ? x : log1pf(expf(x)));
    }
    score[e] = s;
  }
  if (o.scoring == RouterOptions::Scoring::kSoftmax) {
    sum = detail::WarpSum(sum);
    for (int e = lane; e < E; e += 32) score[e] /= sum;
  }
  __syncwarp();
  for (int e = lane; e < E; e += 32) {
    select[e] = score[e] + (o.selection_bias != nullptr ? o.selection_bias[e] : 0.0f);
  }
  __syncwarp();
  if (o.n_group > 1) {
    // Lane g scores group g (sum of its two best), then the topk_group best groups survive.
    const int per = E / o.n_group;
    float gscore = -INFINITY;
    if (lane < o.n_group) {
      float b1 = -INFINITY, b2 = -INFINITY;
      for (int e = lane * per; e < (lane + 1) * per; ++e) {
        const float v = select[e];
        if (v > b1) {
          b2 = b1;
          b1 = v;
        } else if (v > b2) {
          b2 = v;
        }
      }
      gscore = per >= 2 ? b1 + b2 : b1;
    }
    bool keep = false;
    for (int round = 0; round < o.topk_group; ++round) {
      float v = gscore;
      int idx = lane < o.n_group ? lane : 1 << 30;
      WarpArgMax(v, idx);
      if (lane == idx) {
        keep = true;
        gscore = -INFINITY;
      }
    }
    const unsigned kept = __ballot_sync(0xffffffffu, keep);
    __syncwarp();  // the group owners' reads of select[] come before the masking writes
    for (int e = lane; e < E; e += 32) {
      if (!((kept >> (e / per)) & 1u)) select[e] = -INFINITY;
    }
    __syncwarp();
  }
  float chosen = 0.0f;
  float w_mine = 0.0f;  // lane k keeps the k-th weight
  int id_mine = 0;
  for (int k = 0; k < o.top_k; ++k) {
    float v = -INFINITY;
    int idx = 1 << 30;
    for (int e = lane; e < E; e += 32) {
      const float s = select[e];
      if (s > v || (s == v && e < idx)) {
        v = s;
        idx = e;
      }
    }
    WarpArgMax(v, idx);
    const float w = score[idx];
    chosen += w;
    if (lane == k) {
      w_mine = w;
      id_mine = idx;
    }
    __syncwarp();
    if (lane == 0) select[idx] = -INFINITY;
    __syncwarp();
  }
  if (lane < o.top_k) {
    float w = o.norm_topk_prob ? w_mine / chosen : w_mine;
    ids[row * o.top_k + lane] = id_mine;
    weights[row * o.top_k + lane] = w * o.routed_scaling_factor;
  }
}

}  // namespace

Status RouteTopK(const float* logits, int64_t rows, const RouterOptions& options, int32_t* ids,
                 float* weights, cudaStream_t stream) {
  const RouterOptions& o = options;
  if (o.num_experts < 1 || o.num_experts > kMaxExperts || o.top_k < 1 || o.top_k > kMaxTopK ||
      o.top_k > o.num_experts) {
    return InvalidArgumentError(
        "moe routing: need 1 <= top_k <= min(32, num_experts) and "
        "num_experts <= 1024; got top_k " +
        std::to_string(o.top_k) + ", num_experts " + std::to_string(o.num_experts));
  }
  if (o.n_group < 1 || o.n_group > 32 || o.num_experts % o.n_group != 0 || o.topk_group < 1 ||
      o.topk_group > o.n_group || o.topk_group * (o.num_experts / o.n_group) < o.top_k) {
    return InvalidArgumentError(
        "moe routing: n_group must divide num_experts (at most 32 "
        "groups) and topk_group groups must hold top_k experts; got "
        "n_group " +
        std::to_string(o.n_group) + ", topk_group " + std::to_string(o.topk_group));
  }
  if (rows <= 0) return Status::Ok();
  const size_t smem = size_t{kWarps} * 2 * o.num_experts * sizeof(float);
  RouteKernel<<<detail::CeilDiv(rows, kWarps), kWarps * 32, smem, stream>>>(logits, rows, o, ids,
                                                                            weights);
  SPARK_CUDA_RETURN_IF_LAUNCH_FAILED();
  return Status::Ok();
}

}  // namespace spark::kernels
