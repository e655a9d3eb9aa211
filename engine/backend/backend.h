// Backend: the compute operations a model forward needs, over fp32 buffers in the backend's
// memory (host memory for the CPU backend, device memory for a CUDA backend later).
//
// Shapes are row-major; a "row" is one token. Small integer inputs (token ids, positions, KV
// slots, block tables) are passed as host spans; a device backend copies them itself. Every op
// is a plain function of its inputs, so each has a CPU reference to test a device version
// against (the llm.c pattern). Ops do not fail once their inputs are valid; the model layer
// validates batches before calling them.
// Thread-safety: a Backend runs one op at a time (the rank's engine thread calls it); the CPU
// backend parallelises inside each op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::engine::backend {

class DeepseekOps;  // deepseek_ops.h

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
enum class DType : uint8_t { kF32, kBF16, kFP8 };
size_t DTypeBytes(DType dtype);
const char* DTypeName(DType dtype);  // "fp32", "bf16", "fp8"
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

// A read-only weight matrix in backend memory and its element type. fp32 pointers convert
// implicitly, so call sites with fp32 weights need no change.
struct WeightRef {
  const void* data = nullptr;
  DType dtype = DType::kF32;
  WeightRef() = default;
  WeightRef(const float* p) : data(p) {}  // NOLINT(google-explicit-constructor)
  WeightRef(const void* p, DType t) : data(p), dtype(t) {}
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
  const float* v = nullptr;
  int heads = 0, kv_heads = 0, head_dim = 0;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  double theta = 10000.0;
  KvCacheRef cache;
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

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // The first error an op met (ops return nothing; a device backend keeps it). Ok by default.
  virtual Status status() const { return Status::Ok(); }
  // Asks to run the coming decode step (its ops up to the next Download) as a captured graph
  // under `key`, with block tables padded to `table_blocks`; false when this backend does not
  // do graphs (the step runs as usual). See CudaBackend::BeginGraph for what a step may hold.
  virtual bool BeginDecodeGraph(const std::string& key, int table_blocks) {
    (void)key;
    (void)table_blocks;
    return false;
  }
  // Drops a graph step that failed before its Download (nothing of it runs). No-op otherwise.
  virtual void CancelDecodeGraph() {}

  // ResourceExhausted when the memory is not there.
  virtual Result<Buffer> Allocate(size_t count) = 0;
  virtual void Upload(std::span<const float> host, float* dst) = 0;
  virtual void Download(const float* src, std::span<float> host) = 0;
  // Steps that run ahead of the host (Model::LaunchArgMax). DownloadLater is Download without
  // the wait: it ends the step as Download does and queues `count` floats of `src` for
  // TakeDownload, which waits for the oldest queued download and copies it into `host`
  // (InvalidArgument unless host.size() is its count; FailedPrecondition when none is queued).
  // At most kMaxDownloadsLater queued (FailedPrecondition). The default downloads at once; a
  // graph backend launches the step and lets the host go on to stage the next.
  static constexpr size_t kMaxDownloadsLater = 2;
  virtual Status DownloadLater(const float* src, size_t count);
  virtual Status TakeDownload(std::span<float> host);
  // Weight storage of `count` elements of `dtype` and its upload from fp32 host values (bf16:
  // rounded to nearest even). The defaults serve fp32 only; InvalidArgument for other types
  // (and for fp8, which needs AllocateMatrix).
  virtual Result<Buffer> AllocateWeights(size_t count, DType dtype);
  virtual void UploadWeights(std::span<const float> host, Buffer& dst);
  // A Linear weight [rows, cols] of `dtype`: AllocateWeights, or for fp8 the values and their
  // block scales (see DType) in memory from Allocate. InvalidArgument when this backend keeps
  // no `dtype` weights.
  Result<Buffer> AllocateMatrix(int64_t rows, int64_t cols, DType dtype);
  // Uploads fp32 host values [rows, cols] into a matrix from AllocateMatrix; fp8 matrices are
  // quantised per block (core::QuantizeFp8Blocks: scale = block max / 448, values rounded to
  // nearest even).
  void UploadMatrix(std::span<const float> host, int64_t cols, Buffer& dst);
  // Uploads E4M3 bytes [rows, cols] and their block scales into an fp8 matrix (through Upload).
  void UploadFp8Matrix(std::span<const uint8_t> values, std::span<const float> scales, Buffer& dst);

