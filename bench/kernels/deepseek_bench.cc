// See deepseek_bench.h.
#include "bench/kernels/deepseek_bench.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "engine/backend/cuda/cuda_backend.h"
#include "kernels/elementwise.h"
#include "kernels/quant_gemm.h"

namespace spark::kernels {
namespace {

using engine::backend::AttentionSequence;
using engine::backend::Buffer;
using engine::backend::CacheField;
using engine::backend::DeepseekOps;
using engine::backend::DType;
using engine::backend::FakeQuantFormat;
using engine::backend::cuda::CudaBackend;

// DeepSeek-V4.1-Flash.
constexpr int kHidden = 5120, kHeads = 64, kHeadDim = 512, kRopeDim = 64, kWindow = 128;
constexpr int kIndexHeads = 32, kIndexDim = 128, kTopK = 512;
constexpr int kCandidateBlock = 8, kTopBlocks = 2048, kStreams = 4, kSinkhorn = 20;
constexpr int kPage = 16;  // KV block size (tokens)

[[noreturn]] void Fail(const std::string& what) {
  std::fprintf(stderr, "deepseek bench: %s\n", what.c_str());
  std::exit(2);
}

void Check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) Fail(std::string(what) + ": " + cudaGetErrorString(e));
}

// The fp32 CUDA-core peak from the SM clock: 128 FMA lanes an SM (sm_90 and sm_12x).
double Fp32PeakTflops() {
  int device = 0, sms = 0, khz = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "attribute");
  Check(cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, device), "attribute");
  return 2.0 * 128 * sms * (khz * 1e3) / 1e12;
}

class Harness {
 public:
  Harness(double copy_gbs, double fp32_tflops) : copy_gbs_(copy_gbs), fp32_(fp32_tflops) {
    auto b = CudaBackend::Create({});
    if (!b.ok()) Fail(b.status().message());
    b_ = std::move(*b);
  }

  DeepseekOps& ops() { return *b_->deepseek_ops(); }
  cudaStream_t stream() { return b_->stream(); }

  // n floats uniform in [lo, hi), made on the device.
  Buffer Random(size_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
    Buffer buf = Allocate(n);
    const Status s = FillUniform(buf.data(), n, seed, lo, hi, b_->stream());
    if (!s.ok()) Fail(s.message());
    return buf;
  }
  Buffer Upload(const std::vector<float>& host) {
    Buffer buf = Allocate(host.size());
    b_->Upload(host, buf.data());
    return buf;
  }

  // Times fn: GPU milliseconds a call between events on the backend's stream and host
  // milliseconds a call, the median of three runs of enough calls for ~30 ms.
  std::pair<double, double> Time(const std::function<void()>& fn) {
    fn();
    Sync();
    cudaEvent_t start, stop;
    Check(cudaEventCreate(&start), "event");
    Check(cudaEventCreate(&stop), "event");
    auto run = [&](int calls) {
      const auto t0 = std::chrono::steady_clock::now();
      Check(cudaEventRecord(start, b_->stream()), "record");
      for (int i = 0; i < calls; ++i) fn();
      Check(cudaEventRecord(stop, b_->stream()), "record");
      const auto t1 = std::chrono::steady_clock::now();
      Sync();
      float ms = 0;
      Check(cudaEventElapsedTime(&ms, start, stop), "elapsed");
      return std::make_pair(double{ms} / calls,
                            std::chrono::duration<double, std::milli>(t1 - t0).count() / calls);
    };
    const double once = std::max(run(1).first, 1e-3);
    const int calls = static_cast<int>(std::clamp(30.0 / once, 1.0, 200.0));
    std::vector<std::pair<double, double>> runs;
    for (int r = 0; r < 3; ++r) runs.push_back(run(calls));
    std::sort(runs.begin(), runs.end());
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    return runs[1];
  }

  // A row: `amount` bytes (flops false) or floating-point operations per call.
  void Add(const std::string& op, const std::string& shape, std::pair<double, double> ms,
           double amount, bool flops) {
    const double per_s = amount / (ms.first * 1e-3);
    rows.push_back({"deepseek " + op, shape, ms.first, ms.second,
                    flops ? per_s / 1e12 : per_s / 1e9, flops ? "TFLOP/s" : "GB/s",
                    flops ? fp32_ : copy_gbs_});
  }

