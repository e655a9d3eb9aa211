// CudaBackend's ops against CpuBackend (the reference) on random inputs, through the Backend
// interface exactly as the model calls them. fp32 on both sides: within 1e-5 relative (L2)
// except where noted.
#include "engine/backend/cuda/cuda_backend.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <deque>
#include <numeric>
#include <random>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/core/dtype.h"
#include "kernels/cuda_check.h"
#include "kernels/gemv.h"
#include "kernels/launch_settings.h"
#include "tests/engine/backend/cuda_backend_test_util.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::engine::backend::cuda {
namespace {

using kernels::testing::Random;
using kernels::testing::RelL2;


TEST_F(CudaBackendTest, AllocateZeroesAndRoundTrips) {
  auto b = gpu_->Allocate(1000);
  ASSERT_TRUE(b.ok());
  std::vector<float> h(1000, 1.0f);
  gpu_->Download(b->data(), h);
  EXPECT_EQ(std::count(h.begin(), h.end(), 0.0f), 1000);
  const auto x = Random(1000, 1);
  gpu_->Upload(x, b->data());
  EXPECT_EQ(Get(*b), x);
}

TEST_F(CudaBackendTest, WeightBytesCrossStagingBuffersAndMatchCpu) {
  // Rows of 16 KiB (8192 bf16) make both uploads span more than one 32 MiB staging buffer.
  const size_t rows = 3000, cols = 8192, row_bytes = cols * 2;
  std::vector<uint16_t> src(rows * cols);
  std::mt19937 rng(7);
  for (uint16_t& v : src) v = static_cast<uint16_t>(rng());
  const auto* bytes = reinterpret_cast<const uint8_t*>(src.data());
  // All rows as one run, then columns [1000, 1000 + 5000) of every row.
  const Backend::WeightBytes run{bytes, 1, rows * row_bytes, rows * row_bytes};
  const Backend::WeightBytes slice{bytes + 2000, rows, 10000, row_bytes};
  const size_t elems = rows * cols + rows * 5000;
  auto on_gpu = gpu_->AllocateWeights(elems, DType::kBF16);
  auto on_cpu = cpu_.AllocateWeights(elems, DType::kBF16);
  ASSERT_TRUE(on_gpu.ok() && on_cpu.ok());
  for (Backend* b : std::initializer_list<Backend*>{gpu_.get(), &cpu_}) {
    Buffer& dst = b == &cpu_ ? *on_cpu : *on_gpu;
    ASSERT_TRUE(b->UploadWeightBytes(run, dst, 0).ok());
    ASSERT_TRUE(b->UploadWeightBytes(slice, dst, run.size()).ok());
    ASSERT_TRUE(b->FinishWeightUploads().ok()) << b->status().message();
  }
  std::vector<float> got(elems / 2);
  gpu_->Download(static_cast<const float*>(on_gpu->raw()), got);
  EXPECT_EQ(std::memcmp(got.data(), on_cpu->raw(), elems * 2), 0);
  EXPECT_EQ(gpu_->UploadWeightBytes(run, *on_gpu, elems * 2 - 2).code(),
            StatusCode::kInvalidArgument);

  // The same column slice read from a file with pread, and widened into fp32 weights.
  char path[] = "/tmp/spark_weight_bytes_XXXXXX";
  const int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(write(fd, src.data(), src.size() * 2), static_cast<ssize_t>(src.size() * 2));
  Backend::WeightBytes from_file = slice;
  from_file.fd = fd;
  from_file.file_offset = 2000;
  from_file.src = nullptr;  // must not be touched
  auto bf16_gpu = gpu_->AllocateWeights(rows * 5000, DType::kBF16);
  auto f32_gpu = gpu_->Allocate(rows * 5000);
  ASSERT_TRUE(bf16_gpu.ok() && f32_gpu.ok());
  ASSERT_TRUE(gpu_->UploadWeightBytes(from_file, *bf16_gpu, 0).ok());
  Backend::WeightBytes widen = slice;
  widen.widen_bf16 = true;
  ASSERT_TRUE(gpu_->UploadWeightBytes(widen, *f32_gpu, 0).ok());
  ASSERT_TRUE(gpu_->FinishWeightUploads().ok());
  close(fd);
  unlink(path);
  std::vector<float> slice_bits(rows * 5000 / 2), widened(rows * 5000);
  gpu_->Download(static_cast<const float*>(bf16_gpu->raw()), slice_bits);
  gpu_->Download(f32_gpu->data(), widened);
  const auto* cpu_bits = static_cast<const uint16_t*>(on_cpu->raw()) + rows * cols;
  EXPECT_EQ(std::memcmp(slice_bits.data(), cpu_bits, rows * 5000 * 2), 0);
  for (size_t i = 0; i < widened.size(); i += 997) {
    const float want = core::Bf16ToFloat(cpu_bits[i]);
    ASSERT_TRUE(widened[i] == want || (std::isnan(want) && std::isnan(widened[i]))) << i;
  }
}

TEST_F(CudaBackendTest, ElementwiseOpsMatchCpu) {
  const int rows = 5, dim = 256, inter = 96, hidden = 64;
  const auto x = Random(rows * dim, 2), w = Random(dim, 3), y = Random(rows * dim, 4);
  std::vector<float> want(rows * dim);
  cpu_.RmsNorm(x.data(), w.data(), rows, dim, 1e-6f, want.data());
  Buffer gx = Put(x), gw = Put(w), gy = Put(y), gout = Put(std::vector<float>(rows * dim));
  gpu_->RmsNorm(gx.data(), gw.data(), rows, dim, 1e-6f, gout.data());
  EXPECT_LT(RelL2(Get(gout), want), 1e-5);

  std::vector<float> sum = x;
  cpu_.Add(sum.data(), y.data(), sum.size());
  gpu_->Add(gx.data(), gy.data(), x.size());
  EXPECT_LT(RelL2(Get(gx), sum), 1e-7);

  const auto gu = Random(rows * 2 * inter, 5);
  std::vector<float> act(rows * inter);
  cpu_.SiluMul(gu.data(), rows, inter, act.data());
  Buffer ggu = Put(gu), gact = Put(std::vector<float>(rows * inter));
  gpu_->SiluMul(ggu.data(), rows, inter, gact.data());
  EXPECT_LT(RelL2(Get(gact), act), 1e-6);

  const auto table = Random(20 * hidden, 6);
  const std::vector<int32_t> ids = {40, 45, 59, 60, 3};
  std::vector<float> emb(ids.size() * hidden);
  cpu_.Embedding(table.data(), 40, 20, hidden, ids, emb.data());
  Buffer gt = Put(table), gemb = Put(std::vector<float>(emb.size(), 7.0f));
  gpu_->Embedding(gt.data(), 40, 20, hidden, ids, gemb.data());
  EXPECT_EQ(Get(gemb), emb);
}

TEST_F(CudaBackendTest, LinearAndRopeMatchCpu) {
  const int rows = 9, in = 200, out = 301, heads = 3, hd = 64;
  const auto x = Random(rows * in, 7), w = Random(out * in, 8);
  std::vector<float> want(rows * out);
  cpu_.Linear(x.data(), rows, in, w.data(), out, want.data());
  Buffer gx = Put(x), gw = Put(w), gout = Put(std::vector<float>(rows * out));
  gpu_->Linear(gx.data(), rows, in, gw.data(), out, gout.data());
  EXPECT_LT(RelL2(Get(gout), want), 1e-5);

  auto q = Random(rows * heads * hd, 9);
  const std::vector<int32_t> pos = {0, 1, 2, 3, 100, 101, 1000, 5000, 40000};
  Buffer gq = Put(q);
  cpu_.Rope(q.data(), pos, heads, hd, 1e6);
  gpu_->Rope(gq.data(), pos, heads, hd, 1e6);
  EXPECT_LT(RelL2(Get(gq), q), 1e-5);
}

// bf16 weights: the GEMV (1..4 rows, fp32 activations) equals the CPU backend's Linear over the
// same rounded weights to fp32 accuracy; more rows go through the bf16 tensor-core GEMM, which
// rounds the activations too (bf16 tolerance).
TEST_F(CudaBackendTest, Bf16LinearMatchesCpuOnRoundedWeights) {
  const int in = 4096 + 8, out = 333;
  const auto w = Random(size_t{out} * in, 21);
  auto cw = cpu_.AllocateWeights(w.size(), DType::kBF16);
  auto gw = gpu_->AllocateWeights(w.size(), DType::kBF16);
  ASSERT_TRUE(cw.ok() && gw.ok());
  cpu_.UploadWeights(w, *cw);
  gpu_->UploadWeights(w, *gw);
  for (int rows : {1, 2, 3, 4, 9}) {
    const auto x = Random(static_cast<size_t>(rows) * in, 22 + rows);
    std::vector<float> want(static_cast<size_t>(rows) * out);
    cpu_.Linear(x.data(), rows, in, cw->weight(), out, want.data());
    Buffer gx = Put(x), gout = Put(std::vector<float>(static_cast<size_t>(rows) * out));
    gpu_->Linear(gx.data(), rows, in, gw->weight(), out, gout.data());
    // GEMV rows keep fp32 activations; the GEMM rounds them to bf16.
    const int gemv_rows = kernels::GetLaunchSettings().gemv_max_rows;
    EXPECT_LT(RelL2(Get(gout), want), rows <= gemv_rows ? 1e-5 : 1e-2) << rows << " rows";
  }
  // The rounding is real: fp32 weights give a different result.
  const auto x = Random(in, 30);
  std::vector<float> exact(out), rounded(out);
  cpu_.Linear(x.data(), 1, in, w.data(), out, exact.data());
  cpu_.Linear(x.data(), 1, in, cw->weight(), out, rounded.data());
  EXPECT_GT(RelL2(rounded, exact), 1e-4);
}

// fp8 weights: the GEMV (1..4 rows) equals the CPU backend's Linear over the same quantised
// matrix to fp32 accuracy; more rows widen the weights to bf16 for the tensor-core GEMM (bf16
// tolerance). The SiLU-and-mul GEMV over a stacked [gate; up] fp8 matrix likewise.
TEST_F(CudaBackendTest, Fp8LinearMatchesCpuOnTheSameQuantisedWeights) {
  const int in = 4096 + 16, out = 333;
  Buffer cw, gw;
  ASSERT_NO_FATAL_FAILURE(Matrices(Random(size_t{out} * in, 41), out, in, DType::kFP8, &cw, &gw));
  for (int rows : {1, 2, 3, 4, 9}) {
    const auto x = Random(static_cast<size_t>(rows) * in, 42 + rows);
    std::vector<float> want(static_cast<size_t>(rows) * out);
    cpu_.Linear(x.data(), rows, in, cw.weight(), out, want.data());
    Buffer gx = Put(x), gout = Put(std::vector<float>(static_cast<size_t>(rows) * out));
    gpu_->Linear(gx.data(), rows, in, gw.weight(), out, gout.data());
    EXPECT_LT(RelL2(Get(gout), want), rows <= 4 ? 1e-5 : 1e-2) << rows << " rows";
  }
  // A shape cuBLASLt's block-scaled FP8 GEMM takes (Hopper; k a multiple of 512, n of 128): the
  // activations are quantised to E4M3 per 1 x 128 block too (fp8 tolerance); 3 and 9 rows are
  // padded to 16.
  {
    const int k8 = 4096, n8 = 384;
    Buffer c8, g8;
    ASSERT_NO_FATAL_FAILURE(Matrices(Random(size_t{n8} * k8, 60), n8, k8, DType::kFP8, &c8, &g8));
    for (int rows : {3, 9, 32}) {  // 3: the FP8 GEMM rather than the GEMV, where it exists
      const auto x = Random(static_cast<size_t>(rows) * k8, 61 + rows);
      std::vector<float> want(static_cast<size_t>(rows) * n8);
      cpu_.Linear(x.data(), rows, k8, c8.weight(), n8, want.data());
      Buffer gx = Put(x), gout = Put(std::vector<float>(static_cast<size_t>(rows) * n8));
      gpu_->Linear(gx.data(), rows, k8, g8.weight(), n8, gout.data());
      EXPECT_LT(RelL2(Get(gout), want), 5e-2) << rows << " rows";
    }
    // Two outputs of one input (q and k, say): the input quantised once, each GEMM as above.
    Buffer c2, g2;
    ASSERT_NO_FATAL_FAILURE(Matrices(Random(size_t{128} * k8, 70), 128, k8, DType::kFP8, &c2, &g2));
    const int rows = 9;
    const auto x = Random(static_cast<size_t>(rows) * k8, 71);
    std::vector<float> want_a(size_t{rows} * n8), want_b(size_t{rows} * 128);
    cpu_.Linear(x.data(), rows, k8, c8.weight(), n8, want_a.data());
    cpu_.Linear(x.data(), rows, k8, c2.weight(), 128, want_b.data());
    Buffer gx = Put(x), ga = Put(std::vector<float>(want_a.size())),
           gb = Put(std::vector<float>(want_b.size()));
    const LinearOut outs[] = {{g8.weight(), n8, ga.data()}, {g2.weight(), 128, gb.data()}};
    gpu_->LinearMany(gx.data(), rows, k8, outs);
    EXPECT_LT(RelL2(Get(ga), want_a), 5e-2);
    EXPECT_LT(RelL2(Get(gb), want_b), 5e-2);
  }
  const int inter = 150, rows = 2;  // gate rows 0..149, up rows 150..299 of one block grid
  Buffer cgu, ggu;
  ASSERT_NO_FATAL_FAILURE(
      Matrices(Random(size_t{2 * inter} * in, 50), 2 * inter, in, DType::kFP8, &cgu, &ggu));
  const auto x = Random(size_t{rows} * in, 51);
  std::vector<float> scratch(size_t{rows} * 2 * inter), want(size_t{rows} * inter);
  cpu_.LinearSiluMul(x.data(), rows, in, cgu.weight(), inter, scratch.data(), want.data());
  Buffer gx = Put(x), gscratch = Put(scratch), gact = Put(std::vector<float>(want.size()));
  gpu_->LinearSiluMul(gx.data(), rows, in, ggu.weight(), inter, gscratch.data(), gact.data());
  EXPECT_LT(RelL2(Get(gact), want), 1e-5);
  ASSERT_TRUE(gpu_->Synchronize().ok()) << gpu_->status().message();
}

// Ops that write an activation write its bf16 copy when asked (Output::bf16), and a Linear over
// bf16 weights that reads the copy (Input::bf16) gives the same bits as one that casts the fp32
// values itself: RmsNorm, AddRmsNorm, SiluMul and LinearSiluMul past the GEMV.
TEST_F(CudaBackendTest, Bf16CopiesGiveTheBitsOfACast) {
  const int rows = 9, in = 512, out = 200;
  ASSERT_TRUE(gpu_->Bf16InputsPay(rows, DType::kBF16));
  ASSERT_FALSE(gpu_->Bf16InputsPay(kernels::GetLaunchSettings().gemv_max_rows, DType::kBF16));
  ASSERT_FALSE(gpu_->Bf16InputsPay(rows, DType::kF32));
  const auto w = Random(size_t{out} * in, 41);
  auto gw = gpu_->AllocateWeights(w.size(), DType::kBF16);
  ASSERT_TRUE(gw.ok());
  gpu_->UploadWeights(w, *gw);
  auto linear = [&](backend::Input x) {
    Buffer y = Put(std::vector<float>(size_t{rows} * out));
    gpu_->Linear(x, rows, in, gw->weight(), out, y.data());
    return Get(y);
  };
  Buffer h = Put(Random(size_t{rows} * in, 43)), delta = Put(Random(size_t{rows} * in, 44));
  Buffer nw = Put(Random(in, 45)), x = Put(std::vector<float>(size_t{rows} * in));
  Buffer x16 = Put(std::vector<float>(size_t{rows} * in / 2));
  const backend::Output xo{x.data(), x16.raw()};
  gpu_->AddRmsNorm(h.data(), delta.data(), nw.data(), rows, in, 1e-6f, xo);
  EXPECT_EQ(linear(xo), linear(x.data())) << "after AddRmsNorm";
  gpu_->RmsNorm(h.data(), nw.data(), rows, in, 1e-6f, xo);
  EXPECT_EQ(linear(xo), linear(x.data())) << "after RmsNorm";
  // SiluMul's copy (the down projection's input), and LinearSiluMul's, past the GEMV.
  Buffer gu = Put(Random(size_t{rows} * 2 * in, 47));
  gpu_->SiluMul(gu.data(), rows, in, xo);
  EXPECT_EQ(linear(xo), linear(x.data())) << "after SiluMul";
  const auto wgu = Random(size_t{2 * in} * in, 48);
  auto ggu = gpu_->AllocateWeights(wgu.size(), DType::kBF16);
  ASSERT_TRUE(ggu.ok());
  gpu_->UploadWeights(wgu, *ggu);
  Buffer scratch = Put(std::vector<float>(size_t{rows} * 2 * in));
  gpu_->LinearSiluMul(h.data(), rows, in, ggu->weight(), in, scratch.data(), xo);
  EXPECT_EQ(linear(xo), linear(x.data())) << "after LinearSiluMul";
  ASSERT_TRUE(gpu_->Synchronize().ok()) << gpu_->status().message();
}

// q/k/v from one Linear over the stacked matrix, read by QkNormRopeWriteKv from the stacked rows
// (a.qkv): the same bits in q, k, v and both caches as LinearMany into three buffers followed by
// QkNormRopeWriteKv of those, for both cache types; and within fp32 rounding of the CPU backend,
// whose default splits the stacked rows first (SplitColumns).
TEST_F(CudaBackendTest, StackedQkvMatchesThreeOutputs) {
  const int rows = 9, in = 512, heads = 4, kv_heads = 2, hd = 128, slots_total = 12;
  const int n[3] = {heads * hd, kv_heads * hd, kv_heads * hd};
  const int total = n[0] + n[1] + n[2];
  const auto stack = Random(static_cast<size_t>(total) * in, 80);
  auto gst = gpu_->AllocateWeights(stack.size(), DType::kBF16);
  ASSERT_TRUE(gst.ok());
  gpu_->UploadWeights(stack, *gst);
  auto cst = cpu_.AllocateWeights(stack.size(), DType::kBF16);
  ASSERT_TRUE(cst.ok());
  cpu_.UploadWeights(stack, *cst);
  const auto x = Random(size_t{rows} * in, 81), qw = Random(hd, 82), kw = Random(hd, 83);
  Buffer gx = Put(x), gqw = Put(qw), gkw = Put(kw);
  std::vector<int32_t> pos(rows);
  std::vector<int64_t> slots(rows);
  for (int i = 0; i < rows; ++i) {
    pos[i] = 3 + 11 * i;
    slots[i] = (5 * i + 2) % slots_total;
  }
  for (DType cache_type : {DType::kBF16, DType::kF32}) {
    SCOPED_TRACE(DTypeName(cache_type));
    const size_t floats = size_t{slots_total} * n[1] / (cache_type == DType::kBF16 ? 2 : 1);
    std::vector<std::vector<float>> got[2];
    for (bool stacked : {false, true}) {
      std::vector<Buffer> out;
      for (int i = 0; i < 3; ++i) out.push_back(Put(std::vector<float>(size_t{rows} * n[i], -1.0f)));
      Buffer qkv = Put(std::vector<float>(size_t{rows} * total, -1.0f));
      Buffer kc = Put(std::vector<float>(floats)), vc = Put(std::vector<float>(floats));
      backend::QkvToCache a{.q = out[0].data(),
                            .k = out[1].data(),
                            .v = out[2].data(),
                            .heads = heads,
                            .kv_heads = kv_heads,
                            .head_dim = hd,
                            .q_norm = gqw.data(),
                            .k_norm = gkw.data(),
                            .eps = 1e-6f,
                            .theta = 1e6,
                            .cache = {kc.data(), vc.data(), cache_type}};
      if (stacked) {
        gpu_->Linear(gx.data(), rows, in, gst->weight(), total, qkv.data());
        a.qkv = qkv.data();
        a.qkv_stride = total;
      } else {
        std::vector<LinearOut> outs;
        for (int i = 0, at = 0; i < 3; at += n[i] * in, ++i) {
          outs.push_back({gst->View(at, n[i] * in).weight(), n[i], out[i].data()});
        }
        gpu_->LinearMany(gx.data(), rows, in, outs);
      }
      gpu_->QkNormRopeWriteKv(a, pos, slots);
      got[stacked] = {Get(out[0]), Get(out[1]), Get(out[2]), Get(kc), Get(vc)};
    }
    const char* names[] = {"q", "k", "v", "k cache", "v cache"};
    for (int i = 0; i < 5; ++i) EXPECT_EQ(got[1][i], got[0][i]) << names[i];
    if (cache_type != DType::kF32) continue;
    // The CPU backend: one Linear, then the default's split.
    std::vector<float> cq(size_t{rows} * n[0]), ck(size_t{rows} * n[1]), cv(size_t{rows} * n[2]);
    std::vector<float> cqkv(size_t{rows} * total), ckc(floats), cvc(floats);
    cpu_.Linear(x.data(), rows, in, cst->weight(), total, cqkv.data());
    cpu_.QkNormRopeWriteKv({.q = cq.data(),
                            .k = ck.data(),
                            .v = cv.data(),
                            .qkv = cqkv.data(),
                            .qkv_stride = total,
                            .heads = heads,
                            .kv_heads = kv_heads,
                            .head_dim = hd,
                            .q_norm = qw.data(),
                            .k_norm = kw.data(),
                            .eps = 1e-6f,
                            .theta = 1e6,
                            .cache = {ckc.data(), cvc.data(), DType::kF32}},
                           pos, slots);
    EXPECT_LT(RelL2(got[1][0], cq), 1e-2) << "q against the cpu";
    EXPECT_LT(RelL2(got[1][3], ckc), 1e-2) << "k cache against the cpu";
    EXPECT_LT(RelL2(got[1][4], cvc), 1e-2) << "v cache against the cpu";
  }
}

// The fusions against the CPU backend's unfused defaults: q/k/v through one GEMV launch,
// gate/up GEMV + SiLU-mul, residual add + RMSNorm, per-head RMSNorm + RoPE and the same with
// the KV cache write (head_dim 64, 128, 256; scattered slots).
TEST_F(CudaBackendTest, FusedOpsMatchCpuDefaults) {
  // As many rows as a bf16 Linear runs as a GEMV (kernels::LaunchSettings::gemv_max_rows).
  const int in = 512, rows = kernels::GetLaunchSettings().gemv_max_rows;
  const int n[3] = {256, 64, 64};
  const auto x = Random(rows * in, 50);
  Buffer gx = Put(x);
  std::vector<Buffer> cw, gw, gout;
  std::vector<std::vector<float>> want(3);
  std::vector<LinearOut> couts, gouts;
  for (int i = 0; i < 3; ++i) {
    const auto w = Random(static_cast<size_t>(n[i]) * in, 51 + i);
    cw.push_back(*cpu_.AllocateWeights(w.size(), DType::kBF16));
    gw.push_back(*gpu_->AllocateWeights(w.size(), DType::kBF16));
    cpu_.UploadWeights(w, cw.back());
    gpu_->UploadWeights(w, gw.back());
    want[i].resize(rows * n[i]);
    gout.push_back(Put(std::vector<float>(rows * n[i])));
  }
  for (int i = 0; i < 3; ++i) {
    couts.push_back({cw[i].weight(), n[i], want[i].data()});
    gouts.push_back({gw[i].weight(), n[i], gout[i].data()});
  }
  cpu_.LinearMany(x.data(), rows, in, couts);
  gpu_->LinearMany(gx.data(), rows, in, gouts);
  for (int i = 0; i < 3; ++i) EXPECT_LT(RelL2(Get(gout[i]), want[i]), 1e-5) << "output " << i;

  // Weights stacked in one matrix (Qwen3's q/k/v views) at a decode batch past the GEMV: one
  // GEMM over the stack, then the columns split out (activations rounded to bf16: 1e-2).
  const int brows = 9;
  const auto bx = Random(brows * in, 56);
  const auto stack = Random(size_t{256 + 64 + 64} * in, 57);
  auto cst = cpu_.AllocateWeights(stack.size(), DType::kBF16);
  auto gst = gpu_->AllocateWeights(stack.size(), DType::kBF16);
  ASSERT_TRUE(cst.ok() && gst.ok());
  cpu_.UploadWeights(stack, *cst);
  gpu_->UploadWeights(stack, *gst);
  Buffer gbx = Put(bx);
  std::vector<std::vector<float>> bwant(3);
  std::vector<Buffer> bgot;
  std::vector<LinearOut> bc, bg;
  for (int i = 0, at = 0; i < 3; at += n[i] * in, ++i) {
    bwant[i].resize(brows * n[i]);
    bgot.push_back(Put(std::vector<float>(brows * n[i])));
    bc.push_back({cst->View(at, n[i] * in).weight(), n[i], bwant[i].data()});
    bg.push_back({gst->View(at, n[i] * in).weight(), n[i], bgot[i].data()});
  }
  cpu_.LinearMany(bx.data(), brows, in, bc);
  gpu_->LinearMany(gbx.data(), brows, in, bg);
  for (int i = 0; i < 3; ++i) EXPECT_LT(RelL2(Get(bgot[i]), bwant[i]), 1e-2) << "stacked " << i;

  const int inter = 200;
  const auto wgu = Random(size_t{2} * inter * in, 55);
  auto cgu = cpu_.AllocateWeights(wgu.size(), DType::kBF16);
  auto ggu = gpu_->AllocateWeights(wgu.size(), DType::kBF16);
  ASSERT_TRUE(cgu.ok() && ggu.ok());
  cpu_.UploadWeights(wgu, *cgu);
  gpu_->UploadWeights(wgu, *ggu);
  std::vector<float> scratch(rows * 2 * inter), act(rows * inter);
  cpu_.LinearSiluMul(x.data(), rows, in, cgu->weight(), inter, scratch.data(), act.data());
  Buffer gscratch = Put(scratch), gact = Put(std::vector<float>(rows * inter));
  gpu_->LinearSiluMul(gx.data(), rows, in, ggu->weight(), inter, gscratch.data(), gact.data());
  EXPECT_LT(RelL2(Get(gact), act), 1e-5) << "LinearSiluMul";

  const int dim = 4096;
  auto h = Random(rows * dim, 60);
  const auto delta = Random(rows * dim, 61), nw = Random(dim, 62);
  Buffer gh = Put(h), gd = Put(delta), gnw = Put(nw), gnorm = Put(std::vector<float>(rows * dim));
  std::vector<float> norm(rows * dim);
  cpu_.AddRmsNorm(h.data(), delta.data(), nw.data(), rows, dim, 1e-6f, norm.data());
  gpu_->AddRmsNorm(gh.data(), gd.data(), gnw.data(), rows, dim, 1e-6f, gnorm.data());
  EXPECT_LT(RelL2(Get(gh), h), 1e-7);
  EXPECT_LT(RelL2(Get(gnorm), norm), 1e-5);

  for (int hd : {64, 128, 256}) {
    const int heads = 5;
    const std::vector<int32_t> pos = {0, 7, 300, 40000};
    auto q = Random(pos.size() * heads * hd, 70 + hd);
    const auto qw = Random(hd, 71 + hd);
    Buffer gq = Put(q), gqw = Put(qw);
    cpu_.HeadNormRope(q.data(), pos, heads, hd, qw.data(), 1e-6f, 1e6);
    gpu_->HeadNormRope(gq.data(), pos, heads, hd, gqw.data(), 1e-6f, 1e6);
    EXPECT_LT(RelL2(Get(gq), q), 1e-5) << "head_dim " << hd;

    const int kv_heads = 2, kv_width = kv_heads * hd, slots_total = 9;
    const std::vector<int64_t> slots = {7, 0, 4, 8};
    auto k = Random(pos.size() * kv_width, 72 + hd), v = Random(pos.size() * kv_width, 73 + hd);
    const auto kw = Random(hd, 74 + hd);
    for (DType cache_type : {DType::kF32, DType::kBF16}) {
      SCOPED_TRACE(DTypeName(cache_type));
      // A bf16 cache lives in float storage of half the count.
      const size_t floats =
          cache_type == DType::kF32 ? slots_total * kv_width : slots_total * kv_width / 2;
      std::vector<float> kc(floats, 0.5f), vc(floats, 0.5f), qc = q, kk = k;
      Buffer gq2 = Put(q), gk = Put(k), gv = Put(v), gkw = Put(kw), gkc = Put(kc), gvc = Put(vc);
      // The same layer's arguments over host (CPU backend) or device (GPU) buffers.
      auto args = [&](float* q_in, float* k_in, float* v_in, const float* q_norm,
                      const float* k_norm, float* k_cache, float* v_cache) {
        return backend::QkvToCache{.q = q_in,
                                   .k = k_in,
                                   .v = v_in,
                                   .heads = heads,
                                   .kv_heads = kv_heads,
                                   .head_dim = hd,
                                   .q_norm = q_norm,
                                   .k_norm = k_norm,
                                   .eps = 1e-6f,
                                   .theta = 1e6,
                                   .cache = {k_cache, v_cache, cache_type}};
      };
      cpu_.QkNormRopeWriteKv(
          args(qc.data(), kk.data(), v.data(), qw.data(), kw.data(), kc.data(), vc.data()), pos,
          slots);
      const backend::QkvToCache g =
          args(gq2.data(), gk.data(), gv.data(), gqw.data(), gkw.data(), gkc.data(), gvc.data());
      gpu_->QkNormRopeWriteKv(g, pos, slots);
      EXPECT_LT(RelL2(Get(gq2), qc), 1e-5) << "q, head_dim " << hd;
      EXPECT_LT(RelL2(Get(gk), kk), 1e-5) << "k, head_dim " << hd;
      if (cache_type == DType::kF32) {
        EXPECT_LT(RelL2(Get(gkc), kc), 1e-5) << "k cache, head_dim " << hd;
        EXPECT_EQ(Get(gvc), vc) << "v cache, head_dim " << hd;
      } else {
        // Rounding the same (to ~1e-7) fp32 keys: equal bf16 but for rare rounding ties.
        EXPECT_LT(RelL2(WidenBf16(Get(gkc)), WidenBf16(kc)), 1e-3) << "k cache, head_dim " << hd;
        EXPECT_EQ(Get(gvc), vc) << "v cache (the same rounding of the same values)";
      }
    }
  }
}

// Prefill of three sequences (one continuing a cached prefix), then a decode step of each
// with long contexts; block ids scrambled. WriteKv then PagedAttention, as the model does.
// Both cache types: a bf16 cache's bytes equal the CPU's (the same rounding of the same rows).
TEST_F(CudaBackendTest, KvWriteAndPagedAttentionMatchCpu) {
  for (DType cache_type : {DType::kF32, DType::kBF16}) {
    SCOPED_TRACE(DTypeName(cache_type));
    KvWriteAndPagedAttention(cache_type);
  }
}

}  // namespace

