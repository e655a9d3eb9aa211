// The values Backend ops take: element types, buffers in backend memory and their views, the
// activations ops read and write (with an optional bf16 copy), and the argument structs of the
// attention, KV-cache and MoE ops.
// Thread-safety: plain values (a Buffer is owned by one thread).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::engine::backend {

// Element type of a weight matrix or a KV cache in backend memory. Activations and norms are
// fp32; Linear weights and the KV cache may be kept in bf16 (half the bytes a step streams), and
// Linear weights in fp8 (a quarter; see below).
//
// fp8: E4M3 values with one fp32 scale per block of kFp8Block x kFp8Block (rows x columns) —
// DeepSeek's and Qwen3-FP8's checkpoint format; an element is its E4M3 value times its block's
// scale. A [rows, cols] fp8 matrix is one buffer of rows * cols elements (bytes) followed, from
// byte Fp8ScaleOffset(rows * cols), by Fp8ScaleCount(rows, cols) fp32 scales [ceil(rows / 128),
// ceil(cols / 128)] row-major. Only AllocateMatrix makes one (the scales need the shape), and an
// fp8 buffer has no views.
//
// kE4M3B32 and kE2M1B32 hold DeepSeek's released weights as they are stored (decoded in the
// kernels, never widened in memory): E4M3 bytes [rows, cols] with a UE8M0 scale byte (2^(e -
// 127)) per 32 x 32 block, or E2M1 nibbles packed two per byte [rows, cols / 2] (the even column
// in the low nibble) with a UE8M0 byte per 1 x 32 block. A matrix is one buffer of bytes: the
// codes, then from QuantScaleOffset the scales ([ceil(rows / 32), ceil(cols / 32)] or [rows,
// ceil(cols / 32)] row-major). Only AllocateMatrix makes them, on backends whose HoldsWeights
// says so; their Buffer::size() counts bytes.
enum class DType : uint8_t { kF32, kBF16, kFP8, kE4M3B32, kE2M1B32 };
size_t DTypeBytes(DType dtype);      // 1 for the byte-counted quantised types
const char* DTypeName(DType dtype);  // "fp32", "bf16", "fp8", "fp8_e4m3_b32", "fp4_e2m1_b32"
// "fp32"/"f32"/"float32", "bf16"/"bfloat16" or "fp8"/"fp8_e4m3"; InvalidArgument naming the
// choices otherwise.
Result<DType> ParseDType(const std::string& text);
// The element type of the KV cache that goes with weights of `weights` (fp8 weights: bf16).
DType KvDTypeFor(DType weights);

constexpr int64_t kFp8Block = 128;
inline int64_t Fp8ScaleCount(int64_t rows, int64_t cols) {
  return ((rows + kFp8Block - 1) / kFp8Block) * ((cols + kFp8Block - 1) / kFp8Block);
}
inline size_t Fp8ScaleOffset(size_t values) { return (values + 255) / 256 * 256; }
// The scales of an fp8 matrix of `values` elements starting at `data`.
inline const float* Fp8Scales(const void* data, size_t values) {
  return reinterpret_cast<const float*>(static_cast<const char*>(data) + Fp8ScaleOffset(values));
}
inline float* Fp8Scales(void* data, size_t values) {
  return reinterpret_cast<float*>(static_cast<char*>(data) + Fp8ScaleOffset(values));
}

// Bytes of backend memory a [rows, cols] matrix of `dtype` takes (AllocateMatrix): fp8 and the
// quantised types count their values, padding and block scales.
size_t MatrixBytes(int64_t rows, int64_t cols, DType dtype);

// The byte layout of a kE4M3B32 / kE2M1B32 matrix [rows, cols].
constexpr int64_t kQuantBlock = 32;
inline bool IsQuantised(DType dtype) {
  return dtype == DType::kE4M3B32 || dtype == DType::kE2M1B32;
}
inline size_t QuantCodeBytes(DType dtype, int64_t rows, int64_t cols) {
  const size_t values = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  return dtype == DType::kE2M1B32 ? values / 2 : values;
}
inline size_t QuantScaleBytes(DType dtype, int64_t rows, int64_t cols) {
  const int64_t col_blocks = (cols + kQuantBlock - 1) / kQuantBlock;
  const int64_t row_blocks = dtype == DType::kE2M1B32 ? rows : (rows + kQuantBlock - 1) / kQuantBlock;
  return static_cast<size_t>(row_blocks * col_blocks);
}
inline size_t QuantScaleOffset(DType dtype, int64_t rows, int64_t cols) {
  return (QuantCodeBytes(dtype, rows, cols) + 255) / 256 * 256;
}

// A read-only weight matrix in backend memory and its element type. fp32 pointers convert
// implicitly, so call sites with fp32 weights need no change.
struct WeightRef {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  WeightRef() = default;
  WeightRef(const float* p) : data(p) {}  // NOLINT(google-explicit-constructor)
  WeightRef(const void* p, DType t) : data(p), dtype(t) {}
};