  std::vector<DeepseekTiming> rows;

 private:
  Buffer Allocate(size_t n) {
    auto buf = b_->Allocate(std::max<size_t>(n, 1));
    if (!buf.ok()) Fail(buf.status().message());
    return std::move(*buf);
  }
  void Sync() {
    const Status s = b_->Synchronize();
    if (!s.ok()) Fail(s.message());
  }

  std::unique_ptr<CudaBackend> b_;
  double copy_gbs_, fp32_;
};

// One step's sequences: `batch` sequences of `context` tokens, the last `queries` of each in the
// step, their pages scattered over one pool; candidate lists at ratio 1 (every token an entry).
struct Step {
  Step(int batch, int context, int queries) {
    const int pages = (context + kPage - 1) / kPage;
    std::vector<int32_t> ids(static_cast<size_t>(batch) * pages);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937(1));
    slots_total = static_cast<int64_t>(ids.size()) * kPage;
    for (int s = 0; s < batch; ++s) {
      tables.emplace_back(ids.begin() + int64_t{s} * pages, ids.begin() + int64_t{s + 1} * pages);
    }
    int64_t row = 0;
    for (int s = 0; s < batch; ++s) {
      sequences.push_back({row, queries, context, tables[s]});
      const int64_t list = static_cast<int64_t>(slots.size());
      for (int tok = 0; tok < context; ++tok) {
        slots.push_back(int64_t{tables[s][tok / kPage]} * kPage + tok % kPage);
      }
      for (int i = 0; i < queries; ++i, ++row) {
        const int position = context - queries + i;
        positions.push_back(position);
        token_slots.push_back(slots[list + position]);
        first.push_back(list);
        count.push_back(position + 1);
      }
    }
    rows = row;
    stride = *std::max_element(count.begin(), count.end());
  }
  engine::backend::EntryCandidates candidates() const { return {slots, first, count}; }
  // Random distinct picks of each row's candidates, -1 past its count.
  std::vector<float> Selection(uint32_t seed) const {
    std::mt19937 rng(seed);
    std::vector<float> out;
    for (int64_t t = 0; t < rows; ++t) {
      for (int i = 0; i < kTopK; ++i) {
        out.push_back(i < count[t] ? static_cast<float>(rng() % count[t]) : -1.0f);
      }
    }
    return out;
  }

  std::vector<std::vector<int32_t>> tables;
  std::vector<AttentionSequence> sequences;
  std::vector<int64_t> slots, first, token_slots;
  std::vector<int32_t> count, positions;
  int64_t rows = 0, slots_total = 0;
  int stride = 0;
};

