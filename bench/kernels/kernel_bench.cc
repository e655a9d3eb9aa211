// spark-kernel-bench: times the kernels on the GPU it runs on and sets each against the
// ceiling measured in the same run: RMSNorm and paged decode attention in GB/s against the
// device-to-device copy bandwidth (bytes read + written), GEMMs in TFLOP/s against the best
// cuBLASLt bf16 throughput at large square sizes; the peer all-reduce fused with AddRmsNorm
// against the two kernels (peer_bench.h); DeepSeek-V4.1-Flash's DeepseekOps through the CUDA
// backend (deepseek_bench.h). Prints a table; --json writes the numbers.
// Timing: CUDA events around `iters` back-to-back launches after warm-up; the median of 5.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "bench/kernels/deepseek_bench.h"
#include "bench/kernels/peer_bench.h"
#include "engine/config/environment.h"
#include "kernels/attention.h"
#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/fp8.h"
#include "kernels/gemm.h"
#include "kernels/gemv.h"
#include "kernels/norm.h"

namespace spark::kernels {
namespace {

#define BENCH_CHECK(expr)                                       \
  do {                                                          \
    const ::spark::Status bench_s_ = (expr);                    \
    if (!bench_s_.ok()) {                                       \
      std::fprintf(stderr, "%s\n", bench_s_.message().c_str()); \
      std::exit(2);                                             \
    }                                                           \
  } while (0)

void Cuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(err));
    std::exit(2);
  }
}

// A device buffer of random values (never zeros: they can run faster than real data).
template <typename T>
T* RandomDevice(size_t n, uint32_t seed) {
  T* d = nullptr;
  Cuda(cudaMalloc(&d, n * sizeof(T)), "cudaMalloc");
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  // One random chunk of 4M values, repeated: random enough for timing, quick to make.
  const size_t chunk = 1 << 22;
  std::vector<T> h(std::min(n, chunk));
  for (T& v : h) v = static_cast<T>(dist(rng));
  for (size_t at = 0; at < n; at += chunk) {
    const size_t m = std::min(chunk, n - at);
    Cuda(cudaMemcpy(d + at, h.data(), m * sizeof(T), cudaMemcpyHostToDevice), "upload");
  }
  return d;
}

