// CpuDeepseekOps: manifold-constrained hyper-connections (mHC).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/cpu_deepseek_math.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"

namespace spark::engine::backend::cpu {
namespace {

// m[o] = fn[o] . (flat * rsqrt(mean(flat^2) + eps)) for `outputs` rows of fn. Summed in double:
// width is n * hidden (16384 for V4-Flash).
void Project(const float* flat, int64_t width, const float* fn, int outputs, float eps, float* m) {
  double sum = 0;
  for (int64_t i = 0; i < width; ++i) sum += double{flat[i]} * flat[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / width) + eps);
  for (int o = 0; o < outputs; ++o) {
    double dot = 0;
    for (int64_t i = 0; i < width; ++i) dot += double{fn[o * width + i]} * (flat[i] * inv);
    m[o] = static_cast<float>(dot);
  }
}

// Row softmax + eps, then Sinkhorn: a column step, then (iters - 1) row and column steps.
void Sinkhorn(float* comb, int n, int iters, float eps) {
  for (int i = 0; i < n; ++i) {
    Softmax(std::span(comb + i * n, n));
    for (int j = 0; j < n; ++j) comb[i * n + j] += eps;
  }
  auto columns = [&] {
    for (int j = 0; j < n; ++j) {
      float sum = 0;
      for (int i = 0; i < n; ++i) sum += comb[i * n + j];
      for (int i = 0; i < n; ++i) comb[i * n + j] /= sum + eps;
    }
  };
  auto rows = [&] {
    for (int i = 0; i < n; ++i) {
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += comb[i * n + j];
      for (int j = 0; j < n; ++j) comb[i * n + j] /= sum + eps;
    }
  };
  columns();
  for (int it = 1; it < iters; ++it) {
    rows();
    columns();
  }
}

}  // namespace

void CpuDeepseekOps::HcExpand(const float* x, int64_t tokens, int n, int hidden, float* streams) {
  for (int64_t t = 0; t < tokens; ++t) {
    for (int j = 0; j < n; ++j) {
      std::memcpy(streams + (t * n + j) * hidden, x + t * hidden, hidden * sizeof(float));
    }
  }
}

void CpuDeepseekOps::HcMix(const HcMixArgs& a) {
  const int n = a.n;
  const bool site = a.post != nullptr;
  const int outputs = site ? (2 + n) * n : n;
  pool_.ParallelFor(a.tokens, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> m(outputs);
    for (int64_t t = begin; t < end; ++t) {
      Project(a.streams + t * n * a.hidden, int64_t{n} * a.hidden, a.fn, outputs, a.norm_eps,
              m.data());
      for (int j = 0; j < n; ++j) {
        a.pre[t * n + j] = Sigmoid(m[j] * a.scale[0] + a.base[j]) + a.hc_eps;
      }
      if (!site) continue;
      float* comb = a.comb + t * n * n;
      for (int j = 0; j < n; ++j) {
        a.post[t * n + j] = 2.0f * Sigmoid(m[n + j] * a.scale[1] + a.base[n + j]);
      }
      for (int i = 0; i < n * n; ++i) comb[i] = m[2 * n + i] * a.scale[2] + a.base[2 * n + i];
      Sinkhorn(comb, n, a.sinkhorn_iters, a.hc_eps);
    }
  });
}

void CpuDeepseekOps::HcCollapse(const float* streams, const float* pre, int64_t tokens, int n,
                                int hidden, float* out) {
  pool_.ParallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const float* x = streams + t * n * hidden;
      const float* p = pre + t * n;
      float* y = out + t * hidden;
      for (int h = 0; h < hidden; ++h) {
        float sum = 0;
        for (int j = 0; j < n; ++j) sum += p[j] * x[j * hidden + h];
        y[h] = sum;
      }
    }
  });
}

void CpuDeepseekOps::HcPost(float* streams, const float* block_out, const float* post,
                            const float* comb, int64_t tokens, int n, int hidden) {
  pool_.ParallelFor(tokens, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> next(static_cast<size_t>(n) * hidden);
    for (int64_t t = begin; t < end; ++t) {
      float* x = streams + t * n * hidden;
      const float* y = block_out + t * hidden;
      const float* c = comb + t * n * n;
      for (int k = 0; k < n; ++k) {
        for (int h = 0; h < hidden; ++h) {
          float sum = post[t * n + k] * y[h];
          for (int j = 0; j < n; ++j) sum += c[j * n + k] * x[j * hidden + h];
          next[k * hidden + h] = sum;
        }
      }
      std::copy(next.begin(), next.end(), x);
    }
  });
}

}  // namespace spark::engine::backend::cpu
