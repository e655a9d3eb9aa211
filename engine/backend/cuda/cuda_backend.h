// CudaBackend: the Backend interface on one CUDA device, over the kernels in kernels/ and
// cuBLASLt GEMMs. Buffers are fp32 device memory from a caching allocator; every op is enqueued
// on the backend's one stream, so ops run in call order without host synchronisation. The
// small host spans an op takes (token ids, positions, slots, block tables) are copied through a
// pinned staging area, once per step when several ops pass the same span (every layer passes
// the batch's positions and block tables); Download synchronises the stream (with a deadline).
// Collectives (StreamOrderedCommunicator over NCCL) are enqueued on the same stream.
//
// Weights may be fp32 or bf16 (AllocateWeights) or fp8 (AllocateMatrix); bf16 and fp8 Linear
// run a GEMV kernel for up to kGemvMaxRows rows (decode) and a tensor-core GEMM otherwise: bf16
// over the rounded activations, or for fp8 weights cuBLASLt's block-scaled FP8 GEMM over the
// activations quantised per 1 x 128 block where it exists (Hopper; k a multiple of 512, n of
// 128), else bf16 over the weights widened into scratch.
//
// CUDA graphs (decode): BeginGraph(key, table_blocks) starts a graph step. The first step with a
// key captures everything the model enqueues; later steps with that key run the model's op
// calls only for their host side — each op stages its host inputs (ids, positions, slots,
// block tables) into the same pinned staging offsets and launches nothing — and the captured
// graph replays with them. The step ends at the next Download (the graph's one output), which
// launches the graph, waits and copies the result. Workspace inside a step comes from a graph
// arena, so the same key must mean the same op sequence and sizes: the key names the batch
// shape, and every block table is padded to table_blocks blocks (the decode split is planned
// for table_blocks * block_size tokens). Only decode rows (query_len 1), no MoE, and of the
// collectives only the peer all-reduce (StreamOrderedCommunicator refuses NCCL ones there).
//
// Ops cannot return errors through the Backend interface: the first CUDA or cuBLAS error is
// logged and kept, status() returns it, and Download fails loudly (logs) from then on.
// Accuracy: fp32 throughout (GEMMs in exact fp32 unless allow_tf32); matches CpuBackend to
// about 1e-5 relative on the fixtures. With bf16_attention, prefill attention (and decode
// attention over a bf16 KV cache) runs on bf16 tensor cores (Q, K, V and probabilities rounded
// to bf16, ~3e-3 relative).
// bf16 GEMM inputs: a Linear over bf16 weights with more rows than the GEMV serves rounds its
// fp32 input to bf16. When the backend holds bf16 weights, RmsNorm, AddRmsNorm and SiluMul
// write that rounded copy beside their fp32 output, and the next op, when it is a Linear of
// exactly that output, takes the copy instead of casting (same bits, one launch and one pass
// over the activations fewer). Every other op drops the copy first, so no stale one is used.
// Likewise a LinearMany over stacked weights (one GEMM, then each output's columns) leaves the
// column split pending: a QkNormRopeWriteKv of exactly those q, k and v outputs reads the
// stacked rows itself and writes the outputs, and every other op runs the split first. Both
// rest on those buffers being touched only through this backend's ops in between: a
// communicator reading or writing them directly would see neither (the models all-reduce layer
// outputs and embeddings only). A LinearAdd through a tensor-core GEMM leaves its add into the
// residual pending the same way: an RmsNorm of exactly that residual next folds it into
// AddRmsNorm's one kernel, and every other op runs it first. (Through the GEMV the add happens
// as each sum is stored.) The peer all-reduce of tensor-parallel ranks on one host
// (DeferPeerAllReduce, from StreamOrderedCommunicator) is left pending too: an AddRmsNorm whose
// delta is exactly the reduced tensor next runs the sum, the add and the norm as one kernel
// (kernels::PeerAllReduceAddRmsNorm, bit-identical to the two), and every other op runs the sum
// first.
// Thread-safety: one op at a time (see Backend); the calling thread may change between ops.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/device_allocator.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/peer_all_reduce.h"

namespace spark::engine::backend::cuda {

class CudaBackend : public Backend {
 public:
  struct Options {
    int device = 0;           // CUDA device ordinal
    bool allow_tf32 = false;  // fp32 GEMMs on TF32 tensor cores (faster, ~1e-3 error)
    // Prefill attention, and decode attention over a bf16 KV cache, on bf16 tensor cores (far
    // faster; head_dim 64 and 128).
    bool bf16_attention = false;
    // How long Download/Synchronize wait for the stream before DeadlineExceeded (a dead peer
    // rank leaves the collectives queued on it waiting).
    std::chrono::milliseconds step_timeout{60000};
    // Time every graph step with CUDA events (graph_step_times()); for benchmarks.
    bool time_graph_steps = false;
    // The peer all-reduce and the AddRmsNorm of its sum as one kernel (see above); off: two
    // kernels, for comparisons.
    bool fuse_all_reduce_norm = true;
  };

