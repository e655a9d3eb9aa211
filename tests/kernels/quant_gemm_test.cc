// kernels::QuantGemm over bf16, E4M3 (UE8M0 per 32 x 32) and E2M1 (UE8M0 per 1 x 32) weights
// against a host product of the decoded weights and the bf16-rounded activations in double
// (the kernel's products are exact in fp32, so only the summation order differs: 1e-5), for
// token counts across every tile size, partial row tiles and k chunks, the grouped, SwiGLU and
// scaled epilogues, work lists with gathered rows; DequantToBf16 bit for bit; and DeepSeek's
// routing, expert lists and combine (moe_grouped.h) against host references.
#include "kernels/quant_gemm.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "kernels/moe_grouped.h"
#include "tests/kernels/gpu_test_util.h"

namespace spark::kernels {
namespace {

using namespace testing;

float E4M3(uint8_t b) {
  const int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
  const float v = e == 0 ? std::ldexp(m / 8.0f, -6) : std::ldexp(1.0f + m / 8.0f, e - 7);
  return s ? -v : v;
}
float E2M1(uint8_t nib) {
  static const float kV[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (nib & 8) ? -kV[nib & 7] : kV[nib & 7];
}
float Ue8m0(uint8_t e) { return std::ldexp(1.0f, static_cast<int>(e) - 127); }

// A random weight [n, k] of `format` on the device and its decoded values on the host.
struct Weight {
  Weight(QuantFormat format, int n, int k, uint32_t seed)
      : format(format), n(n), k(k), values(size_t(n) * k) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<int> byte(0, 255), exponent(118, 131);
    const int kb = (k + 31) / 32;
    if (format == QuantFormat::kBf16) {
      const std::vector<float> v = Random(values.size(), seed, 0.1f);
      const std::vector<__nv_bfloat16> b = ToBf16(v);
      codes.resize(b.size() * 2);
      std::memcpy(codes.data(), b.data(), codes.size());
      values = ToFloat(b);
    } else if (format == QuantFormat::kE4M3B32) {
      codes.resize(values.size());
      scales.resize(size_t((n + 31) / 32) * kb);
      for (uint8_t& c : codes) c = static_cast<uint8_t>(byte(rng)) & 0xF6;  // no NaN codes
      for (uint8_t& s : scales) s = static_cast<uint8_t>(exponent(rng));
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c)
          values[size_t(r) * k + c] =
              E4M3(codes[size_t(r) * k + c]) * Ue8m0(scales[(r / 32) * kb + c / 32]);
    } else {
      codes.resize(values.size() / 2);
      scales.resize(size_t(n) * kb);
      for (uint8_t& c : codes) c = static_cast<uint8_t>(byte(rng));
      for (uint8_t& s : scales) s = static_cast<uint8_t>(exponent(rng));
      for (int r = 0; r < n; ++r)
        for (int c = 0; c < k; ++c) {
          const size_t i = size_t(r) * k + c;
          values[i] = E2M1((codes[i / 2] >> (4 * (i % 2))) & 0xF) * Ue8m0(scales[r * kb + c / 32]);
        }
    }
    d_codes = std::make_unique<DeviceArray<uint8_t>>(codes);
    if (!scales.empty()) d_scales = std::make_unique<DeviceArray<uint8_t>>(scales);
  }
  QuantMatrix matrix() const {
    return {format, d_codes->get(), d_scales ? d_scales->get() : nullptr, n, k};
  }
  QuantFormat format;
  int n, k;
  std::vector<float> values;
  std::vector<uint8_t> codes, scales;
  std::unique_ptr<DeviceArray<uint8_t>> d_codes, d_scales;
};

// x [tokens, ldx] as bf16 on both sides; `exact` the fp32 values and `lo` their low parts
// (x - bf16(x), rounded to bf16), which with `device` carry them to about 2^-16.
struct Activations {
  Activations(int64_t tokens, int64_t ldx, uint32_t seed) {
    exact = Random(size_t(tokens * ldx), seed);
    host = ToFloat(ToBf16(exact));
    std::vector<float> rest(exact.size());
    for (size_t i = 0; i < rest.size(); ++i) rest[i] = exact[i] - host[i];
    device = std::make_unique<DeviceArray<__nv_bfloat16>>(ToBf16(host));
    lo = std::make_unique<DeviceArray<__nv_bfloat16>>(ToBf16(rest));
  }
  std::vector<float> exact, host;
  std::unique_ptr<DeviceArray<__nv_bfloat16>> device, lo;
};

double Dot(const float* w, const float* x, int k) {
  double s = 0;
  for (int i = 0; i < k; ++i) s += double{w[i]} * x[i];
  return s;
}

double SwiGlu(double g, double u, double limit) {
  if (limit > 0) g = std::min(g, limit), u = std::clamp(u, -limit, limit);
  return g / (1 + std::exp(-g)) * u;
}

// A dense product of w by the first `tokens` rows of x (row stride ldx) into rows of ldo.
QuantGemmArgs DenseArgs(const Weight& w, const Activations& x, int64_t tokens, int64_t ldx,
                        int64_t ldo) {
  QuantGemmArgs a;
  a.single = w.matrix();
  a.tokens = tokens;
  a.x = x.device->get();
  a.ldx = ldx;
  a.ldo = ldo;
  return a;
}

const QuantFormat kFormats[] = {QuantFormat::kBf16, QuantFormat::kE4M3B32, QuantFormat::kE2M1B32};

TEST(QuantGemmTest, DenseMatchesDecodedProductAtEveryTileSize) {
  SPARK_SKIP_WITHOUT_GPU();
  const int n = 88, k = 160;  // a partial 16-row tile and a partial last k chunk
  for (QuantFormat f : kFormats) {
    const Weight w(f, n, k, 11);
    for (int64_t tokens : {1, 5, 8, 13, 31, 64, 100}) {
      for (int mode = 0; mode < 4; ++mode) {  // plain, accumulate, split activations, split k
        const bool accumulate = mode == 1 || mode == 3, split = mode == 2;
        const Activations x(tokens, k, 12);
        const std::vector<float> init = Random(size_t(tokens) * n, 13);
        DeviceArray<float> out(init);
        QuantGemmArgs a = DenseArgs(w, x, tokens, k, n);
        a.x_lo = split ? x.lo->get() : nullptr;
        a.out = out.get();
        a.accumulate = accumulate;
        DeviceArray<float> parts(size_t(3) * tokens * n);
        if (mode == 3) {
          a.k_splits = 3;
          a.split_out = parts.get();
        }
        SPARK_ASSERT_OK(QuantGemm(a, nullptr));
        const std::vector<float>& xs = split ? x.exact : x.host;
        std::vector<double> want(init.size());
        for (int64_t t = 0; t < tokens; ++t)
          for (int r = 0; r < n; ++r)
            want[t * n + r] = (accumulate ? init[t * n + r] : 0.0) +
                              Dot(&w.values[size_t(r) * k], &xs[t * k], k);
        EXPECT_LT(RelMax(out.Host(), want), split ? 5e-5 : 1e-5)
            << "format " << int(f) << ", " << tokens << " tokens, mode " << mode;
      }
    }
  }
}

// A k of many chunks, not a multiple of the warps' chunk ring, plain and with SwiGLU, in one
// pass and split over blocks (SwiGLU then adds gate and up apart before the epilogue).
TEST(QuantGemmTest, DeepKAndSplitsOfEveryEpilogue) {
  SPARK_SKIP_WITHOUT_GPU();
  const int n = 96, k = 4352;  // 34 E2M1 chunks, 68 E4M3, 136 bf16
  for (QuantFormat f : kFormats) {
    const Weight w(f, n, k, 41);
    for (int64_t tokens : {1, 13}) {
      for (const bool swiglu : {false, true}) {
        for (const int splits : {1, 3}) {
          const Activations x(tokens, k, 42);
          const int outs = swiglu ? n / 2 : n;
          DeviceArray<float> out(size_t(tokens) * outs), parts(size_t(splits) * tokens * n);
          QuantGemmArgs a = DenseArgs(w, x, tokens, k, outs);
          a.out = out.get();
          a.k_splits = splits;
          a.split_out = parts.get();
          if (swiglu) a.epilogue = QuantGemmArgs::Epilogue::kSwiGlu;
          SPARK_ASSERT_OK(QuantGemm(a, nullptr));
          std::vector<double> want(size_t(tokens) * outs);
          for (int64_t t = 0; t < tokens; ++t)
            for (int r = 0; r < outs; ++r) {
              const double g = Dot(&w.values[size_t(r) * k], &x.host[t * k], k);
              want[t * outs + r] =
                  swiglu ? SwiGlu(g, Dot(&w.values[size_t(outs + r) * k], &x.host[t * k], k), 0)
                         : g;
            }
          EXPECT_LT(RelMax(out.Host(), want), 1e-5) << "format " << int(f) << ", " << tokens
                                                    << " tokens, swiglu " << swiglu << ", splits "
                                                    << splits;
        }
      }
    }
  }
}

TEST(QuantGemmTest, KSplitsFillTheGpuForFewRows) {
  SPARK_SKIP_WITHOUT_GPU();
  const Weight small(QuantFormat::kE4M3B32, 512, 5120, 3), large(QuantFormat::kE4M3B32, 8192, 1280, 4);
  EXPECT_GT(QuantGemmKSplits(small.matrix(), 1), 1) << "32 row tiles leave SMs idle";
  EXPECT_EQ(QuantGemmKSplits(large.matrix(), 1), 1) << "512 row tiles fill the GPU";
}

TEST(QuantGemmTest, GroupedRowsReadTheirOwnColumns) {
  SPARK_SKIP_WITHOUT_GPU();
  const int groups = 4, rows = 32, k = 96;
  for (QuantFormat f : kFormats) {
    const Weight w(f, groups * rows, k, 21);
    for (int64_t tokens : {3, 40}) {
      const Activations x(tokens, groups * k, 22);
      DeviceArray<float> out(size_t(tokens) * groups * rows);
      QuantGemmArgs a = DenseArgs(w, x, tokens, groups * k, groups * rows);
      a.group_rows = rows;
      a.out = out.get();
      SPARK_ASSERT_OK(QuantGemm(a, nullptr));
      std::vector<double> want(size_t(tokens) * groups * rows);
      for (int64_t t = 0; t < tokens; ++t)
        for (int r = 0; r < groups * rows; ++r)
          want[t * groups * rows + r] =
              Dot(&w.values[size_t(r) * k], &x.host[t * groups * k + (r / rows) * k], k);
      EXPECT_LT(RelMax(out.Host(), want), 1e-5) << "format " << int(f) << ", " << tokens;
    }
  }
}

TEST(QuantGemmTest, SwiGluEpilogueWritesBf16) {
  SPARK_SKIP_WITHOUT_GPU();
  const int inter = 48, k = 64;
  for (QuantFormat f : kFormats) {
    const Weight w(f, 2 * inter, k, 31);
    const int64_t tokens = 7;
    const Activations x(tokens, k, 32);
    DeviceArray<__nv_bfloat16> act(size_t(tokens) * inter);
    QuantGemmArgs a = DenseArgs(w, x, tokens, k, inter);
    a.epilogue = QuantGemmArgs::Epilogue::kSwiGlu;
    a.limit = 0.05f;  // small enough that both clamps fire on these values
    a.out_bf16 = act.get();
    SPARK_ASSERT_OK(QuantGemm(a, nullptr));
    std::vector<double> want(size_t(tokens) * inter);
    int clamped = 0;
    for (int64_t t = 0; t < tokens; ++t)
      for (int i = 0; i < inter; ++i) {
        const double g = Dot(&w.values[size_t(i) * k], &x.host[t * k], k);
        const double u = Dot(&w.values[size_t(inter + i) * k], &x.host[t * k], k);
        clamped += std::fabs(u) > a.limit;
        want[t * inter + i] = SwiGlu(g, u, a.limit);
      }
    EXPECT_GT(clamped, 0);
    EXPECT_LT(RelMax(ToFloat(act.Host()), want), 1e-2) << "format " << int(f);  // bf16 output
  }
}

// Three experts, tokens gathered through x_rows, outputs scattered through out_rows and scaled.
TEST(QuantGemmTest, WorkListsGatherScaleAndScatter) {
  SPARK_SKIP_WITHOUT_GPU();
  const int n = 64, k = 128, experts = 3;
  const int64_t tokens = 20;
  for (QuantFormat f : kFormats) {
    std::vector<std::unique_ptr<Weight>> ws;
    std::vector<QuantMatrix> matrices;
    for (int e = 0; e < experts; ++e) {
      ws.push_back(std::make_unique<Weight>(f, n, k, 40 + e));
      matrices.push_back(ws.back()->matrix());
    }
    DeviceArray<QuantMatrix> d_matrices(matrices);
    // Expert e gets the tokens t with t % 3 == e or t % 4 == e (some twice over two experts).
    std::vector<int32_t> x_rows, out_rows;
    std::vector<QuantWork> work;
    const int tile = QuantGemmTileTokens(tokens);
    for (int e = 0; e < experts; ++e) {
      const int first = static_cast<int>(x_rows.size());
      for (int t = 0; t < tokens; ++t) {
        if (t % 3 == e || t % 4 == e) x_rows.push_back(t);
      }
      const int count = static_cast<int>(x_rows.size()) - first;
      for (int f0 = 0; f0 < count; f0 += tile) work.push_back({e, first + f0, std::min(tile, count - f0)});
    }
    out_rows.resize(x_rows.size());
    std::iota(out_rows.begin(), out_rows.end(), 0);
    std::shuffle(out_rows.begin(), out_rows.end(), std::mt19937(5));
    const std::vector<float> scale = Random(x_rows.size(), 6);
    const Activations x(tokens, k, 7);
    DeviceArray<int32_t> d_x_rows(x_rows), d_out_rows(out_rows);
    DeviceArray<QuantWork> d_work(work);
    DeviceArray<int32_t> d_count(std::vector<int32_t>{static_cast<int32_t>(work.size())});
    DeviceArray<float> d_scale(scale), out(x_rows.size() * n);
    QuantGemmArgs a;
    a.single = matrices[0];
    a.matrices = d_matrices.get();
    a.work = d_work.get();
    a.work_count = d_count.get();
    a.max_work = static_cast<int>(work.size()) + 2;  // spare blocks must do nothing
    a.tokens = tokens;
    a.x = x.device->get();
    a.ldx = k;
    a.x_rows = d_x_rows.get();
    a.out_rows = d_out_rows.get();
    a.ldo = n;
    a.epilogue = QuantGemmArgs::Epilogue::kScale;
    a.row_scale = d_scale.get();
    a.out = out.get();
    SPARK_ASSERT_OK(QuantGemm(a, nullptr));
    std::vector<double> want(x_rows.size() * n);
    for (const QuantWork& item : work)
      for (int j = 0; j < item.count; ++j) {
        const int p = item.first + j, o = out_rows[p];
        for (int r = 0; r < n; ++r)
          want[size_t(o) * n + r] =
              Dot(&ws[item.matrix]->values[size_t(r) * k], &x.host[x_rows[p] * k], k) * scale[o];
      }
    EXPECT_LT(RelMax(out.Host(), want), 1e-5) << "format " << int(f);
  }
}

TEST(QuantGemmTest, DequantIsExact) {
  SPARK_SKIP_WITHOUT_GPU();
  for (QuantFormat f : {QuantFormat::kE4M3B32, QuantFormat::kE2M1B32}) {
    const Weight w(f, 72, 96, 51);
    DeviceArray<__nv_bfloat16> out(w.values.size());
    SPARK_ASSERT_OK(DequantToBf16(w.matrix(), out.get(), nullptr));
    EXPECT_EQ(ToFloat(out.Host()), w.values) << "format " << int(f);
    DeviceArray<float> wide(w.values.size());
    SPARK_ASSERT_OK(DequantToF32(w.matrix(), wide.get(), nullptr));
    EXPECT_EQ(wide.Host(), w.values) << "format " << int(f);
  }
}

TEST(QuantGemmTest, SplitBf16CarriesTheLowBits) {
  SPARK_SKIP_WITHOUT_GPU();
  const std::vector<float> x = Random(1024, 52);
  DeviceArray<float> d_x(x);
  DeviceArray<__nv_bfloat16> hi(x.size()), lo(x.size());
  SPARK_ASSERT_OK(SplitBf16(d_x.get(), x.size(), hi.get(), lo.get(), nullptr));
  const std::vector<float> h = ToFloat(hi.Host()), l = ToFloat(lo.Host());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_EQ(h[i], RoundBf16(x[i]));
    EXPECT_EQ(l[i], RoundBf16(x[i] - h[i]));
    EXPECT_LE(std::fabs(h[i] + l[i] - x[i]), std::ldexp(std::fabs(x[i]), -16));
  }
}