// The ops whose cost follows the context: the indexer, the candidate blocks, the attention and
// the compressor's pooling of the entries the step closes (V4.1's ratio 2).
void BenchContextOps(Harness& h, int batch, int context, int queries, const std::string& shape) {
  const Step s(batch, context, queries);
  const int64_t rows = s.rows;
  // Index keys and the attention's 512-wide rows share one cache row of each slot.
  const int row_width = kHeadDim + kIndexDim;
  Buffer cache = h.Random(s.slots_total * row_width, 1);
  const CacheField keys{cache.data(), row_width, kHeadDim, kIndexDim};
  const CacheField kv{cache.data(), row_width, 0, kHeadDim};
  Buffer q = h.Random(rows * kIndexHeads * kIndexDim, 2), w = h.Random(rows * kIndexHeads, 3);
  Buffer selected = h.Random(rows * kTopK, 4), scores = h.Random(rows * s.stride, 5);
  Buffer mask = h.Random(rows * s.stride, 6);
  engine::backend::IndexerArgs ia;
  ia.q = q.data();
  ia.weights = w.data();
  ia.weight_scale = 1.0f / std::sqrt(static_cast<float>(kIndexHeads));
  ia.heads = kIndexHeads;
  ia.dim = kIndexDim;
  ia.keys = keys;
  ia.candidates = s.candidates();
  ia.mask_stride = s.stride;
  ia.top_k = kTopK;
  ia.selected = selected.data();
  double pairs = 0;  // (query, candidate) pairs scored
  for (int32_t c : s.count) pairs += c;
  const double index_flops = pairs * kIndexHeads * kIndexDim * 2.0;
  h.Add("IndexerTopK", shape, h.Time([&] { h.ops().IndexerTopK(ia); }), index_flops, true);
  ia.scores = scores.data();  // the candidate source: its scores come back
  h.Add("IndexerTopK+scores", shape, h.Time([&] { h.ops().IndexerTopK(ia); }), index_flops, true);
  const engine::backend::CandidateBlockArgs cb{scores.data(),   s.count,    s.stride,
                                               kCandidateBlock, kTopBlocks, mask.data()};
  h.Add("CandidateBlocks", shape, h.Time([&] { h.ops().CandidateBlocks(cb); }),
        2.0 * rows * s.stride * sizeof(float), false);
  // A later index source inside that mask (top 2048 blocks of 8: up to 16K candidates a row).
  ia.scores = nullptr;
  ia.mask = mask.data();
  double kept = 0;
  for (int32_t c : s.count) kept += std::min(c, kTopBlocks * kCandidateBlock);
  h.Add("IndexerTopK masked", shape, h.Time([&] { h.ops().IndexerTopK(ia); }),
        kept * kIndexHeads * kIndexDim * 2.0, true);

  Buffer picks = h.Upload(s.Selection(7));
  Buffer aq = h.Random(rows * kHeads * kHeadDim, 8), out = h.Random(rows * kHeads * kHeadDim, 9);
  Buffer sinks = h.Random(kHeads, 10);
  engine::backend::SparseAttentionArgs aa;
  aa.q = aq.data();
  aa.heads = kHeads;
  aa.head_dim = kHeadDim;
  aa.scale = 1.0f / std::sqrt(static_cast<float>(kHeadDim));
  aa.sequences = s.sequences;
  aa.block_size = kPage;
  aa.window = kWindow;
  aa.window_keys = kv;
  aa.entries = kv;
  aa.candidates = s.candidates();
  aa.selected = picks.data();
  aa.top_k = kTopK;
  aa.sinks = sinks.data();
  aa.out = out.data();
  double keys_read = 0;
  for (int64_t t = 0; t < rows; ++t) {
    keys_read += std::min(kWindow, s.count[t]) + std::min(kTopK, s.count[t]);
  }
  h.Add("SparseAttention", shape, h.Time([&] { h.ops().SparseAttention(aa); }),
        keys_read * kHeads * kHeadDim * 4.0, true);

  // The entries the step closes at ratio 2: one a decode row, half the prefill rows.
  std::vector<int64_t> sources, entry_slots;
  std::vector<int32_t> entry_positions;
  for (int64_t t = 0; t<rows; t += queries> 1 ? 2 : 1) {
    sources.push_back(s.token_slots[t]);
    sources.push_back(s.token_slots[t]);
    entry_slots.push_back(s.token_slots[t]);
    entry_positions.push_back(s.positions[t]);
  }
  Buffer norm = h.Random(kHeadDim, 11), latent = h.Random(entry_slots.size() * kHeadDim, 12);
  engine::backend::CompressArgs ca;
  ca.kv = kv;
  ca.gate = kv;
  ca.dim = kHeadDim;
  ca.pool = 2;
  ca.source_slots = sources;
  ca.entry_slots = entry_slots;
  ca.entry_positions = entry_positions;
  ca.norm = norm.data();
  ca.out_rows = latent.data();
  h.Add("Compress (ratio 2)", shape, h.Time([&] { h.ops().Compress(ca); }),
        entry_slots.size() * kHeadDim * sizeof(float) * 5.0, false);
}