// An activation an op writes: fp32 `data`, and when `bf16` is set also the same values rounded to
// bf16 (nearest even) beside it, for a Linear over bf16 or fp8 weights to read instead of
// casting (Backend::Bf16InputsPay says when that pays). fp32 pointers convert implicitly.
struct Output {
  float* data = nullptr;
  void* bf16 = nullptr;  // [same elements] bf16, or null
  Output(float* p) : data(p) {}  // NOLINT(google-explicit-constructor)
  Output(float* p, void* copy) : data(p), bf16(copy) {}
};

// An activation an op reads: fp32 `data`, and the bf16 copy an op wrote with it, if any (a
// backend may read either: they hold the same values up to the rounding).
struct Input {
  const float* data = nullptr;
  const void* bf16 = nullptr;
  Input(const float* p) : data(p) {}  // NOLINT(google-explicit-constructor)
  Input(const Output& o) : data(o.data), bf16(o.bf16) {}  // NOLINT(google-explicit-constructor)
};

// A move-only block of `size` elements (fp32 unless made by AllocateWeights) in backend memory.
class Buffer {
 public:
  Buffer() = default;
  Buffer(float* data, size_t size, std::function<void(float*)> release)
      : data_(data), size_(size), release_(std::move(release)) {}
  Buffer(void* data, size_t size, DType dtype, std::function<void(float*)> release)
      : data_(static_cast<float*>(data)),
        size_(size),
        dtype_(dtype),
        release_(std::move(release)) {}
  ~Buffer() { Reset(); }
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  // The fp32 elements (only for fp32 buffers; raw() for any type).
  float* data() { return data_; }
  const float* data() const { return data_; }
  void* raw() { return data_; }
  const void* raw() const { return data_; }
  size_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  bool empty() const { return size_ == 0; }
  WeightRef weight() const { return {data_, dtype_}; }
  // Elements [offset, offset + count) as a buffer that does not own them: valid while this one
  // lives (moving this one does not move the memory).
  Buffer View(size_t offset, size_t count) const;

 private:
  void Reset();
  float* data_ = nullptr;
  size_t size_ = 0;
  DType dtype_ = DType::kF32;
  std::function<void(float*)> release_;
};

// One layer's KV cache in backend memory: K and V, [slot, kv_width] each, of element type
// `dtype` (bf16 values are rounded to nearest even when written). fp32 pointers convert
// implicitly.
struct KvCacheRef {
  void* k = nullptr;
  void* v = nullptr;
  DType dtype = DType::kF32;
  KvCacheRef() = default;
  KvCacheRef(float* k_cache, float* v_cache)  // NOLINT(google-explicit-constructor)
      : k(k_cache), v(v_cache) {}
  KvCacheRef(void* k_cache, void* v_cache, DType t) : k(k_cache), v(v_cache), dtype(t) {}
};

// One sequence of a paged-attention call: its new tokens are rows [query_start, query_start +
// query_len) of q; its KV cache holds context_len tokens (earlier ones plus the new ones, which
// are the last query_len), token j at slot block_table[j / block_size] * block_size + j %
// block_size.
struct AttentionSequence {
  int64_t query_start = 0;
  int64_t query_len = 0;
  int64_t context_len = 0;
  std::span<const int32_t> block_table;
};

struct AttentionShape {
  int num_heads = 0;     // query heads held by this rank
  int num_kv_heads = 0;  // KV heads held by this rank; num_heads % num_kv_heads == 0
  int head_dim = 0;
  int block_size = 0;  // tokens per KV block
  float scale = 1.0f;  // softmax scale, usually head_dim^-0.5
};

// Qwen3's attention inputs of one layer for QkNormRopeWriteKv (backend memory): q [tokens,
// heads, head_dim] and k [tokens, kv_heads, head_dim] with their per-head norm weights, v, and
// the layer's KV cache.
struct QkvToCache {
  float* q = nullptr;
  float* k = nullptr;
  float* v = nullptr;
  // When set, q, k and v are read from this one stacked buffer instead ([tokens, qkv_stride]:
  // the heads' q, then the KV heads' k, then v, as one Linear over stacked weights writes them),
  // and q, k and v above receive them as well (q and k normed and roped).
  const float* qkv = nullptr;
  int64_t qkv_stride = 0;
  int heads = 0, kv_heads = 0, head_dim = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  double theta = 10000.0;
  KvCacheRef cache;
};

// One part of SplitColumns: `width` columns into out [rows, width].
struct ColumnSlice {
  float* out = nullptr;
  int width = 0;
};

// One output of LinearMany.
struct LinearOut {
  WeightRef w;
  int out_features = 0;
  float* out = nullptr;
};

// The routed experts of one MoE layer held by this rank. Expert e (global id) is local when
// expert_begin <= e < expert_begin + gate_up.size(); other experts contribute nothing here (their
// rank adds them in the all-reduce). gate_up[i] is [2 * intermediate, hidden] (gate rows then up
// rows), down[i] is [hidden, intermediate], in any weight type.
struct MoeExperts {
  int num_experts = 0;  // global count, the router's width
  int top_k = 0;
  bool norm_topk_prob = false;
  int intermediate = 0;  // per expert, on this rank
  int expert_begin = 0;
  std::vector<WeightRef> gate_up;
  std::vector<WeightRef> down;
};

}  // namespace spark::engine::backend
