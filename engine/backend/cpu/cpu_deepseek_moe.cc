// CpuDeepseekOps: DeepSeek-V4 MoE routing and the clamped SwiGLU experts.
#include <algorithm>
#include <vector>

#include "engine/backend/cpu/cpu_deepseek_math.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"

namespace spark::engine::backend::cpu {
namespace {

// Tokens per pass of MoeExperts: bounds its scratch (tokens x top_k x hidden floats).
constexpr int64_t kExpertChunk = 256;

}  // namespace

void CpuDeepseekOps::Route(const RouteArgs& a) {
  const int e = a.experts, k = a.top_k;
  std::vector<float> scores(e), biased(e);
  std::vector<int> picked(k);
  for (int64_t t = 0; t < a.tokens; ++t) {
    for (int i = 0; i < e; ++i) scores[i] = SqrtSoftplus(a.logits[t * e + i] / a.temperature);
    if (a.hash_table != nullptr) {
      const float* row = a.hash_table + int64_t{a.token_ids[t]} * k;
      for (int i = 0; i < k; ++i) picked[i] = static_cast<int>(row[i]);
    } else {
      for (int i = 0; i < e; ++i) biased[i] = a.bias != nullptr ? scores[i] + a.bias[i] : scores[i];
      picked = TopK(biased, k);
    }
    float sum = 0;
    for (int i : picked) sum += scores[i];
    for (int i = 0; i < k; ++i) {
      a.ids[t * k + i] = static_cast<float>(picked[i]);
      a.weights[t * k + i] = scores[picked[i]] / (sum + 1e-20f) * a.scaling;
    }
  }
}

void CpuDeepseekOps::SwiGlu(const float* x, int64_t rows, int hidden, const SwiGluWeights& w,
                            int inter, float limit, float* out) {
  std::vector<float> gate_up(rows * 2 * inter), act(rows * inter);
  backend_.Linear(x, rows, hidden, w.gate_up, 2 * inter, gate_up.data());
  for (int64_t r = 0; r < rows; ++r) {
    for (int i = 0; i < inter; ++i) {
      float gate = gate_up[r * 2 * inter + i], up = gate_up[r * 2 * inter + inter + i];
      if (limit > 0) {
        gate = std::min(gate, limit);
        up = std::clamp(up, -limit, limit);
      }
      act[r * inter + i] = Silu(gate) * up;
    }
  }
  backend_.Linear(act.data(), rows, inter, w.down, hidden, out);
}

void CpuDeepseekOps::MoeExperts(const MoeExpertsArgs& a) {
  // Each expert runs once over the tokens routed to it (Linear's rows are bitwise independent),
  // then every token adds its experts in selection order and the shared expert last, so the
  // sums do not depend on how tokens group by expert.
  const int k = a.top_k, hidden = a.hidden;
  const int64_t local = static_cast<int64_t>(a.experts.size());
  std::vector<float> routed, xs, ys;
  for (int64_t t0 = 0; t0 < a.tokens; t0 += kExpertChunk) {
    const int64_t n = std::min(kExpertChunk, a.tokens - t0);
    routed.assign(n * k * hidden, 0.0f);
    for (int64_t le = 0; le < local; ++le) {
      std::vector<int64_t> picks;  // (token - t0) * k + i
      for (int64_t p = 0; p < n * k; ++p) {
        if (static_cast<int64_t>(a.ids[t0 * k + p]) == a.expert_begin + le) picks.push_back(p);
      }
      if (picks.empty()) continue;
      const int64_t rows = static_cast<int64_t>(picks.size());
      xs.resize(rows * hidden);
      ys.resize(rows * hidden);
      for (int64_t r = 0; r < rows; ++r) {
        std::copy_n(a.x + (t0 + picks[r] / k) * hidden, hidden, &xs[r * hidden]);
      }
      SwiGlu(xs.data(), rows, hidden, a.experts[le], a.inter, a.swiglu_limit, ys.data());
      for (int64_t r = 0; r < rows; ++r) {
        std::copy_n(&ys[r * hidden], hidden, &routed[picks[r] * hidden]);
      }
    }
    const bool shared = a.shared.gate_up.data != nullptr;
    ys.resize(n * hidden);
    if (shared) {
      SwiGlu(a.x + t0 * hidden, n, hidden, a.shared, a.shared_inter, a.swiglu_limit, ys.data());
    }
    for (int64_t t = 0; t < n; ++t) {
      float* o = a.out + (t0 + t) * hidden;
      std::fill(o, o + hidden, 0.0f);
      for (int i = 0; i < k; ++i) {
        const int64_t id = static_cast<int64_t>(a.ids[(t0 + t) * k + i]) - a.expert_begin;
        if (id < 0 || id >= local) continue;  // another rank's expert
        const float w = a.weights[(t0 + t) * k + i];
        const float* y = &routed[(t * k + i) * hidden];
        for (int h = 0; h < hidden; ++h) o[h] += w * y[h];
      }
      if (!shared) continue;
      for (int h = 0; h < hidden; ++h) o[h] += ys[t * hidden + h];
    }
  }
}

}  // namespace spark::engine::backend::cpu
