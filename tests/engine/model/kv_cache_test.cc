// PagedKvCache on the CPU backend: per-layer K and V of the spec's element type, the bytes a
// token costs, and refusal of empty shapes.
#include "engine/model/kv_cache.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "engine/backend/cpu/cpu_backend.h"

namespace spark::engine::model {
namespace {

using backend::DType;

TEST(PagedKvCacheTest, Bf16CacheHoldsHalfTheBytesPerToken) {
  const KvCacheSpec fp32{3, 32, DType::kF32}, bf16{3, 32, DType::kBF16};
  EXPECT_EQ(fp32.bytes_per_token(), 2 * 3 * 32 * 4);
  EXPECT_EQ(bf16.bytes_per_token(), 2 * 3 * 32 * 2);
}

TEST(PagedKvCacheTest, LayersCarryTheCacheTypeAndDistinctMemory) {
  backend::cpu::CpuBackend backend(1);
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(backend::DTypeName(dtype));
    auto cache = PagedKvCache::Create(backend, {2, 16, dtype}, 4, 8);
    ASSERT_TRUE(cache.ok()) << cache.status().message();
    const backend::KvCacheRef l0 = cache->layer(0), l1 = cache->layer(1);
    EXPECT_EQ(l0.dtype, dtype);
    EXPECT_NE(l0.k, l0.v);
    EXPECT_NE(l0.k, l1.k);
    // The last element of a layer's K is writable without touching its V (4 blocks x 8 slots
    // x 16 elements of the type).
    const size_t bytes = size_t{4} * 8 * 16 * backend::DTypeBytes(dtype);
    auto* k = static_cast<unsigned char*>(l0.k);
    auto* v = static_cast<unsigned char*>(l0.v);
    std::fill(v, v + bytes, 0);
    std::fill(k, k + bytes, 0xAB);
    EXPECT_EQ(v[0], 0);
    EXPECT_EQ(v[bytes - 1], 0);
  }
}

TEST(PagedKvCacheTest, RefusesEmptyShapes) {
  backend::cpu::CpuBackend backend(1);
  EXPECT_FALSE(PagedKvCache::Create(backend, {2, 16, DType::kBF16}, 0, 8).ok());
  EXPECT_FALSE(PagedKvCache::Create(backend, {0, 16, DType::kF32}, 4, 8).ok());
}

}  // namespace
}  // namespace spark::engine::model