// Median milliseconds per call of fn over 5 timed runs of `iters` calls, after warm-up.
double TimeMs(const std::function<void()>& fn, int iters) {
  for (int i = 0; i < 3; ++i) fn();
  Cuda(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> runs;
  for (int rep = 0; rep < 5; ++rep) {
    cudaEventRecord(a);
    for (int i = 0; i < iters; ++i) fn();
    cudaEventRecord(b);
    Cuda(cudaEventSynchronize(b), "timed run");
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    runs.push_back(ms / iters);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(runs.begin(), runs.end());
  return runs[2];
}

struct Row {
  std::string name;
  std::string shape;
  double ms = 0;
  double value = 0;  // GB/s or TFLOP/s
  std::string unit;
  double ceiling = 0;  // same unit
  double host_ms = 0;  // host time a call, where measured (deepseek)
};

void Print(const std::vector<Row>& rows) {
  std::printf("%-34s %-34s %10s %12s %10s\n", "kernel", "shape", "time_us", "achieved",
              "of_ceiling");
  for (const Row& r : rows) {
    char achieved[64];
    std::snprintf(achieved, sizeof(achieved), "%.1f %s", r.value, r.unit.c_str());
    std::printf("%-34s %-34s %10.1f %12s %9.1f%%", r.name.c_str(), r.shape.c_str(), r.ms * 1e3,
                achieved, 100.0 * r.value / r.ceiling);
    if (r.host_ms > 0) std::printf("  host %.1f us", r.host_ms * 1e3);
    std::printf("\n");
  }
}

double CopyBandwidth(size_t bytes) {
  char* src = RandomDevice<char>(bytes, 1);
  char* dst = nullptr;
  Cuda(cudaMalloc(&dst, bytes), "cudaMalloc");
  const double ms = TimeMs([&] { cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice); }, 10);
  cudaFree(src);
  cudaFree(dst);
  return 2.0 * bytes / (ms * 1e-3) / 1e9;  // read + write
}

template <typename T>
Row BenchRmsNorm(int64_t rows, int dim, bool fused, double copy_gbs) {
  T* x = RandomDevice<T>(rows * dim, 2);
  T* res = RandomDevice<T>(rows * dim, 3);
  T* w = RandomDevice<T>(dim, 4);
  T* out = RandomDevice<T>(rows * dim, 5);
  const double ms = TimeMs(
      [&] { BENCH_CHECK(RmsNorm<T>(x, fused ? res : nullptr, w, rows, dim, 1e-6f, out, nullptr)); },
      20);
  const double bytes = double(rows) * dim * sizeof(T) * (fused ? 4 : 2);  // x (+res r/w) + out
  for (T* p : {x, res, w, out}) cudaFree(p);
  const char* dt = sizeof(T) == 4 ? "fp32" : "bf16";
  return {std::string("rmsnorm") + (fused ? "+residual " : " ") + dt,
          std::to_string(rows) + "x" + std::to_string(dim),
          ms,
          bytes / (ms * 1e-3) / 1e9,
          "GB/s",
          copy_gbs};
}

// Decode attention of `batch` sequences of `context` tokens, Qwen3-8B heads (32 q, 8 kv, 128);
// queries of type T over a cache of type C; tensor_cores: the bf16 tensor-core kernel (bf16
// caches only).
template <typename T, typename C = T>
Row BenchDecodeAttention(int batch, int context, int sm_count, double copy_gbs,
                         bool tensor_cores = false) {
  const int heads = 32, kv_heads = 8, hd = 128, bs = 16;
  const int blocks_per_seq = (context + bs - 1) / bs;
  const int64_t blocks = int64_t{batch} * blocks_per_seq;
  const size_t cache = size_t(blocks) * bs * kv_heads * hd;
  C* k = RandomDevice<C>(cache, 6);
  C* v = RandomDevice<C>(cache, 7);
  T* q = RandomDevice<T>(size_t(batch) * heads * hd, 8);
  T* out = RandomDevice<T>(size_t(batch) * heads * hd, 9);
  std::vector<int32_t> tables(blocks);
  std::iota(tables.begin(), tables.end(), 0);
  std::shuffle(tables.begin(), tables.end(), std::mt19937(10));
  std::vector<int32_t> lens(batch, context), offsets(batch);
  for (int b = 0; b < batch; ++b) offsets[b] = b * blocks_per_seq;
  int32_t *dt = nullptr, *dl = nullptr, *doff = nullptr;
  Cuda(cudaMalloc(&dt, tables.size() * 4), "cudaMalloc");
  Cuda(cudaMalloc(&dl, batch * 4), "cudaMalloc");
  Cuda(cudaMalloc(&doff, batch * 4), "cudaMalloc");
  cudaMemcpy(dt, tables.data(), tables.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dl, lens.data(), batch * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(doff, offsets.data(), batch * 4, cudaMemcpyHostToDevice);
  const PagedKvLayout layout{heads, kv_heads, hd, bs, 1.0f / std::sqrt(float(hd)), tensor_cores};
  const DecodeRows rows{nullptr, dl, doff, dt, batch, context};
  const DecodeSplit plan = PlanDecodeSplit(rows, layout, sm_count, sizeof(C) == 2);
  float* ws = nullptr;
  Cuda(cudaMalloc(&ws, std::max<size_t>(1, plan.workspace_floats) * 4), "cudaMalloc");
  const double ms = TimeMs(
      [&] {
        BENCH_CHECK((PagedDecodeAttention<T, C>(q, rows, k, v, layout, plan, ws, out, nullptr)));
      },
      20);
  const double bytes = 2.0 * batch * context * kv_heads * hd * sizeof(C);
  for (void* p : {static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(q),
                  static_cast<void*>(out), static_cast<void*>(dt), static_cast<void*>(dl),
                  static_cast<void*>(doff), static_cast<void*>(ws)})
    cudaFree(p);
  std::string name = std::string("decode attention ") + (sizeof(T) == 4 ? "fp32" : "bf16");
  if (sizeof(C) != sizeof(T)) name += " q, bf16 cache";
  if (tensor_cores) name += ", tensor cores";
  return {name,
          "b" + std::to_string(batch) + " ctx" + std::to_string(context) + " splits" +
              std::to_string(plan.splits),
          ms,
          bytes / (ms * 1e-3) / 1e9,
          "GB/s",
          copy_gbs};
}

// Causal prefill attention of one sequence of `seq` tokens (already in the cache), Qwen3-8B
// heads; FLOPs counted as 2 * seq^2 * head_dim * heads (QK^T and PV over the causal half).
// tensor_cores: the bf16 tensor-core kernel (for an fp32 cache, rounding on the way in);
// otherwise the exact fp32 kernel. Queries of type T over a cache of type C.
template <typename T, typename C = T>
Row BenchPrefillAttention(int seq, bool tensor_cores, double peak_tflops) {
  const int heads = 32, kv_heads = 8, hd = 128, bs = 16;
  const int blocks = (seq + bs - 1) / bs;
  const size_t cache = size_t(blocks) * bs * kv_heads * hd;
  C* k = RandomDevice<C>(cache, 13);
  C* v = RandomDevice<C>(cache, 14);
  T* q = RandomDevice<T>(size_t(seq) * heads * hd, 15);
  T* out = RandomDevice<T>(size_t(seq) * heads * hd, 16);
  std::vector<int32_t> table(blocks);
  std::iota(table.begin(), table.end(), 0);
  std::vector<PrefillTile> tiles;
  for (int i = 0; i < seq; i += kPrefillTileRows) {
    tiles.push_back({i, std::min(kPrefillTileRows, seq - i), i + 1, 0});
  }
  int32_t *dt = nullptr, *dtiles = nullptr;
  Cuda(cudaMalloc(&dt, table.size() * 4), "cudaMalloc");
  Cuda(cudaMalloc(&dtiles, tiles.size() * sizeof(PrefillTile)), "cudaMalloc");
  cudaMemcpy(dt, table.data(), table.size() * 4, cudaMemcpyHostToDevice);
  cudaMemcpy(dtiles, tiles.data(), tiles.size() * sizeof(PrefillTile), cudaMemcpyHostToDevice);
  const PagedKvLayout layout{heads, kv_heads, hd, bs, 1.0f / std::sqrt(float(hd)),
                              tensor_cores};
  const double ms = TimeMs(
      [&] {
        BENCH_CHECK((PagedPrefillAttention<T, C>(q, reinterpret_cast<PrefillTile*>(dtiles),
                                                 static_cast<int>(tiles.size()), dt, k, v, layout,
                                                 out, nullptr)));
      },
      3);
  for (void* p : {static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(q),
                  static_cast<void*>(out), static_cast<void*>(dt), static_cast<void*>(dtiles)})
    cudaFree(p);
  const double flops = 2.0 * double(seq) * seq * hd * heads;
  std::string name = std::string("prefill attention ") + (sizeof(T) == 4 ? "fp32" : "bf16");
  if (sizeof(C) != sizeof(T)) {
    name += " q, bf16 cache";
  } else if (sizeof(T) == 4) {
    name += tensor_cores ? " cache, bf16 tensor cores" : " exact";
  }
  return {name,
          "seq" + std::to_string(seq) + " causal",
          ms,
          flops / (ms * 1e-3) / 1e12,
          "TFLOP/s",
          peak_tflops};
}

double GemmTflops(Gemm& gemm, int64_t m, int n, int k, GemmType out_type, double* ms_out) {
  auto* x = RandomDevice<__nv_bfloat16>(size_t(m) * k, 11);
  auto* w = RandomDevice<__nv_bfloat16>(size_t(n) * k, 12);
  void* out = nullptr;
  Cuda(cudaMalloc(&out, size_t(m) * n * 4), "cudaMalloc");
  const int iters = m * double(n) * k > 1e11 ? 10 : 50;
  const double ms =
      TimeMs([&] { BENCH_CHECK(gemm.Run(GemmType::kBF16, out_type, x, m, k, w, n, out, nullptr)); },
             iters);
  cudaFree(x);
  cudaFree(w);
  cudaFree(out);
  *ms_out = ms;
  return 2.0 * m * n * k / (ms * 1e-3) / 1e12;
}

// cuBLASLt's block-scaled FP8 GEMM (Gemm::RunFp8) on random E4M3 operands and scales; 0 when
// this GPU's cuBLASLt has none for the shape. The activations' quantisation is not timed.
double GemmFp8Tflops(Gemm& gemm, int64_t m, int n, int k, double* ms_out) {
  if (!gemm.SupportsFp8(m, n, k)) return 0;
  uint8_t *x = nullptr, *w = nullptr;
  Cuda(cudaMalloc(&x, size_t(m) * k), "cudaMalloc");
  Cuda(cudaMalloc(&w, size_t(n) * k), "cudaMalloc");
  BENCH_CHECK(FillFp8Uniform(x, size_t(m) * k, 21, -448, 448, nullptr));
  BENCH_CHECK(FillFp8Uniform(w, size_t(n) * k, 22, -448, 448, nullptr));
  float* xs = RandomDevice<float>(size_t(m) * (k / kFp8Block), 23);
  float* ws = RandomDevice<float>(size_t(n / kFp8Block) * (k / kFp8Block), 24);
  float* out = nullptr;
  Cuda(cudaMalloc(&out, size_t(m) * n * 4), "cudaMalloc");
  const int iters = m * double(n) * k > 1e11 ? 10 : 50;
  const double ms =
      TimeMs([&] { BENCH_CHECK(gemm.RunFp8(x, xs, m, k, w, ws, n, out, nullptr)); }, iters);
  for (void* p : {static_cast<void*>(x), static_cast<void*>(w), static_cast<void*>(xs),
                  static_cast<void*>(ws), static_cast<void*>(out)}) {
    cudaFree(p);
  }
  *ms_out = ms;
  return 2.0 * m * n * k / (ms * 1e-3) / 1e12;
}

// Decode GEMV over n x k weights of `fp8` (E4M3 + 128 x 128 scales) or bf16 type for `rows`
// activation rows (silu: the stacked [gate; up] GEMV with SiLU-mul, n = 2 x inter). Four copies
// of the weights, used in turn, so each call streams them from memory rather than L2. GB/s of
// weight bytes read.
Row BenchGemv(bool fp8, bool silu, int rows, int n, int k, double copy_gbs) {
  constexpr int kCopies = 4;
  const size_t count = size_t(n) * k, scale_count = size_t((n + kFp8Block - 1) / kFp8Block) *
                                                    ((k + kFp8Block - 1) / kFp8Block);
  const size_t bytes = fp8 ? count + 4 * scale_count : 2 * count;
  std::vector<void*> w(kCopies);
  std::vector<float*> scales(kCopies);
  for (int c = 0; c < kCopies; ++c) {
    if (fp8) {
      Cuda(cudaMalloc(&w[c], count), "cudaMalloc");
      BENCH_CHECK(FillFp8Uniform(static_cast<uint8_t*>(w[c]), count, 7 + c, -448, 448, nullptr));
      scales[c] = RandomDevice<float>(scale_count, 11 + c);
    } else {
      w[c] = RandomDevice<__nv_bfloat16>(count, 7 + c);
    }
  }
  float* x = RandomDevice<float>(size_t(rows) * k, 5);
  float* out = nullptr;
  Cuda(cudaMalloc(&out, sizeof(float) * rows * n), "cudaMalloc");
  int turn = 0;
  const double ms = TimeMs(
      [&] {
        const int c = turn++ % kCopies;
        const auto* wb = static_cast<const __nv_bfloat16*>(w[c]);
        const auto* w8 = static_cast<const uint8_t*>(w[c]);
        if (silu) {
          BENCH_CHECK(fp8 ? GemvFp8SiluMul(x, rows, k, w8, scales[c], n / 2, out, nullptr)
                          : GemvBf16SiluMul(x, rows, k, wb, n / 2, out, nullptr));
        } else {
          BENCH_CHECK(fp8 ? GemvFp8(x, rows, k, w8, scales[c], n, out, nullptr)
                          : GemvBf16(x, rows, k, wb, n, out, nullptr));
        }
      },
      20);
  for (int c = 0; c < kCopies; ++c) {
    cudaFree(w[c]);
    if (fp8) cudaFree(scales[c]);
  }
  cudaFree(x);
  cudaFree(out);
  return {std::string("gemv ") + (fp8 ? "fp8" : "bf16") + (silu ? " silu-mul" : "") + " b" +
              std::to_string(rows),
          std::to_string(n) + "x" + std::to_string(k),
          ms,
          bytes / (ms * 1e-3) / 1e9,
          "GB/s",
          copy_gbs};
}

int Main(int argc, char** argv) {
  const Result<engine::config::Environment> env = engine::config::ReadEnvironment();
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().message().c_str());
    return 2;
  }
  engine::config::ApplyKernelSettings(*env);
  CLI::App app{
      "Times the CUDA kernels against the GPU's measured ceilings.\n"
      "Example: spark-kernel-bench --json bench/results/kernels_h200.json"};
  std::string json_path;
  std::string only;
  bool quick = false;
  app.add_option("--json", json_path, "Also write the results as JSON to this file");
  app.add_flag("--quick", quick, "Smaller sizes (a smoke run, not for reporting)");
  app.add_option("--only", only,
                 "Run one family after the ceilings: norm, decode (attention), prefill "
                 "(attention), gemm, gemv (decode GEMVs, bf16 and fp8 weights), peer (the "
                 "tensor-parallel all-reduce + AddRmsNorm of two ranks, fused and not) or "
                 "deepseek (DeepSeek-V4.1-Flash's DeepseekOps: decode b1/8/32 at 4K and 64K, "
                 "prefill 8K) or deepseek-moe (its MoE layer alone)")
      ->check(CLI::IsMember(
          {"norm", "decode", "prefill", "gemm", "gemv", "peer", "deepseek", "deepseek-moe"}));
  CLI11_PARSE(app, argc, argv);
  if (CudaDeviceCount() == 0) {
    std::fprintf(stderr, "spark-kernel-bench: no CUDA device visible (check nvidia-smi)\n");
    return 2;
  }
  cudaDeviceProp prop{};
  Cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const double copy_gbs = CopyBandwidth(quick ? (256u << 20) : (size_t{2} << 30));
  auto gemm = Gemm::Create({});
  BENCH_CHECK(gemm.status());
  // The bf16 matrix ceiling: the best of a few large square products.
  double peak = 0, ms = 0;
  std::vector<Row> rows;
  for (int s : quick ? std::vector<int>{4096} : std::vector<int>{8192, 12288, 16384}) {
    const double t = GemmTflops(**gemm, s, s, s, GemmType::kBF16, &ms);
    peak = std::max(peak, t);
    rows.push_back({"gemm bf16 square", std::to_string(s) + "^3", ms, t, "TFLOP/s", 0});
  }
  for (Row& r : rows) r.ceiling = peak;
  rows.push_back({"d2d copy (read+write)", std::to_string(quick ? 256 : 2048) + " MiB", 0, copy_gbs,
                  "GB/s", copy_gbs});
  auto want = [&](const char* family) { return only.empty() || only == family; };
  const int64_t norm_rows = quick ? 4096 : 16384;
  if (want("norm")) {
    rows.push_back(BenchRmsNorm<__nv_bfloat16>(norm_rows, 4096, false, copy_gbs));
    rows.push_back(BenchRmsNorm<__nv_bfloat16>(norm_rows, 4096, true, copy_gbs));
    rows.push_back(BenchRmsNorm<float>(norm_rows, 4096, false, copy_gbs));
  }
  std::vector<std::pair<int, int>> decode_shapes;  // (batch, context)
  if (want("decode")) {
    decode_shapes = quick ? std::vector<std::pair<int, int>>{{8, 1024}}
                          : std::vector<std::pair<int, int>>{{1, 32768}, {32, 4096}, {1, 4096}};
  }
  for (auto [b, ctx] : decode_shapes) {
    rows.push_back(BenchDecodeAttention<__nv_bfloat16>(b, ctx, prop.multiProcessorCount, copy_gbs));
    rows.push_back(BenchDecodeAttention<float>(b, ctx, prop.multiProcessorCount, copy_gbs));
    rows.push_back(
        BenchDecodeAttention<float, __nv_bfloat16>(b, ctx, prop.multiProcessorCount, copy_gbs));
    rows.push_back(BenchDecodeAttention<float, __nv_bfloat16>(b, ctx, prop.multiProcessorCount,
                                                              copy_gbs, /*tensor_cores=*/true));
  }
  if (want("prefill")) {
    const int seq = quick ? 1024 : 8192;
    rows.push_back(BenchPrefillAttention<__nv_bfloat16>(seq, true, peak));
    rows.push_back(BenchPrefillAttention<float>(seq, true, peak));
    rows.push_back(BenchPrefillAttention<float, __nv_bfloat16>(seq, true, peak));
    rows.push_back(BenchPrefillAttention<float>(seq, false, peak));
  }
  if (want("gemv")) {  // Qwen3-8B's gate_up (SiLU-mul), down, q/k/v and o at batch 1 and 4
    for (bool fp8 : {false, true})
      for (int b : {1, 4}) {
        rows.push_back(BenchGemv(fp8, true, b, 24576, 4096, copy_gbs));
        rows.push_back(BenchGemv(fp8, false, b, 4096, 12288, copy_gbs));
        rows.push_back(BenchGemv(fp8, false, b, 6144, 4096, copy_gbs));
        rows.push_back(BenchGemv(fp8, false, b, 4096, 4096, copy_gbs));
      }
  }
  // A Qwen3-8B layer output at batch 1 and 32, 72 calls a graph (a step); only when asked for
  // (two ranks: with one GPU they share it).
  if (only == "peer") {
    // Against the signal protocol's two kernels at the same batch.
    for (int b : {1, 32}) {
      double base_us = 0;
      for (PeerProtocol protocol : {PeerProtocol::kSignal, PeerProtocol::kOneWay}) {
        const PeerTimes t = TimePeerAllReduceNorm(b, 4096, 72, protocol);
        if (base_us == 0) base_us = t.two_kernels_us;
        const std::string where =
            std::string(protocol == PeerProtocol::kSignal ? ", signal" : ", one-way") +
            (t.one_device ? " (2 ranks, 1 GPU)" : " (2 GPUs)");
        const std::string shape = std::to_string(b) + "x4096, 72 a graph";
        rows.push_back({"peer sum, add+rmsnorm" + where, shape, t.two_kernels_us * 1e-3,
                        base_us / t.two_kernels_us, "x", 1.0});
        rows.push_back({"peer sum+add+rmsnorm fused" + where, shape, t.fused_us * 1e-3,
                        base_us / t.fused_us, "x", 1.0});
      }
    }
  }
  if (only == "deepseek" || only == "deepseek-moe") {  // only when asked: a few minutes
    for (const DeepseekTiming& d : only == "deepseek" ? BenchDeepseekOps(copy_gbs, quick)
                                                       : BenchDeepseekMoe(copy_gbs, quick)) {
      rows.push_back({d.name, d.shape, d.ms, d.value, d.unit, d.ceiling, d.host_ms});
    }
  }
  // Qwen3-8B-shaped GEMMs: an 8K-token prefill's projections and batch-32 decode.
  struct Shape {
    int64_t m;
    int n, k;
    const char* what;
  };
  const std::vector<Shape> shapes = {{8192, 6144, 4096, "prefill qkv"},
                                     {8192, 24576, 4096, "prefill gate_up"},
                                     {8192, 4096, 12288, "prefill down"},
                                     {32, 24576, 4096, "decode b32 gate_up"},
                                     {32, 4096, 12288, "decode b32 down"},
                                     {32, 4096, 4096, "decode b32 o"},
                                     {1, 24576, 4096, "decode b1 gate_up"}};
  for (const Shape& s : shapes) {
    if ((quick && s.m > 1024) || !want("gemm")) continue;
    const double t = GemmTflops(**gemm, s.m, s.n, s.k, GemmType::kBF16, &ms);
    rows.push_back({std::string("gemm bf16 ") + s.what,
                    std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k), ms,
                    t, "TFLOP/s", peak});
    if (s.m <= 32) {  // weight-streaming: report bandwidth too
      const double bytes = 2.0 * s.n * s.k + 2.0 * s.m * (s.k + s.n);
      rows.push_back({std::string("gemm bf16 ") + s.what + " (bytes)", rows.back().shape, ms,
                      bytes / (ms * 1e-3) / 1e9, "GB/s", copy_gbs});
    }
    // The same shape in block-scaled FP8 (m padded to 16, as the engine does), where cuBLASLt
    // has it.
    const int64_t m16 = (s.m + 15) / 16 * 16;
    const double t8 = GemmFp8Tflops(**gemm, m16, s.n, s.k, &ms);
    if (t8 > 0) {
      rows.push_back({std::string("gemm fp8 ") + s.what,
                      std::to_string(m16) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k),
                      ms, t8, "TFLOP/s", peak});
      if (s.m <= 32) {
        const double bytes = 1.0 * s.n * s.k + 4.0 * m16 * s.n;
        rows.push_back({std::string("gemm fp8 ") + s.what + " (bytes)", rows.back().shape, ms,
                        bytes / (ms * 1e-3) / 1e9, "GB/s", copy_gbs});
      }
    }
  }
  std::printf("gpu: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  Print(rows);
  if (!json_path.empty()) {
    nlohmann::json j;
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    j["gpu"] = prop.name;
    j["date"] = date;
    j["sm_count"] = prop.multiProcessorCount;
    j["copy_bandwidth_gbs"] = copy_gbs;
    j["bf16_gemm_peak_tflops"] = peak;
    for (const Row& r : rows) {
      j["results"].push_back({{"kernel", r.name},
                              {"shape", r.shape},
                              {"time_us", r.ms * 1e3},
                              {"achieved", r.value},
                              {"unit", r.unit},
                              {"ceiling", r.ceiling},
                              {"ratio", r.value / r.ceiling}});
      if (r.host_ms > 0) j["results"].back()["host_us"] = r.host_ms * 1e3;
    }
    std::ofstream(json_path) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace
}  // namespace spark::kernels

int main(int argc, char** argv) { return spark::kernels::Main(argc, argv); }
