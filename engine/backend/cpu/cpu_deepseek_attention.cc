// CpuDeepseekOps: the lightning indexer, sparse attention with sinks and the grouped output
// projection.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "engine/backend/cpu/cpu_deepseek_math.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"

namespace spark::engine::backend::cpu {
namespace {

// q . k accumulated in order (the reference order; the 8-lane Dot would change low bits).
float OrderedDot(const float* q, const float* k, int n) {
  float dot = 0;
  for (int i = 0; i < n; ++i) dot += q[i] * k[i];
  return dot;
}

// The keys query `row` attends, in SparseAttentionArgs' order.
void KeysOf(const SparseAttentionArgs& a, const AttentionSequence& seq, int64_t row,
            std::vector<const float*>& keys) {
  keys.clear();
  const int64_t p = seq.context_len - seq.query_len + (row - seq.query_start);
  for (int64_t j = std::max<int64_t>(0, p - a.window + 1); j <= p; ++j) {
    const int64_t slot =
        int64_t{seq.block_table[j / a.block_size]} * a.block_size + j % a.block_size;
    keys.push_back(FieldAt(a.window_keys, slot));
  }
  const EntryCandidates& c = a.candidates;
  const int count = c.count.empty() ? 0 : c.count[row];
  if (count == 0) return;
  const int64_t* slots = c.slots.data() + c.first[row];
  if (a.selected == nullptr) {
    for (int i = 0; i < count; ++i) keys.push_back(FieldAt(a.entries, slots[i]));
    return;
  }
  for (int i = 0; i < a.top_k; ++i) {
    const int pick = static_cast<int>(a.selected[row * a.top_k + i]);
    if (pick >= 0) keys.push_back(FieldAt(a.entries, slots[pick]));
  }
}

}  // namespace

void CpuDeepseekOps::IndexerTopK(const IndexerArgs& a) {
  const EntryCandidates& c = a.candidates;
  const float key_scale = 1.0f / std::sqrt(static_cast<float>(a.dim));
  const float minus_inf = -std::numeric_limits<float>::infinity();
  pool_.ParallelFor(static_cast<int64_t>(c.count.size()), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    for (int64_t t = begin; t < end; ++t) {
      scores.resize(c.count[t]);
      for (int i = 0; i < c.count[t]; ++i) {
        const float* key = FieldAt(a.keys, c.slots[c.first[t] + i]);
        float score = 0;
        for (int h = 0; h < a.heads; ++h) {
          const float dot = OrderedDot(a.q + (t * a.heads + h) * a.dim, key, a.dim);
          score += std::max(dot, 0.0f) * key_scale * (a.weights[t * a.heads + h] * a.weight_scale);
        }
        if (a.mask != nullptr) score += a.mask[t * a.mask_stride + i];
        scores[i] = score;
      }
      if (a.scores != nullptr) {
        float* row = a.scores + t * a.mask_stride;
        std::fill(row, row + a.mask_stride, minus_inf);
        std::copy(scores.begin(), scores.end(), row);
      }
      const std::vector<int> top = TopK(scores, a.top_k);
      float* out = a.selected + t * a.top_k;
      for (int i = 0; i < a.top_k; ++i) {
        const bool keep = i < static_cast<int>(top.size()) && scores[top[i]] != minus_inf;
        out[i] = keep ? static_cast<float>(top[i]) : -1.0f;
      }
    }
  });
}

void CpuDeepseekOps::SparseAttention(const SparseAttentionArgs& a) {
  // One work item per (query row, head); rows of all sequences are numbered together.
  std::vector<int> row_seq;
  for (size_t s = 0; s < a.sequences.size(); ++s) {
    row_seq.resize(a.sequences[s].query_start + a.sequences[s].query_len, static_cast<int>(s));
  }
  const int hd = a.head_dim;
  pool_.ParallelFor(static_cast<int64_t>(row_seq.size()) * a.heads, 4,
                    [&](int64_t begin, int64_t end) {
                      std::vector<const float*> keys;
                      std::vector<float> logits;
                      for (int64_t item = begin; item < end; ++item) {
                        const int64_t row = item / a.heads;
                        const int h = static_cast<int>(item % a.heads);
                        KeysOf(a, a.sequences[row_seq[row]], row, keys);
                        const float* q = a.q + (row * a.heads + h) * hd;
                        logits.resize(keys.size() + 1);
                        for (size_t k = 0; k < keys.size(); ++k)
                          logits[k] = OrderedDot(q, keys[k], hd) * a.scale;
                        logits.back() = a.sinks[h];  // takes probability mass, adds no value
                        Softmax(logits);
                        float* o = a.out + (row * a.heads + h) * hd;
                        std::fill(o, o + hd, 0.0f);
                        for (size_t k = 0; k < keys.size(); ++k) {
                          for (int i = 0; i < hd; ++i) o[i] += logits[k] * keys[k][i];
                        }
                      }
                    });
}

void CpuDeepseekOps::GroupedLinear(const float* x, int64_t rows, std::span<const int> group_in,
                                   WeightRef w, int out_per_group, float* y) {
  int width = 0;
  for (int in : group_in) width += in;
  const int groups = static_cast<int>(group_in.size());
  std::vector<float> in_rows, out_rows(rows * out_per_group);
  int column = 0;
  const auto* block = static_cast<const char*>(w.data);
  for (int g = 0; g < groups; ++g) {
    const int in = group_in[g];
    in_rows.resize(rows * in);
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(x + r * width + column, in, &in_rows[r * in]);
    }
    backend_.Linear(in_rows.data(), rows, in, WeightRef(block, w.dtype), out_per_group,
                    out_rows.data());
    for (int64_t r = 0; r < rows; ++r) {
      std::copy_n(&out_rows[r * out_per_group], out_per_group,
                  y + (r * groups + g) * out_per_group);
    }
    block += int64_t{out_per_group} * in * DTypeBytes(w.dtype);
    column += in;
  }
}

}  // namespace spark::engine::backend::cpu