// sqrt(softplus(x / temperature)), top-k of score + bias (ties to the lower id) or the hash
// table's row, weights score / (sum + 1e-20) * scaling.
TEST(DeepseekRouteTest, MatchesHostRouting) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 9, experts = 384, top_k = 6;
  const std::vector<float> logits = Random(size_t(rows) * experts, 61, 2.0f);
  const std::vector<float> bias = Random(experts, 62, 0.5f);
  std::vector<float> table(16 * top_k);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<float>((i * 37) % experts);
  const std::vector<int32_t> token_ids = {3, 0, 15, 7, 7, 1, 2, 9, 11};
  for (bool hash : {false, true}) {
    DeviceArray<float> d_logits(logits), d_bias(bias), d_table(table);
    DeviceArray<int32_t> d_tokens(token_ids);
    DeviceArray<float> ids(size_t(rows) * top_k), weights(size_t(rows) * top_k);
    DeepseekRouteArgs a{.logits = d_logits.get(),
                        .rows = rows,
                        .experts = experts,
                        .top_k = top_k,
                        .bias = hash ? nullptr : d_bias.get(),
                        .hash_table = hash ? d_table.get() : nullptr,
                        .token_ids = d_tokens.get(),
                        .scaling = 1.5f,
                        .temperature = 1.3f,
                        .ids = ids.get(),
                        .weights = weights.get()};
    SPARK_ASSERT_OK(DeepseekRoute(a, nullptr));
    const std::vector<float> got_ids = ids.Host(), got_w = weights.Host();
    for (int r = 0; r < rows; ++r) {
      std::vector<double> score(experts), select(experts);
      for (int e = 0; e < experts; ++e) {
        const double x = logits[size_t(r) * experts + e] / 1.3;
        score[e] = std::sqrt(x > 20 ? x : std::log1p(std::exp(x)));
        select[e] = score[e] + bias[e];
      }
      std::vector<int> pick;
      if (hash) {
        for (int i = 0; i < top_k; ++i) pick.push_back(static_cast<int>(table[token_ids[r] * top_k + i]));
      } else {
        std::vector<int> order(experts);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(),
                         [&](int x, int y) { return select[x] > select[y]; });
        pick.assign(order.begin(), order.begin() + top_k);
      }
      double sum = 0;
      for (int e : pick) sum += score[e];
      for (int i = 0; i < top_k; ++i) {
        EXPECT_EQ(got_ids[r * top_k + i], pick[i]) << "row " << r << " choice " << i;
        EXPECT_NEAR(got_w[r * top_k + i], score[pick[i]] / sum * 1.5, 1e-5);
      }
    }
  }
}