// The ops whose cost follows the token count only.
void BenchTokenOps(Harness& h, int tokens) {
  const std::string shape = std::to_string(tokens) + " tokens";
  const int64_t t = tokens, width = int64_t{kStreams} * kHidden;
  const Step s(1, std::max(tokens, kWindow), tokens);
  Buffer freq = h.Random(kRopeDim / 2, 20, 0.0f, 1.0f);
  Buffer q = h.Random(t * kHeads * kHeadDim, 21);
  const engine::backend::RopeTable rope{freq.data(), kRopeDim, 1.0f};
  h.Add("Rope (64 x 512)", shape,
        h.Time([&] { h.ops().Rope(q.data(), s.positions, kHeads, kHeadDim, rope, false); }),
        t * kHeads * kRopeDim * 8.0, false);
  Buffer kv = h.Random(t * kHeadDim, 22), iq = h.Random(t * kIndexHeads * kIndexDim, 23);
  h.Add("FakeQuant fp8 (512, 32)", shape, h.Time([&] {
    h.ops().FakeQuant({kv.data(), t, kHeadDim, 32, FakeQuantFormat::kFp8Ue8m0});
  }),
        t * kHeadDim * 8.0, false);
  h.Add("FakeQuant fp4 (32 x 128, 32)", shape, h.Time([&] {
    h.ops().FakeQuant({iq.data(), t * kIndexHeads, kIndexDim, 32, FakeQuantFormat::kFp4Ue8m0});
  }),
        t * kIndexHeads * kIndexDim * 8.0, false);
  Buffer cache = h.Random(s.slots_total * kHeadDim, 24);
  const CacheField field{cache.data(), kHeadDim, 0, kHeadDim};
  h.Add("WriteField (512)", shape,
        h.Time([&] { h.ops().WriteField(kv.data(), s.token_slots, field); }), t * kHeadDim * 8.0,
        false);

  Buffer streams = h.Random(t * width, 25), fn = h.Random(int64_t{24} * width, 26, -0.01f, 0.01f);
  Buffer base = h.Random(24, 27), scale = h.Random(3, 28, 0.5f, 1.5f);
  Buffer pre = h.Random(t * kStreams, 29), post = h.Random(t * kStreams, 30);
  Buffer comb = h.Random(t * kStreams * kStreams, 31), x = h.Random(t * kHidden, 32);
  engine::backend::HcMixArgs mix;
  mix.streams = streams.data();
  mix.tokens = t;
  mix.n = kStreams;
  mix.hidden = kHidden;
  mix.fn = fn.data();
  mix.base = base.data();
  mix.scale = scale.data();
  mix.sinkhorn_iters = kSinkhorn;
  mix.pre = pre.data();
  mix.post = post.data();
  mix.comb = comb.data();
  h.Add("HcMix", shape, h.Time([&] { h.ops().HcMix(mix); }), (t + 24.0) * width * sizeof(float),
        false);
  h.Add("HcCollapse", shape, h.Time([&] {
    h.ops().HcCollapse(streams.data(), pre.data(), t, kStreams, kHidden, x.data());
  }),
        t * (width + kHidden) * 4.0, false);
  h.Add("HcPost", shape, h.Time([&] {
    h.ops().HcPost(streams.data(), x.data(), post.data(), comb.data(), t, kStreams, kHidden);
  }),
        t * (2.0 * width + kHidden) * 4.0, false);
  h.Add("HcExpand", shape,
        h.Time([&] { h.ops().HcExpand(x.data(), t, kStreams, kHidden, streams.data()); }),
        t * (width + kHidden) * 4.0, false);
  Buffer engram = h.Random(t * (kStreams + 1) * kHidden, 33), ew = h.Random(width, 34);
  h.Add("EngramGate", shape, h.Time([&] {
    h.ops().EngramGate({streams.data(), engram.data(), ew.data(), t, kStreams, kHidden, 1e-20f});
  }),
        t * (3.0 * width + kHidden) * 4.0, false);
}

// One MoE layer at the released widths: 384 routed experts of 2304 channels in E2M1 with UE8M0
// 1x32 scales, top-6, and the FP8 (UE8M0 32x32) shared expert. Each token picks six distinct
// experts at random; the bytes are the distinct experts' weights and the shared expert's, read
// once a call (the expert tables are built on the first, untimed call).
class MoeLayer {
 public:
  static constexpr int kExperts = 384, kInter = 2304, kTopK = 6;