// A member of the shared fixture: defined outside this file's anonymous namespace.
void CudaBackendTest::KvWriteAndPagedAttention(DType cache_type) {
  const int heads = 8, kv_heads = 2, hd = 128, bs = 16, blocks = 400;
  const int kv_width = kv_heads * hd;
  const AttentionShape shape{heads, kv_heads, hd, bs, 1.0f / std::sqrt(128.0f)};
  const size_t elements = size_t{blocks} * bs * kv_width;
  // A bf16 cache lives in float storage of half the count.
  std::vector<float> kc(cache_type == DType::kF32 ? elements : elements / 2), vc(kc.size());
  Buffer gk = Put(kc), gv = Put(vc);
  const KvCacheRef host_cache(kc.data(), vc.data(), cache_type);
  const KvCacheRef device_cache(gk.data(), gv.data(), cache_type);
  std::vector<int32_t> perm(blocks);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), std::mt19937(10));
  const std::vector<int> lens = {2000, 37, 1500};  // tokens to prefill per sequence
  std::vector<std::vector<int32_t>> tables(3);
  for (int s = 0, at = 0; s < 3; ++s) {
    const int nb = (lens[s] + 1 + bs - 1) / bs;
    tables[s].assign(perm.begin() + at, perm.begin() + at + nb);
    at += nb;
  }
  for (int step = 0; step < 2; ++step) {
    std::vector<AttentionSequence> seqs;
    std::vector<int64_t> slots;
    int64_t rows = 0;
    for (int s = 0; s < 3; ++s) {
      const int64_t q_len = step == 0 ? lens[s] : 1;
      const int64_t ctx = step == 0 ? lens[s] : lens[s] + 1;
      seqs.push_back({rows, q_len, ctx, tables[s]});
      for (int64_t j = ctx - q_len; j < ctx; ++j)
        slots.push_back(int64_t{tables[s][j / bs]} * bs + j % bs);
      rows += q_len;
    }
    const auto k = Random(rows * kv_width, 11 + step), v = Random(rows * kv_width, 13 + step);
    const auto q = Random(rows * heads * hd, 15 + step);
    cpu_.WriteKv(k.data(), v.data(), slots, kv_width, host_cache);
    Buffer gkk = Put(k), gvv = Put(v), gq = Put(q), gout = Put(std::vector<float>(q.size()));
    gpu_->WriteKv(gkk.data(), gvv.data(), slots, kv_width, device_cache);
    EXPECT_EQ(Get(gk), kc);
    std::vector<float> want(q.size());
    cpu_.PagedAttention(q.data(), seqs, host_cache, shape, want.data());
    gpu_->PagedAttention(gq.data(), seqs, device_cache, shape, gout.data());
    EXPECT_LT(RelL2(Get(gout), want), 1e-5) << "step " << step;
  }
}

