// Backend: the compute operations a model forward needs, over buffers in the backend's memory
// (host memory for the CPU backend, device memory for the CUDA backend). The values the ops take
// are in backend_types.h.
//
// Shapes are row-major; a "row" is one token. Small integer inputs (token ids, positions, KV
// slots, block tables) are passed as host spans; a device backend copies them itself. Every op
// is a plain function of its inputs, so each has a CPU reference to test a device version
// against (the llm.c pattern), and every op has done all of its work when the next op starts:
// a backend keeps no work pending between calls. Fusions are ops of their own that the model
// calls by name (AddRmsNorm, LinearAddRmsNorm, AllReduceAddRmsNorm, ...); their defaults run
// the plain ops in turn, so a backend without the fusion gives the same results. Ops do not fail
// once their inputs are valid; the model layer validates batches before calling them.
// Thread-safety: a Backend runs one op at a time (the rank's engine thread calls it); the CPU
// backend parallelises inside each op.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend_types.h"
#include "comm/communicator.h"

namespace spark::engine::backend {

class DeepseekOps;  // deepseek_ops.h

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  // The first error an op met (ops return nothing; a device backend keeps it). Ok by default.
  virtual Status status() const { return Status::Ok(); }

  // --- Memory and transfers.
  // ResourceExhausted when the memory is not there.
  virtual Result<Buffer> Allocate(size_t count) = 0;
  // Bytes of backend memory in live buffers (weights, KV cache, workspace), as allocated: what
  // memory accounting is checked against.
  virtual size_t bytes_in_use() const = 0;
  virtual void Upload(std::span<const float> host, float* dst) = 0;
  virtual void Download(const float* src, std::span<float> host) = 0;
  // Weight storage of `count` elements of `dtype` and its upload from fp32 host values (bf16:
  // rounded to nearest even). The defaults serve fp32 only; InvalidArgument for other types
  // (and for fp8, which needs AllocateMatrix).
  virtual Result<Buffer> AllocateWeights(size_t count, DType dtype);
  virtual void UploadWeights(std::span<const float> host, Buffer& dst);
  // Whether this backend keeps Linear weights of `dtype` (AllocateMatrix). Default: fp32 only.
  virtual bool HoldsWeights(DType dtype) const { return dtype == DType::kF32; }
  // A Linear weight [rows, cols] of `dtype`: AllocateWeights, or for fp8 the values and their
  // block scales (see DType) in memory from Allocate, or for the quantised types their bytes
  // (AllocateWeights of MatrixBytes, filled by UploadWeightBytes). InvalidArgument when this
  // backend keeps no `dtype` weights.
  Result<Buffer> AllocateMatrix(int64_t rows, int64_t cols, DType dtype);
  // Uploads fp32 host values [rows, cols] into a matrix from AllocateMatrix; fp8 matrices are
  // quantised per block (core::QuantizeFp8Blocks: scale = block max / 448, values rounded to
  // nearest even).
  void UploadMatrix(std::span<const float> host, int64_t cols, Buffer& dst);
  // Uploads E4M3 bytes [rows, cols] and their block scales into an fp8 matrix (through Upload).
  void UploadFp8Matrix(std::span<const uint8_t> values, std::span<const float> scales, Buffer& dst);
  // Weights straight from a checkpoint's bytes when it stores them in the buffer's type (no fp32
  // round trip): `rows` rows of `row_bytes` bytes, `src_stride` bytes apart (a column slice), or
  // one run when rows is 1. UploadWeightBytes copies them, packed, into `dst` from byte
  // `dst_offset`; the source may be released when it returns, but the copy may still be in
  // flight until FinishWeightUploads. InvalidArgument when the bytes do not fit `dst`;
  // Unimplemented when this backend takes no raw weights (the loader converts through fp32).
  // With `fd` >= 0 the same bytes may be read from that file at `file_offset` (the offset of
  // src) instead of through the mapping. `widen_bf16`: the bytes are bf16 and `dst` is fp32;
  // each element widens exactly (dst_offset and the fit count the fp32 bytes).
  struct WeightBytes {
    const uint8_t* src = nullptr;
    size_t rows = 1;
    size_t row_bytes = 0;
    size_t src_stride = 0;
    int fd = -1;
    uint64_t file_offset = 0;
    bool widen_bf16 = false;
    size_t size() const { return rows * row_bytes; }
    size_t dst_size() const { return widen_bf16 ? 2 * size() : size(); }
  };
  virtual Status UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset);
  virtual Status FinishWeightUploads() { return status(); }
  // Whether a Linear of `rows` rows over `weights` weights runs faster from a bf16 copy of its
  // input that the op before wrote (Output::bf16) than from the fp32 values alone. The model
  // allocates the copies where this says so. Default: never.
  virtual bool Bf16InputsPay(int64_t rows, DType weights) const {
    (void)rows, (void)weights;
    return false;
  }

  // --- Graph steps and steps that run ahead of the host.
  // Asks to run the coming decode step (its ops up to the next Download) as a captured graph
  // under `key`, with block tables padded to `table_blocks`; false when this backend does not
  // do graphs (the step runs as usual). See CudaBackend::BeginGraph for what a step may hold.
  virtual bool BeginDecodeGraph(const std::string& key, int table_blocks) {
    (void)key, (void)table_blocks;
    return false;
  }
  // Drops a graph step that failed before its Download (nothing of it runs). No-op otherwise.
  virtual void CancelDecodeGraph() {}
  // Model::LaunchArgMax. DownloadLater is Download without the wait: it ends the step as
  // Download does and queues `count` floats of `src` for TakeDownload, which waits for the
  // oldest queued download and copies it into `host` (InvalidArgument unless host.size() is
  // its count; FailedPrecondition when none is queued). At most kMaxDownloadsLater queued
  // (FailedPrecondition). The default downloads at once; a graph backend launches the step and
  // lets the host go on to stage the next.
  static constexpr size_t kMaxDownloadsLater = 2;
  virtual Status DownloadLater(const float* src, size_t count);
  virtual Status TakeDownload(std::span<float> host);

  // --- Plain ops.
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
                       Output out) = 0;
  // out[rows, out_features] = x[rows, in_features] * w[out_features, in_features]^T, fp32
  // accumulation whatever w's type.
  virtual void Linear(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                      float* out) = 0;
  // out[r] = {max of x[r, 0..cols), index_offset + the first column holding it}, both as
  // floats ([rows, 2]; ids below 2^24 are exact) — greedy decoding without moving logits, and
  // mergeable across vocabulary-parallel ranks (MergeArgMax). The value is NaN when the row
  // holds a NaN (a broken forward must not pass as a token).
  virtual void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) = 0;
  // Rotates x [tokens, heads, head_dim] in place by each token's position: pairs (i, i + d/2)
  // (the "rotate half" layout), frequency theta^(-2i/d).
  virtual void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                    double theta) = 0;
  // x[i] += y[i].
  virtual void Add(float* x, const float* y, size_t count) = 0;
  // out[r, i] = silu(gate_up[r, i]) * gate_up[r, inter + i].
  virtual void SiluMul(const float* gate_up, int64_t rows, int inter, Output out) = 0;
  // Rows of src [rows, sum of the widths] cut into the parts' [rows, width] in order.
  virtual void SplitColumns(const float* src, int64_t rows, std::span<const ColumnSlice> parts) = 0;
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

  // --- Fused ops: each does in one call what its default does with the ops above, in order.
  // Linear of one input through several weights (q, k and v as three matrices).
  virtual void LinearMany(Input x, int64_t rows, int in_features, std::span<const LinearOut> outs);
  // act[rows, inter] = SiLU(x w_gate^T) * (x w_up^T) for the stacked w = [gate; up] ([2 inter,
  // in_features]): Linear into `gate_up` [rows, 2 inter] (scratch; a fused implementation may
  // leave it untouched), then SiluMul.
  virtual void LinearSiluMul(Input x, int64_t rows, int in_features, WeightRef w, int inter,
                             float* gate_up, Output act);
  // h += delta, then out = RmsNorm(h) (the residual add before a pre-norm block).
  virtual void AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                          float eps, Output out);
  // h += x w^T ([rows, out_features]): an output projection added into the residual stream of
  // one rank. The default runs Linear into `scratch` [rows, out_features], then Add; an
  // implementation may add as it computes (scratch untouched).
  virtual void LinearAdd(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                         float* scratch, float* h);
  // LinearAdd, then out = RmsNorm(h) with `norm` (the next sublayer's input norm). The default
  // runs Linear into `scratch`, then AddRmsNorm.
  virtual void LinearAddRmsNorm(Input x, int64_t rows, int in_features, WeightRef w,
                                int out_features, float* scratch, float* h, const float* norm,
                                float eps, Output out);
  // delta summed over the ranks of `comm` (in place; comm may be null: one rank), then
  // AddRmsNorm: the all-reduce after a row-parallel projection and the residual add and norm
  // after it. The default runs comm->AllReduceSum, then AddRmsNorm. Returns the communicator's
  // errors (Unavailable, DeadlineExceeded when a peer fails).
  virtual Status AllReduceAddRmsNorm(comm::Communicator* comm, float* h, float* delta,
                                     const float* weight, int64_t rows, int dim, float eps,
                                     Output out);
  // HeadNormRope of q and of k (in place; with a.qkv, from the stacked rows: the default runs
  // SplitColumns into q, k and v first), then WriteKv of k and v at `slots`.
  virtual void QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                                 std::span<const int64_t> slots);
  // Per-head RmsNorm of x [tokens, heads, head_dim] with weight [head_dim], then Rope.
  virtual void HeadNormRope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                            const float* weight, float eps, double theta);

  // --- DeepSeek-V4's ops (deepseek_ops.h), owned by the backend; null when it has none, and
  // the model refuses such a backend.
  virtual DeepseekOps* deepseek_ops() { return nullptr; }

 private:
  std::deque<std::vector<float>> downloaded_later_;  // the default DownloadLater's queue
};

// For UploadWeightBytes overrides: InvalidArgument unless `src` fits `dst` (not fp8) from byte
// `offset` and its rows do not overlap.
Status CheckWeightBytesFit(const Backend::WeightBytes& src, const Buffer& dst, size_t offset);

// Backend::ArgMax's pairs computed on the host (the CPU backend's ArgMax, and the default
// Model::ForwardArgMax over downloaded logits).
void ArgMaxRows(const float* x, int64_t rows, int cols, int64_t index_offset, float* out);

// Merges the ArgMax pairs of `parts` vocabulary slices laid out [parts, rows, 2] (rank order =
// id order) into one id per row: the larger value wins, ties go to the lower id. Internal,
// naming the row, when a value is NaN or +inf (the forward pass broke: no token is picked).
Result<std::vector<int32_t>> MergeArgMax(std::span<const float> pairs, int parts, int64_t rows);

}  // namespace spark::engine::backend
