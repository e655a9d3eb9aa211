// The tensor-core decode attention kernel behind PagedDecodeAttention (attention.h) for bf16
// caches, which it picks when the layout asks for bf16 tensor cores and these conditions hold.
#pragma once

#include "kernels/attention.h"

namespace spark::kernels::detail {

// head_dim 64 or 128 and at most 16 query heads per KV head (what the split planner checks).
bool DecodeMmaShapeSupported(const PagedKvLayout& layout);
// That shape, and q, the caches and out 16-byte aligned.
bool DecodeMmaSupports(const PagedKvLayout& layout, const void* q, const void* k_cache,
                       const void* v_cache, const void* out);

// Writes out directly when plan.splits == 1, else the split partials of `workspace` in the
// layout the CUDA-core kernel's combine pass reads (attention_decode.cu runs that pass).
template <typename T>
Status PagedDecodeAttentionMma(const T* q, const DecodeRows& rows, const __nv_bfloat16* k_cache,
                               const __nv_bfloat16* v_cache, const PagedKvLayout& layout,
                               const DecodeSplit& plan, float* workspace, T* out,
                               cudaStream_t stream);

}  // namespace spark::kernels::detail