  explicit MoeLayer(Harness& h) : h_(h) {
    const size_t gate_up = engine::backend::MatrixBytes(2 * kInter, kHidden, DType::kE2M1B32);
    const size_t down = engine::backend::MatrixBytes(kHidden, kInter, DType::kE2M1B32);
    expert_bytes_ = gate_up + down;
    routed_ = Codes(expert_bytes_ * kExperts);
    auto* base = reinterpret_cast<uint8_t*>(routed_.data());
    for (int e = 0; e < kExperts; ++e) {
      uint8_t* g = base + e * expert_bytes_;
      Scales(g, 2 * kInter, kHidden, DType::kE2M1B32, 119);  // 2^-8
      Scales(g + gate_up, kHidden, kInter, DType::kE2M1B32, 119);
      experts_.push_back({{g, DType::kE2M1B32}, {g + gate_up, DType::kE2M1B32}});
    }
    const size_t shared_gate_up = engine::backend::MatrixBytes(2 * kInter, kHidden, DType::kE4M3B32);
    shared_bytes_ = shared_gate_up + engine::backend::MatrixBytes(kHidden, kInter, DType::kE4M3B32);
    shared_ = Codes(shared_bytes_);
    auto* sb = reinterpret_cast<uint8_t*>(shared_.data());
    Scales(sb, 2 * kInter, kHidden, DType::kE4M3B32, 120);  // 2^-7
    Scales(sb + shared_gate_up, kHidden, kInter, DType::kE4M3B32, 120);
    shared_w_ = {{sb, DType::kE4M3B32}, {sb + shared_gate_up, DType::kE4M3B32}};
  }

  // The layer's products one at a time at one token, each call on the next expert so that no
  // call finds its weights in L2 (the FP8 ones rotate over copies of the shared expert).
  void BenchProducts() {
    Buffer x = h_.Random(kHidden, 54), act = h_.Random(kHidden, 55), out = h_.Random(kHidden, 56);
    Check(cudaMemset(x.data(), 0, kHidden * 2), "x");
    Check(cudaMemset(act.data(), 0, kInter * 2), "act");
    constexpr int kCopies = 8;
    std::vector<Buffer> fp8;
    for (int c = 0; c < kCopies; ++c) {
      fp8.push_back(Codes(shared_bytes_));
      auto* b = reinterpret_cast<uint8_t*>(fp8.back().data());
      Scales(b, 2 * kInter, kHidden, DType::kE4M3B32, 120);
      Scales(b + engine::backend::MatrixBytes(2 * kInter, kHidden, DType::kE4M3B32), kHidden,
             kInter, DType::kE4M3B32, 120);
    }
    auto time = [&](const std::string& what, bool e2m1, bool swiglu) {
      const int n = swiglu ? 2 * kInter : kHidden, k = swiglu ? kHidden : kInter;
      const DType t = e2m1 ? DType::kE2M1B32 : DType::kE4M3B32;
      const size_t gate_up = engine::backend::MatrixBytes(2 * kInter, kHidden, t);
      int call = 0;
      auto matrix = [&] {
        const int e = call++ % (e2m1 ? kExperts : kCopies);
        const auto* base = e2m1 ? reinterpret_cast<const uint8_t*>(experts_[e].gate_up.data)
                                : reinterpret_cast<const uint8_t*>(fp8[e].data());
        const uint8_t* m = swiglu ? base : base + gate_up;
        return kernels::QuantMatrix{e2m1 ? QuantFormat::kE2M1B32 : QuantFormat::kE4M3B32, m,
                                    m + engine::backend::QuantScaleOffset(t, n, k), n, k};
      };
      QuantGemmArgs g;
      g.tokens = 1;
      g.x = reinterpret_cast<const __nv_bfloat16*>(swiglu ? x.data() : act.data());
      g.ldx = k;
      g.ldo = swiglu ? kInter : kHidden;
      if (swiglu) {
        g.epilogue = QuantGemmArgs::Epilogue::kSwiGlu;
        g.out_bf16 = reinterpret_cast<__nv_bfloat16*>(act.data());
      } else {
        g.out = out.data();
      }
      h_.Add(what, "1 token", h_.Time([&] {
        g.single = matrix();
        const Status st = QuantGemm(g, h_.stream());
        if (!st.ok()) Fail(st.message());
      }),
             static_cast<double>(engine::backend::MatrixBytes(n, k, t)), false);
    };
    time("QuantGemm E2M1 gate_up + SwiGLU [4608 x 5120]", true, true);
    time("QuantGemm E2M1 down [5120 x 2304]", true, false);
    time("QuantGemm E4M3 gate_up + SwiGLU [4608 x 5120]", false, true);
    time("QuantGemm E4M3 down [5120 x 2304]", false, false);
  }

