// CpuDeepseekOps: RoPE, per-token cache fields and the compressors' softmax pooling.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "engine/backend/cpu/cpu_backend.h"
#include "engine/backend/cpu/cpu_deepseek_math.h"
#include "engine/backend/cpu/cpu_deepseek_ops.h"

namespace spark::engine::backend::cpu {
namespace {

// cos and sin (times the table's scale; sin negated for the inverse) of one position.
void Angles(const RopeTable& t, int position, bool inverse, float* cos, float* sin) {
  for (int i = 0; i < t.rope_dim / 2; ++i) {
    const float angle = static_cast<float>(position) * t.inv_freq[i];
    cos[i] = std::cos(angle) * t.scale;
    sin[i] = (inverse ? -std::sin(angle) : std::sin(angle)) * t.scale;
  }
}

// Rotates the trailing rope_dim channels of v [dim] as complex pairs (2i, 2i + 1).
void Rotate(float* v, int dim, int rope_dim, const float* cos, const float* sin) {
  float* r = v + dim - rope_dim;
  for (int i = 0; i < rope_dim / 2; ++i) {
    const float a = r[2 * i], b = r[2 * i + 1];
    r[2 * i] = a * cos[i] - b * sin[i];
    r[2 * i + 1] = b * cos[i] + a * sin[i];
  }
}

// Softmax pooling of entry e's sources into `entry` [dim].
void Pool(const CompressArgs& a, int64_t e, std::vector<float>& logits, float* entry) {
  const int64_t* slots = a.source_slots.data() + e * a.pool;
  std::vector<int> sources;  // present ones, in order
  for (int i = 0; i < a.pool; ++i) {
    if (slots[i] >= 0) sources.push_back(i);
  }
  auto channel = [&](int i) { return a.overlap && i >= a.pool / 2 ? a.dim : 0; };
  logits.resize(sources.size());
  for (int ch = 0; ch < a.dim; ++ch) {
    for (size_t s = 0; s < sources.size(); ++s) {
      const int i = sources[s];
      logits[s] = a.gate.present() ? FieldAt(a.gate, slots[i])[channel(i) + ch] : 0.0f;
    }
    Softmax(logits);
    float sum = 0;
    for (size_t s = 0; s < sources.size(); ++s) {
      const int i = sources[s];
      sum += logits[s] * FieldAt(a.kv, slots[i])[channel(i) + ch];
    }
    entry[ch] = sum;
  }
}

}  // namespace

void CpuDeepseekOps::Rope(float* x, std::span<const int32_t> positions, int heads, int dim,
                          const RopeTable& table, bool inverse) {
  const int half = table.rope_dim / 2;
  pool_.ParallelFor(static_cast<int64_t>(positions.size()), 16, [&](int64_t begin, int64_t end) {
    std::vector<float> cos(half), sin(half);
    for (int64_t t = begin; t < end; ++t) {
      Angles(table, positions[t], inverse, cos.data(), sin.data());
      for (int h = 0; h < heads; ++h) {
        Rotate(x + (t * heads + h) * dim, dim, table.rope_dim, cos.data(), sin.data());
      }
    }
  });
}

void CpuDeepseekOps::WriteField(const float* rows, std::span<const int64_t> slots,
                                const CacheField& field) {
  for (size_t t = 0; t < slots.size(); ++t) {
    std::memcpy(FieldAt(field, slots[t]), rows + t * field.width, field.width * sizeof(float));
  }
}

void CpuDeepseekOps::WriteCompressorInputs(const CompressorInputs& in,
                                           std::span<const int32_t> positions,
                                           std::span<const int64_t> slots) {
  const int w = in.width;
  for (size_t t = 0; t < slots.size(); ++t) {
    std::memcpy(FieldAt(in.kv_field, slots[t]), in.kv + t * w, w * sizeof(float));
    if (in.gate == nullptr) continue;
    float* gate = FieldAt(in.gate_field, slots[t]);
    const float* g = in.gate + t * w;
    if (in.ape == nullptr) {
      std::memcpy(gate, g, w * sizeof(float));
      continue;
    }
    const float* ape = in.ape + static_cast<int64_t>(positions[t] % in.ratio) * w;
    for (int i = 0; i < w; ++i) gate[i] = g[i] + ape[i];
  }
}

void CpuDeepseekOps::Compress(const CompressArgs& a) {
  const int64_t entries = static_cast<int64_t>(a.entry_slots.size());
  const int half = a.rope != nullptr ? a.rope->rope_dim / 2 : 0;
  // Entries read kv and gate fields and write the entry field: disjoint, so any order works.
  pool_.ParallelFor(entries, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> logits, cos(half), sin(half);
    for (int64_t e = begin; e < end; ++e) {
      float* entry =
          a.out_rows != nullptr ? a.out_rows + e * a.dim : FieldAt(a.out, a.entry_slots[e]);
      Pool(a, e, logits, entry);
      if (a.norm != nullptr) RmsNormRow(entry, a.norm, a.dim, a.eps, entry);
      if (a.rope == nullptr) continue;
      Angles(*a.rope, a.entry_positions[e], /*inverse=*/false, cos.data(), sin.data());
      Rotate(entry, a.dim, a.rope->rope_dim, cos.data(), sin.data());
    }
  });
}

}  // namespace spark::engine::backend::cpu