  // out[t] = table[ids[t] - row_begin] when the id is in [row_begin, row_begin + rows), else 0
  // (vocabulary-parallel embedding: the all-reduce afterwards fills in the other ranks' rows).
  virtual void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                         std::span<const int32_t> ids, float* out) = 0;
  // The same for the ids that ArgMax pairs in backend memory choose: pairs [parts][tokens][2]
  // of (value, id) per vocabulary part, merged as MergeArgMax does. The default downloads them
  // (ending a graph step: graph backends override it) and, when a row holds NaN or +inf, embeds
  // id 0 for every row; the host sees the error when it merges the same pairs.
  virtual void EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                                 const float* pairs, int parts, int64_t tokens, float* out);
  // out[r] = x[r] / sqrt(mean(x[r]^2) + eps) * weight, for `rows` rows of `dim`; out may be x.
  virtual void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
                       float* out) = 0;
  // out[rows, out_features] = x[rows, in_features] * w[out_features, in_features]^T, fp32
  // accumulation whatever w's type.
  virtual void Linear(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
                      float* out) = 0;
  // out[r] = {max of x[r, 0..cols), index_offset + the first column holding it}, both as
  // floats ([rows, 2]; ids below 2^24 are exact) — greedy decoding without moving logits, and
  // mergeable across vocabulary-parallel ranks (MergeArgMax). The value is NaN when the row
  // holds a NaN (a broken forward must not pass as a token).
  virtual void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) = 0;

  // Fusions a backend may do in one pass; the defaults call the ops above in turn, so results
  // agree with them (to fp32 rounding).
  // Linear of one input through several weights (q, k and v).
  virtual void LinearMany(const float* x, int64_t rows, int in_features,
                          std::span<const LinearOut> outs);
  // act[rows, inter] = SiLU(x w_gate^T) * (x w_up^T) for the stacked w = [gate; up] ([2 inter,
  // in_features]): Linear into `gate_up` [rows, 2 inter] (scratch; a fused implementation may
  // leave it untouched), then SiluMul.
  virtual void LinearSiluMul(const float* x, int64_t rows, int in_features, WeightRef w, int inter,
                             float* gate_up, float* act);
  // h += delta, then out = RmsNorm(h) (the residual add before a pre-norm block).
  virtual void AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                          float eps, float* out);
  // h += x w^T ([rows, out_features]): an output projection added into the residual stream of
  // one rank (no all-reduce between them). The default runs Linear into `scratch` [rows,
  // out_features], then Add; an implementation may add as it computes (scratch untouched), or
  // leave the add for its next op (an RmsNorm of h then folds it into its norm), so h and scratch
  // must stay allocated until the next op call.
  virtual void LinearAdd(const float* x, int64_t rows, int in_features, WeightRef w,
                         int out_features, float* scratch, float* h);
  // HeadNormRope of q and of k (in place), then WriteKv of k and v at `slots`.
  virtual void QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                                 std::span<const int64_t> slots);
  // Per-head RmsNorm of x [tokens, heads, head_dim] with weight [head_dim], then Rope.
  virtual void HeadNormRope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                            const float* weight, float eps, double theta);
  // Rotates x [tokens, heads, head_dim] in place by each token's position: pairs (i, i + d/2)
  // (the "rotate half" layout), frequency theta^(-2i/d).
  virtual void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                    double theta) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, size_t count) = 0;
  // out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i].
  virtual void SiluMul(const float* gate_up, int64_t rows, int inter, float* out) = 0;

  // Stores k and v rows [tokens, kv_width] at cache slots (slot * kv_width).
  virtual void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
                       const KvCacheRef& cache) = 0;
  // Causal attention of each sequence's new tokens over its cached context; q and out are
  // [tokens, num_heads * head_dim]. Query i of a sequence sits at position
  // context_len - query_len + i and sees cache positions <= its own.
  virtual void PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                              const KvCacheRef& cache, const AttentionShape& shape, float* out) = 0;

  // out[rows, hidden] = sum over the top-k experts (softmax of router_logits) held by this rank
  // of weight * down(silu(gate) * up)(x).
  virtual void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
                   const MoeExperts& experts, float* out) = 0;

  // DeepSeek-V4's ops (deepseek_ops.h), owned by the backend; null when it has none, and the
  // model refuses such a backend.
  virtual DeepseekOps* deepseek_ops() { return nullptr; }

 private:
  std::deque<std::vector<float>> downloaded_later_;  // the default DownloadLater's queue
};

// Backend::ArgMax's pairs computed on the host (the CPU backend's ArgMax, and the default
// Model::ForwardArgMax over downloaded logits).
void ArgMaxRows(const float* x, int64_t rows, int cols, int64_t index_offset, float* out);

// Merges the ArgMax pairs of `parts` vocabulary slices laid out [parts, rows, 2] (rank order =
// id order) into one id per row: the larger value wins, ties go to the lower id. Internal,
// naming the row, when a value is NaN or +inf (the forward pass broke: no token is picked).
Result<std::vector<int32_t>> MergeArgMax(std::span<const float> pairs, int parts, int64_t rows);

}  // namespace spark::engine::backend