  void Bench(int tokens) {
    std::mt19937 rng(static_cast<uint32_t>(tokens));
    std::vector<float> ids;
    std::vector<bool> used(kExperts);
    for (int t = 0; t < tokens; ++t) {
      std::vector<int> all(kExperts);
      std::iota(all.begin(), all.end(), 0);
      std::shuffle(all.begin(), all.end(), rng);
      for (int k = 0; k < kTopK; ++k) ids.push_back(static_cast<float>(all[k])), used[all[k]] = true;
    }
    const double distinct = static_cast<double>(std::count(used.begin(), used.end(), true));
    Buffer d_ids = h_.Upload(ids), weights = h_.Random(ids.size(), 51, 0.1f, 0.3f);
    Buffer x = h_.Random(int64_t{tokens} * kHidden, 52), out = h_.Random(int64_t{tokens} * kHidden, 53);
    engine::backend::MoeExpertsArgs a;
    a.x = x.data();
    a.tokens = tokens;
    a.hidden = kHidden;
    a.ids = d_ids.data();
    a.weights = weights.data();
    a.top_k = kTopK;
    a.experts = experts_;
    a.inter = kInter;
    a.shared = shared_w_;
    a.shared_inter = kInter;
    a.swiglu_limit = 10.0f;
    a.out = out.data();
    h_.Add("MoeExperts (384 x 2304 E2M1 top-6 + FP8 shared)",
           std::to_string(tokens) + " tokens, " + std::to_string(static_cast<int>(distinct)) +
               " experts",
           h_.Time([&] { h_.ops().MoeExperts(a); }),
           distinct * static_cast<double>(expert_bytes_) + static_cast<double>(shared_bytes_),
           false);
  }

 private:
  // `bytes` of random codes (the bits of uniform floats).
  Buffer Codes(size_t bytes) { return h_.Random((bytes + 3) / 4, 50); }
  static void Scales(uint8_t* matrix, int64_t rows, int64_t cols, DType t, int value) {
    const size_t off = engine::backend::QuantScaleOffset(t, rows, cols);
    Check(cudaMemset(matrix + off, value, engine::backend::MatrixBytes(rows, cols, t) - off),
          "scales");
  }

  Harness& h_;
  size_t expert_bytes_ = 0, shared_bytes_ = 0;
  Buffer routed_, shared_;
  std::vector<engine::backend::SwiGluWeights> experts_;
  engine::backend::SwiGluWeights shared_w_;
};

}  // namespace

std::vector<DeepseekTiming> BenchDeepseekOps(double copy_gbs, bool quick) {
  Harness h(copy_gbs, Fp32PeakTflops());
  const std::vector<int> batches = quick ? std::vector<int>{1} : std::vector<int>{1, 8, 32};
  const std::vector<int> contexts = quick ? std::vector<int>{4096} : std::vector<int>{4096, 65536};
  const int prefill = quick ? 1024 : 8192;
  for (int context : contexts) {
    for (int b : batches) {
      BenchContextOps(h, b, context, 1,
                      "decode b" + std::to_string(b) + " ctx" + std::to_string(context));
    }
  }
  BenchContextOps(h, 1, prefill, prefill, "prefill " + std::to_string(prefill));
  MoeLayer moe(h);
  for (int b : batches) moe.Bench(b);
  for (int tokens : batches) BenchTokenOps(h, tokens);
  BenchTokenOps(h, prefill);
  return std::move(h.rows);
}

std::vector<DeepseekTiming> BenchDeepseekMoe(double copy_gbs, bool quick) {
  Harness h(copy_gbs, Fp32PeakTflops());
  MoeLayer moe(h);
  moe.BenchProducts();
  for (int b : quick ? std::vector<int>{1} : std::vector<int>{1, 8, 32, 256}) moe.Bench(b);
  return std::move(h.rows);
}

}  // namespace spark::kernels
