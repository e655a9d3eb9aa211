// The tensor-core prefill attention kernel behind PagedPrefillAttention (attention.h), which
// picks it when the layout asks for bf16 tensor cores and these conditions hold.
#pragma once

#include "kernels/attention.h"

namespace spark::kernels::detail {

// head_dim 64 or 128 and every data pointer 16-byte aligned.
bool PrefillMmaSupports(const PagedKvLayout& layout, const void* q, const void* k_cache,
                        const void* v_cache, const void* out);

template <typename T, typename C>
Status PagedPrefillAttentionMma(const T* q, const PrefillTile* tiles, int num_tiles,
                                const int32_t* block_tables, const C* k_cache, const C* v_cache,
                                const PagedKvLayout& layout, T* out, cudaStream_t stream);

}  // namespace spark::kernels::detail
