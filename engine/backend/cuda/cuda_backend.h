// CudaBackend: the Backend interface on one CUDA device, over the kernels in kernels/ and
// cuBLASLt GEMMs. Every op is enqueued on the backend's one stream, so ops run in call order
// without host synchronisation, and each op has enqueued all of its work when it returns. The
// pieces: op dispatch (this class: cuda_backend.cc, cuda_backend_linear.cc, cuda_backend_fp8.cc,
// cuda_backend_attention.cc, cuda_backend_moe.cc, cuda_backend_collectives.cc), the memory it
// works in (device_memory.h: buffers, the graph arena, the staging of small host inputs) and its
// graph steps (graph_steps.h: capture, replay, steps launched ahead of the host).
//
// Weights may be fp32 or bf16 (AllocateWeights) or fp8 (AllocateMatrix); bf16 and fp8 Linear
// run a GEMV kernel for a few rows (decode: bf16 up to LaunchSettings::gemv_max_rows, default
// one; fp8 up to kGemvMaxRows) and a tensor-core GEMM otherwise: bf16
// over the activations rounded to bf16 (the copy the op before wrote, Output::bf16, else a cast
// here), or for fp8 weights cuBLASLt's block-scaled FP8 GEMM over the activations quantised per
// 1 x 128 block where it exists (Hopper; k a multiple of 512, n of 128), else bf16 over the
// weights widened into scratch.
//
// CUDA graphs (decode): BeginGraph(key, table_blocks) opens a graph step (graph_steps.h says how
// capture and replay work). Workspace inside a step comes from the graph arena, and every block
// table is padded to table_blocks blocks (the decode split is planned for table_blocks x
// block_size tokens). Only decode rows (query_len 1), no MoE, and of the collectives only the
// peer all-reduce (StreamOrderedCommunicator refuses NCCL ones there).
//
// Ops cannot return errors through the Backend interface: the first CUDA or cuBLAS error is
// logged and kept, status() returns it, and Download fails loudly (logs) from then on.
// Accuracy: fp32 throughout (GEMMs in exact fp32 unless allow_tf32); matches CpuBackend to
// about 1e-5 relative on the fixtures. With bf16_attention, prefill attention (and decode
// attention over a bf16 KV cache) runs on bf16 tensor cores (Q, K, V and probabilities rounded
// to bf16, ~3e-3 relative).
// Thread-safety: one op at a time (see Backend); the calling thread may change between ops.
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/backend.h"
#include "engine/backend/cuda/cuda_deepseek_ops.h"
#include "engine/backend/cuda/device_memory.h"
#include "engine/backend/cuda/graph_steps.h"
#include "engine/backend/cuda/weight_staging.h"
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
    // AllReduceAddRmsNorm over the peer all-reduce as one kernel; off: the sum and the norm as
    // two kernels, for comparisons.
    bool fuse_all_reduce_norm = true;
    // Linear over the quantised and bf16 weight types with activations at fp32 accuracy: the
    // register-decoding products take them as two bf16 parts (about 2^-16 relative; one more
    // tensor-core instruction per step) and GEMMs of many rows widen the weights to fp32. Off:
    // activations rounded to bf16 into the products, as serving engines run. For comparisons with the fp32
    // reference, whose tiny random models turn bf16 rounding into different quantiser codes,
    // top-k entries and experts.
    bool precise_quant = false;
  };
  using GraphStepTimes = GraphSteps::Times;

  // Unavailable when the device does not exist (the message gives the count); Internal for
  // CUDA/cuBLAS start-up failures.
  static Result<std::unique_ptr<CudaBackend>> Create(const Options& options);
  ~CudaBackend() override;

  std::string name() const override { return "cuda"; }
  int device() const { return options_.device; }
  cudaStream_t stream() const { return stream_; }
  // The first error any op met (Ok if none).
  Status status() const override { return status_; }
  // Waits for all enqueued work; returns status() or the stream's error.
  Status Synchronize();

  Result<Buffer> Allocate(size_t count) override;
  // The device allocator's live blocks (size classes; graph arenas and staging not counted).
  size_t bytes_in_use() const override { return memory_.bytes_in_use(); }
  void Upload(std::span<const float> host, float* dst) override;
  void Download(const float* src, std::span<float> host) override;
  Result<Buffer> AllocateWeights(size_t count, DType dtype) override;
  void UploadWeights(std::span<const float> host, Buffer& dst) override;
  // Through pinned staging (weight_staging.h), the copies overlapped with the next reads.
  Status UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) override;
  Status FinishWeightUploads() override;
  // Every DType, the quantised ones included (cuda_backend_quant.cc).
  bool HoldsWeights(DType dtype) const override { (void)dtype; return true; }
  // Past the GEMV's rows, over bf16 or fp8 weights; always over the quantised types.
  bool Bf16InputsPay(int64_t rows, DType weights) const override;

  // Graph steps (graph_steps.h). BeginGraph: FailedPrecondition inside a step or after an
  // error. BeginDecodeGraph: false (and the step runs eagerly) when BeginGraph fails.
  Status BeginGraph(const std::string& key, int table_blocks);
  bool BeginDecodeGraph(const std::string& key, int table_blocks) override {
    return BeginGraph(key, table_blocks).ok();
  }
  void CancelDecodeGraph() override;
  // In a graph step: launches the graph and returns; the host may stage and launch one more
  // step (its inputs and output take the other of two pinned host areas, so each key captures
  // up to two graphs) before TakeDownload waits for the first. Eager: downloads at once.
  Status DownloadLater(const float* src, size_t count) override;
  Status TakeDownload(std::span<float> host) override;
  bool in_graph() const { return graph_.in_graph(); }
  // False in a graph replay's host-only pass (work that would be launched is in the graph).
  bool launching() const { return graph_.launching(); }
  std::chrono::milliseconds step_timeout() const { return options_.step_timeout; }
  size_t graph_count() const { return graph_.count(); }
  const GraphStepTimes& graph_step_times() const { return graph_.times(); }
  // Zeroes the sums (the gap before the next step still counts from the last step's end).
  void ResetGraphStepTimes() { graph_.ResetTimes(); }

  void Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                 std::span<const int32_t> ids, float* out) override;
  void EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                         const float* pairs, int parts, int64_t tokens, float* out) override;
  void RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
               Output out) override;
  void ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) override;
  void Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
            double theta) override;
  void Add(float* x, const float* y, size_t count) override;
  void SiluMul(const float* gate_up, int64_t rows, int inter, Output out) override;
  void SplitColumns(const float* src, int64_t rows, std::span<const ColumnSlice> parts) override;
  void WriteKv(const float* k, const float* v, std::span<const int64_t> slots, int kv_width,
               const KvCacheRef& cache) override;
  void AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                  float eps, Output out) override;
  // cuda_backend_linear.cc
  void Linear(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
              float* out) override;
  void LinearMany(Input x, int64_t rows, int in_features, std::span<const LinearOut> outs) override;
  void LinearSiluMul(Input x, int64_t rows, int in_features, WeightRef w, int inter,
                     float* gate_up, Output act) override;
  void LinearAdd(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                 float* scratch, float* h) override;
  void LinearAddRmsNorm(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                        float* scratch, float* h, const float* norm, float eps,
                        Output out) override;
  // cuda_backend_attention.cc
  void QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                         std::span<const int64_t> slots) override;
  void PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                      const KvCacheRef& cache, const AttentionShape& shape, float* out) override;
  // cuda_backend_moe.cc
  void Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
           const MoeExperts& experts, float* out) override;
  // cuda_backend_collectives.cc: over a StreamOrderedCommunicator whose peer all-reduce takes
  // delta, the sum, the add and the norm run as one kernel (kernels::PeerAllReduceAddRmsNorm,
  // bit-identical to the sum kernel followed by AddRmsNorm's); otherwise as Backend's default.
  Status AllReduceAddRmsNorm(comm::Communicator* comm, float* h, float* delta, const float* weight,
                             int64_t rows, int dim, float eps, Output out) override;
  // Enqueues the peer all-reduce of data[0, count) after every op before (device memory of this
  // backend, within the region's capacity: StreamOrderedCommunicator checks). Errors go to
  // status().
  void PeerAllReduceSum(const kernels::PeerAllReduceArgs& args, float* data, size_t count);
  // Makes the device current and counts the work as an op of the graph step: for callers that
  // enqueue on stream() directly (StreamOrderedCommunicator).
  void PrepareDirectWork() { Activate(); }
  // DeepSeek-V4 / V4.1's ops (cuda_deepseek_ops.h).
  DeepseekOps* deepseek_ops() override { return &deepseek_; }
  // How many AllReduceAddRmsNorms ran as one kernel (for tests).
  int64_t fused_reduce_norms() const { return fused_reduce_norms_; }

 private:
  friend class CudaDeepseekOps;  // enqueues its ops through the helpers below

  explicit CudaBackend(const Options& options)
      : options_(options), graph_(options.step_timeout), deepseek_(*this) {}
  // Makes this backend's device current and counts the op for the graph step.
  void Activate();
  void Record(const Status& s);
  // Copies host bytes to device memory valid until the step ends (Download, Synchronize or a
  // graph step's launch), waiting for the stream or growing the areas when they are full.
  // `shared`: StageShared may hand this copy out again in the same step.
  Result<void*> Stage(const void* host, size_t bytes, bool shared = false);
  // Stage, reusing an earlier copy of this step when the same host bytes at the same address
  // were staged already (deterministic for graph replays: decided by address and size).
  Result<void*> StageShared(const void* host, size_t bytes);
  template <typename T>
  Result<const T*> Stage(std::span<const T> host) {
    SPARK_ASSIGN_OR_RETURN(void* p, StageShared(host.data(), host.size_bytes()));
    return static_cast<const T*>(p);
  }
  // Makes room for `bytes` more staged bytes (the sum of DeviceMemory::Align of each span an op
  // is about to stage), waiting for the stream or growing the areas now if they lack it. An op
  // that stages several spans reserves their total first: a Stage that found the areas full
  // would start them over and reuse the places of the spans the op staged before it.
  Status ReserveStaging(size_t bytes);
  // Forgets this step's staged spans and the attention metadata staged with them.
  void ResetStaging();
  // Device memory of `bytes` as `dtype` elements, freed when the returned handle dies (from the
  // graph arena inside a graph step); not zeroed (the op overwrites it).
  Result<Buffer> Scratch(size_t bytes, DType dtype = DType::kF32);
  // Waits for the stream, with step_timeout.
  Status WaitStream();
  // Ends the graph step at its Download and copies its output into `host`.
  Status FinishGraph(const float* src, std::span<float> host);
  Result<GraphSteps::Launched> LaunchGraph(const float* src, size_t bytes);

  // cuda_backend_linear.cc / cuda_backend_fp8.cc
  // Whether a Linear of `rows` rows through a [n, k] weight of `dtype` runs on the GEMV.
  bool ByGemv(int64_t rows, int n, int k, DType dtype);
  Status LinearImpl(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                    float* out);
  // The GEMV over bf16 or fp8 weights, storing or (accumulate) adding into out.
  Status Gemv(const float* x, int64_t rows, int in_features, WeightRef w, int out_features,
              float* out, bool accumulate);
  // fp8 weights: the GEMV, cuBLASLt's block-scaled FP8 GEMM or the bf16 GEMM over widened
  // weights.
  Status LinearFp8(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                   float* out);
  // cuda_backend_quant.cc: kE4M3B32 / kE2M1B32 weights through kernels::QuantGemm (decoded in
  // registers) up to kernels::kQuantGemmMaxRows rows, else widened to bf16 scratch for cuBLAS.
  Status LinearQuant(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                     float* out, bool accumulate);
  // x as the quantised products read it: bf16 (the op before's copy, Input::bf16, or a cast
  // into `scratch`), and with precise_quant its low parts too (kernels::SplitBf16).
  struct Bf16Parts {
    const __nv_bfloat16* hi = nullptr;
    const __nv_bfloat16* lo = nullptr;
  };
  Result<Bf16Parts> Bf16Rows(Input x, int64_t rows, int cols, Buffer* scratch);
  // The weights of a Linear of `rows` rows past the register-decoding products: widened into
  // `scratch` (bf16, or fp32 with precise_quant) for the cuBLAS GEMM.
  Result<WeightRef> WidenQuant(WeightRef w, int n, int k, Buffer* scratch);
  // Whether cuBLASLt's block-scaled FP8 GEMM takes `rows` rows (padded to 16) of a [n, k] fp8
  // weight.
  bool HasFp8Gemm(int64_t rows, int n, int k);
  // Whether the fp8 GEMV serves `rows` rows of a [n, k] weight: always one row, and 2-4 only
  // where there is no FP8 GEMM (at 2-4 rows the GEMV is bound by arithmetic, and the FP8 GEMM
  // over 16 padded rows streams the weights ~3.5x faster at 4).
  bool UseFp8Gemv(int64_t rows, int n, int k);
  // Each of outs (fp8 weights, HasFp8Gemm) through the FP8 GEMM, x [rows, k] quantised once.
  Status Fp8Gemms(const float* x, int64_t rows, int k, std::span<const LinearOut> outs);
  // cuda_backend_attention.cc
  Status PagedAttentionImpl(const float* q, std::span<const AttentionSequence> sequences,
                            const KvCacheRef& cache, const AttentionShape& shape, float* out);
  Result<const float*> InvFreq(int head_dim, double theta);
  // cuda_backend_moe.cc
  Status MoeImpl(const float* x, int64_t rows, int hidden, const float* router_logits,
                 const MoeExperts& experts, float* out);

  Options options_;
  cudaStream_t stream_ = nullptr;
  int sm_count_ = 0;
  Status status_;
  DeviceMemory memory_;
  GraphSteps graph_;
  std::unique_ptr<kernels::Gemm> gemm_;
  std::vector<int32_t> attention_packed_;  // the last PagedAttention metadata of this step
  const int32_t* attention_device_ = nullptr;
  int32_t* counts_host_ = nullptr;  // pinned, for the MoE expert counts
  std::map<std::pair<int, double>, Buffer> inv_freq_;
  int64_t fused_reduce_norms_ = 0;
  std::unique_ptr<WeightStaging> weight_staging_;  // made by the first raw upload, then kept
  CudaDeepseekOps deepseek_;
};

}  // namespace spark::engine::backend::cuda
