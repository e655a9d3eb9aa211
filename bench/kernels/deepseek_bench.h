// The `deepseek` family of spark-kernel-bench: the CUDA backend's DeepseekOps (the ones of
// engine/backend/cuda/cuda_deepseek_{cache,attention,hc,v41}.cc) at DeepSeek-V4.1-Flash's shapes
// (hidden 5120, 64 heads x 512 with 64 rope dims, window 128, indexer 32 x 128 with top 512 over
// ratio-1 candidates, candidate blocks of 8 with top 2048, hc_mult 4 with 20 Sinkhorn rounds),
// decode batches 1, 8 and 32 at contexts 4K and 64K and an 8K-token prefill. Each op is called
// through the DeepseekOps interface, so its time holds what the engine's call costs on the GPU
// (host inputs staged into the stream included). Bandwidth-bound ops report GB/s against the
// copy bandwidth; the indexer scores and the attention report TFLOP/s against the fp32 CUDA-core
// peak from the SM clock; MoeExperts (384 E2M1 experts of 2304, top-6, FP8 shared) reports GB/s of
// the weights it must read. Host time a call is reported too: where it exceeds the GPU time, the
// op's host side (planning, staging) is what limits it.
#pragma once

#include <string>
#include <vector>

namespace spark::kernels {

struct DeepseekTiming {
  std::string name;
  std::string shape;
  double ms = 0;       // GPU time a call (CUDA events on the backend's stream)
  double host_ms = 0;  // wall-clock time a call on the host
  double value = 0;    // GB/s or TFLOP/s
  std::string unit;
  double ceiling = 0;  // same unit
};

// Runs every op at every shape (quick: decode batch 1 at 4K and a 1K prefill). Exits with a
// message on a CUDA error or a failed op.
std::vector<DeepseekTiming> BenchDeepseekOps(double copy_gbs, bool quick);

// One MoE layer alone: its products one at a time at one token, then MoeExperts at 1, 8, 32 and
// 256 tokens (quick: 1).
std::vector<DeepseekTiming> BenchDeepseekMoe(double copy_gbs, bool quick);

}  // namespace spark::kernels