namespace {

TEST_F(CudaBackendTest, MoeMatchesCpuForEachExpertShard) {
  const int rows = 23, hidden = 64, inter = 32, experts = 8, top_k = 2;
  const auto x = Random(rows * hidden, 20), logits = Random(rows * experts, 21);
  std::vector<std::vector<float>> gate_up, down;
  std::vector<Buffer> ggu, gdown;
  for (int e = 0; e < experts; ++e) {
    gate_up.push_back(Random(2 * inter * hidden, 30 + e));
    down.push_back(Random(hidden * inter, 50 + e));
    ggu.push_back(Put(gate_up.back()));
    gdown.push_back(Put(down.back()));
  }
  Buffer gx = Put(x), glogits = Put(logits), gout = Put(std::vector<float>(rows * hidden));
  for (int begin : {0, 4}) {  // all experts here, then the second half of a by-expert split
    const int count = begin == 0 ? experts : experts - begin;
    MoeExperts cpu_e{experts, top_k, true, inter, begin, {}, {}};
    MoeExperts gpu_e = cpu_e;
    for (int e = begin; e < begin + count; ++e) {
      cpu_e.gate_up.push_back(gate_up[e].data());
      cpu_e.down.push_back(down[e].data());
      gpu_e.gate_up.push_back(ggu[e].data());
      gpu_e.down.push_back(gdown[e].data());
    }
    std::vector<float> want(rows * hidden);
    cpu_.Moe(x.data(), rows, hidden, logits.data(), cpu_e, want.data());
    gpu_->Moe(gx.data(), rows, hidden, glogits.data(), gpu_e, gout.data());
    EXPECT_LT(RelL2(Get(gout), want), 1e-5) << "expert_begin " << begin;
  }
}

// bf16 and fp8 experts (each expert's rows through the Linear paths of its type) against the
// CPU backend's Moe over the same rounded or quantised matrices; 23 rows spread over 8 experts
// give experts of 1-4 rows (the GEMVs) and more (the GEMMs). bf16 tolerance: the GEMMs round the
// activations.
TEST_F(CudaBackendTest, MoeWithNarrowExpertsMatchesCpu) {
  const int rows = 23, hidden = 64, inter = 32, experts = 8, top_k = 2;
  const auto x = Random(rows * hidden, 80), logits = Random(rows * experts, 81);
  for (DType dtype : {DType::kBF16, DType::kFP8}) {
    SCOPED_TRACE(DTypeName(dtype));
    std::vector<Buffer> cgu(experts), cdown(experts), ggu(experts), gdown(experts);
    MoeExperts cpu_e{experts, top_k, true, inter, 0, {}, {}};
    MoeExperts gpu_e = cpu_e;
    for (int e = 0; e < experts; ++e) {
      ASSERT_NO_FATAL_FAILURE(
          Matrices(Random(2 * inter * hidden, 90 + e), 2 * inter, hidden, dtype, &cgu[e], &ggu[e]));
      ASSERT_NO_FATAL_FAILURE(
          Matrices(Random(hidden * inter, 110 + e), hidden, inter, dtype, &cdown[e], &gdown[e]));
      cpu_e.gate_up.push_back(cgu[e].weight());
      cpu_e.down.push_back(cdown[e].weight());
      gpu_e.gate_up.push_back(ggu[e].weight());
      gpu_e.down.push_back(gdown[e].weight());
    }
    Buffer gx = Put(x), glogits = Put(logits), gout = Put(std::vector<float>(rows * hidden));
    std::vector<float> want(rows * hidden);
    cpu_.Moe(x.data(), rows, hidden, logits.data(), cpu_e, want.data());
    gpu_->Moe(gx.data(), rows, hidden, glogits.data(), gpu_e, gout.data());
    EXPECT_LT(RelL2(Get(gout), want), 1e-2);
    ASSERT_TRUE(gpu_->Synchronize().ok()) << gpu_->status().message();
  }
}

}  // namespace
}  // namespace spark::engine::backend::cuda
