#include "engine/model/deepseek_v4/hyper_connection.h"

#include <cmath>

#include "engine/model/deepseek_v4/ops.h"

namespace spark::engine::model::dsv4 {
namespace {

// mixes[o] = fn[o] . (flat * rsqrt(mean(flat^2) + eps)) for `outputs` rows of fn.
std::vector<float> Project(const float* flat, int64_t width, const float* fn, int outputs,
                           float eps) {
  double sum = 0;
  for (int64_t i = 0; i < width; ++i) sum += double{flat[i]} * flat[i];
  const float inv = 1.0f / std::sqrt(static_cast<float>(sum / width) + eps);
  std::vector<float> mixes(outputs);
  for (int o = 0; o < outputs; ++o) {
    double dot = 0;
    for (int64_t i = 0; i < width; ++i) dot += double{fn[o * width + i]} * (flat[i] * inv);
    mixes[o] = static_cast<float>(dot);
  }
  return mixes;
}

// Row softmax + eps, then Sinkhorn: a column step, then (iters - 1) row and column steps.
void Sinkhorn(std::vector<float>& comb, int n, int iters, float eps) {
  for (int i = 0; i < n; ++i) {
    Softmax(std::span(comb).subspan(i * n, n));
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

std::vector<HyperMix> HyperPre(const float* streams, int64_t tokens, const core::ModelConfig& c,
                               const HyperConnectionWeights& w, float* collapsed) {
  const int n = c.residual_streams, hidden = c.hidden_size;
  const float eps = c.dsv4.hc_eps;
  std::vector<HyperMix> out(tokens);
  for (int64_t t = 0; t < tokens; ++t) {
    const float* x = streams + t * n * hidden;
    const std::vector<float> m =
        Project(x, int64_t{n} * hidden, w.fn.data(), (2 + n) * n, c.rms_norm_eps);
    HyperMix& mix = out[t];
    std::vector<float> pre(n);
    mix.post.resize(n);
    mix.comb.resize(n * n);
    for (int j = 0; j < n; ++j) {
      pre[j] = Sigmoid(m[j] * w.scale[0] + w.base[j]) + eps;
      mix.post[j] = 2.0f * Sigmoid(m[n + j] * w.scale[1] + w.base[n + j]);
    }
    for (int i = 0; i < n * n; ++i) mix.comb[i] = m[2 * n + i] * w.scale[2] + w.base[2 * n + i];
    Sinkhorn(mix.comb, n, c.dsv4.hc_sinkhorn_iters, eps);
    float* y = collapsed + t * hidden;
    for (int h = 0; h < hidden; ++h) {
      float sum = 0;
      for (int j = 0; j < n; ++j) sum += pre[j] * x[j * hidden + h];
      y[h] = sum;
    }
  }
  return out;
}

void HyperPost(float* streams, int64_t tokens, const core::ModelConfig& c,
               const std::vector<HyperMix>& mix, const float* block_out) {
  const int n = c.residual_streams, hidden = c.hidden_size;
  std::vector<float> next(static_cast<size_t>(n) * hidden);
  for (int64_t t = 0; t < tokens; ++t) {
    float* x = streams + t * n * hidden;
    const float* y = block_out + t * hidden;
    for (int k = 0; k < n; ++k) {
      for (int h = 0; h < hidden; ++h) {
        float sum = mix[t].post[k] * y[h];
        for (int j = 0; j < n; ++j) sum += mix[t].comb[j * n + k] * x[j * hidden + h];
        next[k * hidden + h] = sum;
      }
    }
    std::copy(next.begin(), next.end(), x);
  }
}

void HyperHead(const float* streams, const core::ModelConfig& c, const Weights& w, float* out) {
  const int n = c.residual_streams, hidden = c.hidden_size;
  const std::vector<float> m =
      Project(streams, int64_t{n} * hidden, w.hc_head_fn.data(), n, c.rms_norm_eps);
  for (int h = 0; h < hidden; ++h) out[h] = 0;
  for (int j = 0; j < n; ++j) {
    const float pre = Sigmoid(m[j] * w.hc_head_scale[0] + w.hc_head_base[j]) + c.dsv4.hc_eps;
    for (int h = 0; h < hidden; ++h) out[h] += pre * streams[j * hidden + h];
  }
}

}  // namespace spark::engine::model::dsv4