// Every local assignment appears once in its expert's list, the work items cover the lists in
// tiles, and the combine sums the local assignments (plus the shared rows) per token.
TEST(MoeListsTest, ListsWorkItemsAndCombine) {
  SPARK_SKIP_WITHOUT_GPU();
  const int rows = 37, top_k = 4, expert_begin = 8, local = 8, hidden = 16, tile = 8;
  std::mt19937 rng(71);
  std::vector<float> ids(size_t(rows) * top_k);
  for (int r = 0; r < rows; ++r) {
    std::vector<int> e(24);
    std::iota(e.begin(), e.end(), 0);
    std::shuffle(e.begin(), e.end(), rng);
    for (int i = 0; i < top_k; ++i) ids[r * top_k + i] = static_cast<float>(e[i]);
  }
  const int64_t assignments = int64_t{rows} * top_k;
  const int max_work = MoeMaxWork(assignments, local, tile);
  DeviceArray<float> d_ids(ids);
  DeviceArray<int32_t> list_token(assignments), list_assign(assignments), count(1);
  DeviceArray<QuantWork> work(max_work);
  SPARK_ASSERT_OK(MoeBuildLists({.ids = d_ids.get(),
                                 .assignments = assignments,
                                 .top_k = top_k,
                                 .expert_begin = expert_begin,
                                 .local = local,
                                 .tile = tile,
                                 .list_token = list_token.get(),
                                 .list_assign = list_assign.get(),
                                 .work = work.get(),
                                 .work_count = count.get()},
                                nullptr));
  const std::vector<int32_t> tok = list_token.Host(), asg = list_assign.Host();
  const int items = count.Host()[0];
  const std::vector<QuantWork> w = work.Host();
  ASSERT_LE(items, max_work);
  std::set<int32_t> seen;
  int covered = 0;
  for (int i = 0; i < items; ++i) {
    ASSERT_GE(w[i].count, 1);
    ASSERT_LE(w[i].count, tile);
    for (int j = 0; j < w[i].count; ++j) {
      const int p = w[i].first + j;
      const int32_t a = asg[p];
      EXPECT_EQ(static_cast<int>(ids[a]) - expert_begin, w[i].matrix) << "position " << p;
      EXPECT_EQ(tok[p], a / top_k);
      EXPECT_TRUE(seen.insert(a).second) << "assignment " << a << " listed twice";
      ++covered;
    }
  }
  int local_assignments = 0;
  for (float e : ids) local_assignments += e >= expert_begin && e < expert_begin + local;
  EXPECT_EQ(covered, local_assignments);
  const std::vector<float> ys = Random(size_t(assignments) * hidden, 72);
  const std::vector<float> shared = Random(size_t(rows) * hidden, 73);
  DeviceArray<float> d_ys(ys), d_shared(shared), out(size_t(rows) * hidden);
  SPARK_ASSERT_OK(MoeCombineAssignments(d_ys.get(), d_ids.get(), rows, top_k, expert_begin, local,
                                        hidden, d_shared.get(), out.get(), nullptr));
  std::vector<double> want(size_t(rows) * hidden);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < hidden; ++h) {
      double s = 0;
      for (int i = 0; i < top_k; ++i) {
        const int e = static_cast<int>(ids[r * top_k + i]);
        if (e >= expert_begin && e < expert_begin + local) s += ys[(r * top_k + i) * hidden + h];
      }
      want[r * hidden + h] = s + shared[r * hidden + h];
    }
  EXPECT_LT(RelMax(out.Host(), want), 1e-6);
}

}  // namespace
}  // namespace spark::kernels