  // Graph steps timed so far (Options::time_graph_steps). gpu_ms: from the step's first work
  // on the stream (enqueued once the host has staged the step) to the graph's end. gap_ms:
  // from the end of the graph step before to that first work, where the GPU waits for the host
  // (noticing the end, the caller's own work, the next step's staging); counted only between
  // consecutive graph steps.
  struct GraphStepTimes {
    int64_t steps = 0, gaps = 0;
    double gpu_ms = 0, gap_ms = 0;
  };

  // Unavailable when the device does not exist (the message gives the count); Internal for
  // CUDA/cuBLAS start-up failures.
  static Result<std::unique_ptr<CudaBackend>> Create(const Options& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int device() const { return options_.device; }
  cudaStream_t stream() const { return stream_; }
  // The first error any op met (Ok if none).
  Status status() const override { return status_; }
  // BeginGraph; false (and the step runs eagerly) when it cannot start one.
  bool BeginDecodeGraph(const std::string& key, int table_blocks) override {
    return BeginGraph(key, table_blocks).ok();
  }
  void CancelDecodeGraph() override;
  // Waits for all enqueued work; returns status() or the stream's error.
  Status Synchronize();

  Result<Buffer> Allocate(size_t count) override;
  // The device allocator's live blocks (size classes; graph arenas and staging not counted).
  size_t bytes_in_use() const override { return allocator_.bytes_in_use(); }
  void Upload(std::span<const float> host, float* dst) override;
  void Download(const float* src, std::span<float> host) override;
  // In a graph step: launches the graph and returns; the host may stage and launch one more
  // step (its inputs and output take the other of two pinned host areas, so each key captures
  // up to two graphs) before TakeDownload waits for the first. Eager: downloads at once.
  Status DownloadLater(const float* src, size_t count) override;
  Status TakeDownload(std::span<float> host) override;
  Result<Buffer> AllocateWeights(size_t count, DType dtype) override;
  void UploadWeights(std::span<const float> host, Buffer& dst) override;

  void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                 std::span<const int32_t> ids, float* out) override;
  void EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                         const float* pairs, int parts, int64_t tokens, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
               float* out) override;
  void Linear(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
              float* out) override;
  void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) override;
  void LinearMany(const float* x, int64_t rows, int in_features,
                  std::span<const LinearOut> outs) override;
  void LinearSiluMul(const float* x, int64_t rows, int in_features, WeightRef w, int inter,
                     float* gate_up, float* act) override;
  void AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                  float eps, float* out) override;
  // cuda_backend_residual.cc
  void LinearAdd(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
                 float* scratch, float* h) override;
  void QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                         std::span<const int64_t> slots) override;
  void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
            double theta) override;
  void Add(float* x, const float* y, size_t count) override;
  void SiluMul(const float* gate_up, int64_t rows, int inter, float* out) override;
  void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
               const KvCacheRef& cache) override;
  void PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                      const KvCacheRef& cache, const AttentionShape& shape, float* out) override;
  void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
           const MoeExperts& experts, float* out) override;

  // Sums data[0, count) over the ranks of `args` (device memory of this backend, within the
  // region's capacity) after every op before, left pending for the next op (see above).
  // `args` must stay valid until the next op. Errors go to status().
  void DeferPeerAllReduce(const kernels::PeerAllReduceArgs* args, float* data, size_t count);
  // Enqueues whatever an op left pending, so that work put on stream() directly comes after it.
  void RunPending() { Activate(); }

  // Starts a graph step (see above). FailedPrecondition inside a step or after an error.
  Status BeginGraph(const std::string& key, int table_blocks);
  bool in_graph() const { return mode_ != Mode::kEager; }
  // False in a graph replay's host-only pass (work that would be launched is in the graph).
  bool launching() const { return mode_ != Mode::kReplay; }
  std::chrono::milliseconds step_timeout() const { return options_.step_timeout; }
  size_t graph_count() const { return graphs_.size(); }
  // How many AddRmsNorms took a pending peer all-reduce into their kernel (for tests).
  int64_t fused_reduce_norms() const { return fused_reduce_norms_; }
  const GraphStepTimes& graph_step_times() const { return step_times_; }
  // Zeroes the sums (the gap before the next step still counts from the last step's end).
  void ResetGraphStepTimes() { step_times_ = {}; }

 private:
  enum class Mode { kEager, kCapture, kReplay };
  explicit CudaBackend(const Options& options) : options_(options) {}
  // Copies host bytes to device scratch valid until the next Download/Synchronize.
  Result<void*> Stage(const void* host, size_t bytes);
  // Stage, reusing an earlier copy of this step when the same host bytes at the same address
  // were staged already (kept deterministic for graph replays: decided by address and size).
  Result<void*> StageShared(const void* host, size_t bytes);
  template <typename T>
  Result<const T*> Stage(std::span<const T> host) {
    SPARK_ASSIGN_OR_RETURN(void* p, StageShared(host.data(), host.size_bytes()));
    return static_cast<const T*>(p);
  }
  // Device memory of `bytes` as `dtype` elements, freed when the returned handle dies (from the
  // graph arena inside a graph step); not zeroed (the op overwrites it).
  Result<Buffer> Scratch(size_t bytes, DType dtype = DType::kF32);
  void Record(const Status& s);
  // Makes this backend's device current and runs a pending sum or add (DeferPeerAllReduce,
  // LinearAdd). Drops the bf16 copy unless the op is a Linear that may read it (keep_bf16_copy);
  // runs a pending column split unless the op may take it over (keep_split).
  void Activate(bool keep_bf16_copy = false, bool keep_split = false);
  // Enqueues the pending column split of LinearMany, if any, and forgets it.
  void RunPendingSplit();
  // A LinearAdd's add into the residual stream left for the next op (tensor-core shapes).
  struct PendingAdd {
    float* h = nullptr;  // nullptr: nothing pending
    const float* delta = nullptr;
    size_t count = 0;
  };
  // Enqueues the pending add, if any, and forgets it (Activate).
  void RunPendingAdd();
  // The pending add into exactly [h, h + count), taken over by the caller; none otherwise (any
  // other pending add stays for Activate to run).
  PendingAdd TakePendingAdd(const float* h, size_t count);
  // DeferPeerAllReduce's sum, for the next op (cuda_backend_residual.cc).
  struct PendingReduce {
    const kernels::PeerAllReduceArgs* args = nullptr;  // nullptr: nothing pending
    float* data = nullptr;
    size_t count = 0;
  };
  // Enqueues the pending sum, if any, and forgets it (Activate).
  void RunPendingReduce();
  // Whether a Linear of `rows` rows through a [n, k] weight of `dtype` runs on the GEMV.
  bool ByGemv(int64_t rows, int n, int k, DType dtype);
  // Device memory for the bf16 copy of `count` floats at `of` that the op being enqueued
  // writes, or nullptr when none is worth making (fp32 weights, or few enough rows for the
  // GEMV, which reads fp32).
  Result<__nv_bfloat16*> MakeBf16Copy(const float* of, int64_t rows, size_t count);
  // The bf16 copy of exactly [x, x + count), or nullptr.
  const __nv_bfloat16* Bf16CopyOf(const float* x, size_t count) const;
  // Drops the copy when [p, p + count) overlaps the floats it was made from.
  void ForgetBf16CopyIfWritten(const float* p, size_t count);
  Status PagedAttentionImpl(const float* q, std::span<const AttentionSequence> sequences,
                            const KvCacheRef& cache, const AttentionShape& shape, float* out);
  Status MoeImpl(const float* x, int64_t rows, int hidden, const float* router_logits,
                 const MoeExperts& experts, float* out);
  Result<const float*> InvFreq(int head_dim, double theta);
  Status LinearImpl(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
                    float* out);
  // fp8 weights (cuda_backend_fp8.cc): the GEMV, cuBLASLt's block-scaled FP8 GEMM or the bf16
  // GEMM over widened weights.
  Status LinearFp8(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
                   float* out);
  // Whether cuBLASLt's block-scaled FP8 GEMM takes `rows` rows (padded to 16) of a [n, k] fp8
  // weight.
  bool HasFp8Gemm(int64_t rows, int n, int k);
  // Whether the fp8 GEMV serves `rows` rows of a [n, k] weight: always one row, and 2-4 only
  // where there is no FP8 GEMM (at 2-4 rows the GEMV is bound by arithmetic, and the FP8 GEMM
  // over 16 padded rows streams the weights ~3.5x faster at 4).
  bool UseFp8Gemv(int64_t rows, int n, int k);
  // Each of outs (fp8 weights, HasFp8Gemm) through the FP8 GEMM, x [rows, k] quantised once.
  Status Fp8Gemms(const float* x, int64_t rows, int k, std::span<const LinearOut> outs);
  void LinearManyImpl(const float* x, int64_t rows, int in_features,
                      std::span<const LinearOut> outs);
  // Graph steps: bump allocation from persistent chunks (same addresses for the same sequence).
  Result<void*> ArenaAllocate(size_t bytes);
  // Ends the step at its Download: capture/instantiate or replay, launch, wait, copy out.
  Status FinishGraph(const float* src, std::span<float> host);
  // Waits for the stream, or for `event` when given.
  Status WaitStream(std::chrono::milliseconds timeout, cudaEvent_t event = nullptr);
  // A graph step launched: its host area (parity), its timing slot (-1: untimed), whether the
  // step before it was a graph step with no eager work between, and its output (bytes; for an
  // eager DownloadLater, the values downloaded already).
  struct Launched {
    int parity = 0;
    int timed_slot = -1;
    bool after_graph = false;
    size_t bytes = 0;
    std::optional<std::vector<float>> ready;
  };
  // Ends the graph step (capturing it first time), launches it with its output copy into the
  // parity's host area, and returns without waiting.
  Result<Launched> LaunchGraph(const float* src, size_t bytes);
  // Waits for a launched step and copies its output into `host`.
  Status FinishLaunched(const Launched& step, std::span<float> host);
  // Adds the timed step in `slot` to step_times_, and its gap when after_graph.
  Status AddStepTime(int slot, bool after_graph);
  // The pinned host area that Stage writes: a graph step's parity, area 0 when eager.
  char* StagingHost() const { return staging_host_ + (in_graph() ? parity_ : 0) * staging_bytes_; }
  void ResetStaging();

  Options options_;
  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
  Status status_;
  DeviceAllocator allocator_;
  std::unique_ptr<kernels::Gemm> gemm_;
  // Staging: two pinned host areas (graph steps alternate when one runs ahead; eager work
  // takes the first) and one device area, each of staging_bytes_, used up to staging_used_.
  char* staging_host_ = nullptr;
  char* staging_device_ = nullptr;
  size_t staging_bytes_ = 0;
  size_t staging_used_ = 0;
  struct Staged {
    const void* host;
    size_t bytes;
    size_t offset;
  };
  std::vector<Staged> staged_;             // this step's staged spans (reset with staging_used_)
  std::vector<int32_t> attention_packed_;  // the last PagedAttention metadata of this step
  const int32_t* attention_device_ = nullptr;
  int32_t* counts_host_ = nullptr;  // pinned, for the MoE expert counts
  std::map<std::pair<int, double>, Buffer> inv_freq_;
  int64_t fused_reduce_norms_ = 0;
  bool bf16_weights_ = false;  // bf16 weights allocated or fp8 ones used: GEMMs want copies
  struct Bf16Copy {
    const float* of = nullptr;
    size_t count = 0;
    Buffer data;
  } bf16_copy_;
  struct PendingSplit {
    Buffer stacked;  // [rows, total] (empty: nothing pending)
    int64_t rows = 0;
    int total = 0;
    kernels::ColumnParts parts;
  } pending_split_;
  PendingAdd pending_add_;
  PendingReduce pending_reduce_;
  // Graph state.
  Mode mode_ = Mode::kEager;
  std::string graph_key_;
  int graph_table_blocks_ = 0;
  // A captured step: its graph, output bytes, and what its host pass came to (ops, staged
  // bytes, arena used), which a replay under the same key must repeat.
  struct CapturedGraph {
    cudaGraphExec_t exec = nullptr;
    size_t out_bytes = 0;
    int64_t ops = 0;
    size_t staged = 0, arena_chunk = 0, arena_used = 0;
  };
  std::map<std::string, CapturedGraph> graphs_;
  int64_t graph_ops_ = 0;                        // ops of this graph step so far
  std::vector<std::pair<char*, size_t>> arena_;  // chunks
  size_t arena_chunk_ = 0, arena_used_ = 0;
  char* graph_out_host_ = nullptr;  // pinned, two areas of graph_out_bytes_: graph outputs
  size_t graph_out_bytes_ = 0;
  int parity_ = 0;                 // this graph step's host areas
  std::deque<Launched> launched_;  // DownloadLater's steps not yet taken, oldest first
  cudaEvent_t step_done_[2] = {nullptr, nullptr};  // the last step of each parity ended
  bool eager_since_graph_ = true;  // eager work (or none at all) since the last graph launch
  int64_t steps_launched_ = 0;
  // Options::time_graph_steps: each step's first work and end, in slots by launch count (three:
  // two steps in flight and the end of the one before them).
  static constexpr int kTimedSlots = 3;
  cudaEvent_t step_begin_[kTimedSlots] = {}, step_end_[kTimedSlots] = {};
  GraphStepTimes step_times_;
};

}  // namespace spark::engine::backend::cuda
