// Helpers the files of CudaBackend share (not part of its interface).
#pragma once

#include <cuda_bf16.h>

#include <cstddef>

#include "engine/backend/backend_types.h"
#include "kernels/quant_gemm.h"

namespace spark::engine::backend::cuda::internal {

// Pinned host ints for the MoE expert counts: the most experts one rank may hold.
inline constexpr size_t kMaxLocalExperts = 4096;

// fn(k, v) with the cache's pointers typed as its elements (float or __nv_bfloat16).
template <typename Fn>
Status WithCache(const KvCacheRef& cache, Fn&& fn) {
  if (cache.dtype == DType::kBF16) {
    return fn(static_cast<__nv_bfloat16*>(cache.k), static_cast<__nv_bfloat16*>(cache.v));
  }
  return fn(static_cast<float*>(cache.k), static_cast<float*>(cache.v));
}

// The kernels' view of a bf16 or quantised weight [n, k] (backend_types.h's byte layout).
inline kernels::QuantMatrix QuantView(WeightRef w, int n, int k) {
  kernels::QuantMatrix m;
  m.codes = w.data;
  m.n = n;
  m.k = k;
  if (w.dtype == DType::kBF16) return m;
  m.format = w.dtype == DType::kE4M3B32 ? kernels::QuantFormat::kE4M3B32
                                        : kernels::QuantFormat::kE2M1B32;
  m.scales = static_cast<const uint8_t*>(w.data) + QuantScaleOffset(w.dtype, n, k);
  return m;
}

inline __nv_bfloat16* Bf16(const Output& out) { return static_cast<__nv_bfloat16*>(out.bf16); }
inline const __nv_bfloat16* Bf16(const Input& in) {
  return static_cast<const __nv_bfloat16*>(in.bf16);
}

}  // namespace spark::engine::backend::cuda::internal
