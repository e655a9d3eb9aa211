#include "engine/backend/cpu/cpu_backend.h"

#include <sys/mman.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <new>
#include <span>

#include "engine/backend/cpu/cpu_gemm.h"
#include "engine/core/block_quant.h"
#include "engine/core/dtype.h"

namespace spark::engine::backend::cpu {
namespace {

// Weight rows per tile of Linear: 16 rows x 4096 inputs x 4 B = 256 KiB, about one L2.
constexpr int kRowTile = 16;

}  // namespace

float Dot(const float* a, const float* b, int n) {
  // Eight independent partial sums let the compiler vectorise without -ffast-math.
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float sum = ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
  for (; i < n; ++i) sum += a[i] * b[i];
  return sum;
}

void RmsNormRow(const float* x, const float* weight, int dim, float eps, float* out) {
  const float inv = 1.0f / std::sqrt(Dot(x, x, dim) / static_cast<float>(dim) + eps);
  for (int i = 0; i < dim; ++i) out[i] = weight[i] * (x[i] * inv);
}

CpuBackend::CpuBackend(int threads) : pool_(threads) {}

namespace {

// Buffers of at least this size are mappings of their own (see Allocate).
constexpr size_t kMapBytes = size_t{64} << 10;

}  // namespace

Result<Buffer> CpuBackend::Allocate(size_t count) {
  if (count == 0) return Buffer();
  const size_t bytes = (count * sizeof(float) + 63) / 64 * 64;
  // Large buffers (weights, the KV cache, a step's activations) are anonymous mappings committed
  // at once (MAP_POPULATE: zero pages that are really there, as the memory plan and the start-up
  // guard count them) and unmapped on release, so a step's activations go back to the system
  // instead of staying in the allocator's heap. Small ones come from the heap, zeroed by writing.
  void* p = nullptr;
  if (bytes >= kMapBytes) {
    p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE,
             -1, 0);
    if (p == MAP_FAILED) p = nullptr;
  } else {
    p = std::aligned_alloc(64, bytes);
    // Opaque to the compiler, which would otherwise turn aligned_alloc + memset into a calloc.
    asm volatile("" : "+r"(p));
    if (p != nullptr) std::memset(p, 0, bytes);
  }
  if (p == nullptr) {
    return ResourceExhaustedError("cpu backend: cannot allocate " + std::to_string(bytes) +
                                  " bytes; use a smaller model, fewer KV blocks or more ranks");
  }
  const size_t now = (*in_use_ += count * sizeof(float));
  for (size_t peak = *peak_; now > peak && !peak_->compare_exchange_weak(peak, now);) {
  }
  return Buffer(static_cast<float*>(p), count,
                [in_use = in_use_, n = count * sizeof(float), bytes](float* f) {
                  *in_use -= n;
                  if (bytes >= kMapBytes) {
                    munmap(f, bytes);
                  } else {
                    std::free(f);
                  }
                });
}

void CpuBackend::Upload(std::span<const float> host, float* dst) {
  std::memcpy(dst, host.data(), host.size_bytes());
}

void CpuBackend::Download(const float* src, std::span<float> host) {
  std::memcpy(host.data(), src, host.size_bytes());
}

void CpuBackend::Embedding(const float* table, int64_t row_begin, int64_t rows, int hidden,
                           std::span<const int32_t> ids, float* out) {
  for (size_t t = 0; t < ids.size(); ++t) {
    const int64_t row = ids[t] - row_begin;
    float* dst = out + t * hidden;
    if (row >= 0 && row < rows) {
      std::memcpy(dst, table + row * hidden, hidden * sizeof(float));
    } else {
      std::fill(dst, dst + hidden, 0.0f);
    }
  }
}

namespace {

// Output::bf16, when set: the fp32 values rounded to bf16.
void WriteBf16Copy(const Output& out, size_t count) {
  if (out.bf16 == nullptr) return;
  auto* bits = static_cast<uint16_t*>(out.bf16);
  for (size_t i = 0; i < count; ++i) bits[i] = core::FloatToBf16(out.data[i]);
}

}  // namespace

void CpuBackend::RmsNorm(const float* x, const float* weight, int64_t rows, int dim, float eps,
                         Output out) {
  pool_.ParallelFor(rows, 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      RmsNormRow(x + r * dim, weight, dim, eps, out.data + r * dim);
    }
  });
  WriteBf16Copy(out, static_cast<size_t>(rows) * dim);
}

Result<Buffer> CpuBackend::AllocateWeights(size_t count, DType dtype) {
  if (dtype == DType::kF32 || count == 0) return Allocate(count);
  if (dtype != DType::kBF16) return Backend::AllocateWeights(count, dtype);  // fp8: AllocateMatrix
  // bf16: half the floats, rounded up.
  SPARK_ASSIGN_OR_RETURN(Buffer b, Allocate((count + 1) / 2));
  float* p = b.data();
  return Buffer(p, count, dtype, [held = std::make_shared<Buffer>(std::move(b))](float*) {});
}

namespace {

// `n` source bytes to `out`: copied, or (widen) bf16 elements to fp32 ones.
void CopyOrWiden(const uint8_t* src, size_t n, bool widen, uint8_t* out) {
  if (!widen) {
    std::memcpy(out, src, n);
    return;
  }
  auto* to = reinterpret_cast<uint32_t*>(out);
  for (size_t i = 0; i < n / 2; ++i) {
    uint16_t bits;
    std::memcpy(&bits, src + 2 * i, 2);
    to[i] = static_cast<uint32_t>(bits) << 16;
  }
}

}  // namespace

Status CpuBackend::UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) {
  SPARK_RETURN_IF_ERROR(CheckWeightBytesFit(src, dst, dst_offset));
  uint8_t* out = static_cast<uint8_t*>(dst.raw()) + dst_offset;
  const size_t scale = src.widen_bf16 ? 2 : 1;
  if (src.rows == 1) {
    constexpr int64_t kPiece = 1 << 20;
    const int64_t pieces = static_cast<int64_t>((src.row_bytes + kPiece - 1) / kPiece);
    pool_.ParallelFor(pieces, 1, [&](int64_t begin, int64_t end) {
      const size_t b = begin * kPiece, e = std::min<size_t>(src.row_bytes, end * kPiece);
      CopyOrWiden(src.src + b, e - b, src.widen_bf16, out + b * scale);
    });
    return Status::Ok();
  }
  pool_.ParallelFor(static_cast<int64_t>(src.rows), 64, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      CopyOrWiden(src.src + r * src.src_stride, src.row_bytes, src.widen_bf16,
                  out + r * src.row_bytes * scale);
    }
  });
  return Status::Ok();
}

void CpuBackend::UploadWeights(std::span<const float> host, Buffer& dst) {
  if (dst.dtype() == DType::kF32) return Upload(host, dst.data());
  auto* bits = static_cast<uint16_t*>(dst.raw());
  for (size_t i = 0; i < host.size(); ++i) bits[i] = core::FloatToBf16(host[i]);
}

void CpuBackend::ArgMax(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) {
  ArgMaxRows(x, rows, cols, index_offset, out);
}

void CpuBackend::Linear(Input in, int64_t rows, int in_features, WeightRef weight,
                        int out_features, float* out) {
  const float* x = in.data;  // the fp32 values (a bf16 copy is for device GEMMs)
  // Threads split the weight rows in tiles of kRowTile; every token row passes over a tile while
  // it is in cache, so each weight is read from memory once per call (decode is bandwidth-bound).
  // bf16 and fp8 weights are widened a tile at a time into the thread's scratch (same dot
  // products as over the widened matrix); fp8 values times their block's scale.
  const int64_t tiles = (out_features + kRowTile - 1) / kRowTile;
  const bool narrow = weight.dtype != DType::kF32;
  const size_t values = static_cast<size_t>(out_features) * in_features;
  const std::span<const float> scales =
      weight.dtype == DType::kFP8 ? std::span<const float>(Fp8Scales(weight.data, values),
                                                           Fp8ScaleCount(out_features, in_features))
                                  : std::span<const float>();
  pool_.ParallelFor(tiles, 1, [&](int64_t tile_begin, int64_t tile_end) {
    std::vector<float> widened(narrow ? static_cast<size_t>(kRowTile) * in_features : 0);
    for (int64_t tile = tile_begin; tile < tile_end; ++tile) {
      const int o_begin = static_cast<int>(tile * kRowTile);
      const int o_end = std::min(out_features, o_begin + kRowTile);
      // Register-blocked; each output equals Dot(x row, w row) bit for bit (cpu_gemm.h).
      if (!narrow) {
        GemmTile(x, rows, in_features, static_cast<const float*>(weight.data), o_begin, o_end, out,
                 out_features);
        continue;
      }
      const size_t first = static_cast<size_t>(o_begin) * in_features;
      const size_t count = static_cast<size_t>(o_end - o_begin) * in_features;
      if (weight.dtype == DType::kBF16) {
        core::ConvertToFloat(core::DType::kBF16, static_cast<const uint16_t*>(weight.data) + first,
                             count, widened.data());
      } else {
        core::ConvertToFloat(core::DType::kF8E4M3, static_cast<const uint8_t*>(weight.data) + first,
                             count, widened.data());
        core::ApplyBlockScales({widened.data(), count}, in_features, o_begin, 0, scales,
                               core::ScaleBlocks(in_features, kFp8Block), {kFp8Block, kFp8Block});
      }
      GemmTile(x, rows, in_features, widened.data(), 0, o_end - o_begin, out + o_begin,
               out_features);
    }
  });
}

void CpuBackend::Rope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                      double theta) {
  const int half = head_dim / 2;
  // As transformers computes it, in fp32: inv_freq = 1 / theta^(2i/d); angle = pos * inv_freq.
  std::vector<float> inv_freq(half);
  for (int i = 0; i < half; ++i) {
    inv_freq[i] = 1.0f / std::pow(static_cast<float>(theta),
                                  static_cast<float>(2 * i) / static_cast<float>(head_dim));
  }
  const int64_t tokens = static_cast<int64_t>(positions.size());
  pool_.ParallelFor(tokens, 16, [&](int64_t begin, int64_t end) {
    std::vector<float> cos(half), sin(half);
    for (int64_t t = begin; t < end; ++t) {
      for (int i = 0; i < half; ++i) {
        const float angle = static_cast<float>(positions[t]) * inv_freq[i];
        cos[i] = std::cos(angle);
        sin[i] = std::sin(angle);
      }
      for (int h = 0; h < heads; ++h) {
        float* v = x + (t * heads + h) * head_dim;
        for (int i = 0; i < half; ++i) {
          const float a = v[i], b = v[i + half];
          v[i] = a * cos[i] - b * sin[i];
          v[i + half] = b * cos[i] + a * sin[i];
        }
      }
    }
  });
}

void CpuBackend::Add(float* x, const float* y, size_t count) {
  for (size_t i = 0; i < count; ++i) x[i] += y[i];
}

void CpuBackend::SiluMul(const float* gate_up, int64_t rows, int inter, Output out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* g = gate_up + r * 2 * inter;
    const float* u = g + inter;
    float* o = out.data + r * inter;
    for (int i = 0; i < inter; ++i) o[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
  }
  WriteBf16Copy(out, static_cast<size_t>(rows) * inter);
}

void CpuBackend::SplitColumns(const float* src, int64_t rows, std::span<const ColumnSlice> parts) {
  int64_t stride = 0;
  for (const ColumnSlice& p : parts) stride += p.width;
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = src + r * stride;
    for (const ColumnSlice& p : parts) {
      std::memcpy(p.out + r * p.width, row, static_cast<size_t>(p.width) * sizeof(float));
      row += p.width;
    }
  }
}

void CpuBackend::WriteKv(const float* k, const float* v, std::span<const int64_t> slots,
                         int kv_width, const KvCacheRef& cache) {
  for (size_t t = 0; t < slots.size(); ++t) {
    const int64_t at = slots[t] * kv_width;
    if (cache.dtype == DType::kF32) {
      std::memcpy(static_cast<float*>(cache.k) + at, k + t * kv_width, kv_width * sizeof(float));
      std::memcpy(static_cast<float*>(cache.v) + at, v + t * kv_width, kv_width * sizeof(float));
      continue;
    }
    auto* kb = static_cast<uint16_t*>(cache.k) + at;
    auto* vb = static_cast<uint16_t*>(cache.v) + at;
    for (int i = 0; i < kv_width; ++i) {
      kb[i] = core::FloatToBf16(k[t * kv_width + i]);
      vb[i] = core::FloatToBf16(v[t * kv_width + i]);
    }
  }
}

namespace {

// Elements [at, at + n) of a cache as fp32: in place for an fp32 cache, widened into `scratch`
// (n floats) for a bf16 one.
const float* CacheRow(const void* cache, DType dtype, int64_t at, int n, float* scratch) {
  if (dtype == DType::kF32) return static_cast<const float*>(cache) + at;
  const uint16_t* bits = static_cast<const uint16_t*>(cache) + at;
  for (int i = 0; i < n; ++i) scratch[i] = core::Bf16ToFloat(bits[i]);
  return scratch;
}

}  // namespace

void CpuBackend::PagedAttention(const float* q, std::span<const AttentionSequence> sequences,
                                const KvCacheRef& cache, const AttentionShape& shape, float* out) {
  // One work item per (query row, head); rows of all sequences are numbered together.
  std::vector<int> row_seq;
  for (size_t s = 0; s < sequences.size(); ++s) {
    row_seq.resize(sequences[s].query_start + sequences[s].query_len, static_cast<int>(s));
  }
  const int hd = shape.head_dim, heads = shape.num_heads;
  const int group = shape.num_heads / shape.num_kv_heads;
  const int kv_width = shape.num_kv_heads * hd;
  const int64_t items = static_cast<int64_t>(row_seq.size()) * heads;
  pool_.ParallelFor(items, 4, [&](int64_t begin, int64_t end) {
    std::vector<float> scores;
    std::vector<float> acc(hd), row_scratch(hd);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t row = item / heads;
      const int h = static_cast<int>(item % heads);
      const AttentionSequence& seq = sequences[row_seq[row]];
      const int64_t visible = seq.context_len - seq.query_len + (row - seq.query_start) + 1;
      const float* qv = q + (row * heads + h) * hd;
      const int64_t kv_offset = static_cast<int64_t>(h / group) * hd;
      scores.resize(visible);
      float max_score = -INFINITY;
      for (int64_t j = 0; j < visible; ++j) {
        const int64_t slot =
            static_cast<int64_t>(seq.block_table[j / shape.block_size]) * shape.block_size +
            j % shape.block_size;
        const float* kv =
            CacheRow(cache.k, cache.dtype, slot * kv_width + kv_offset, hd, row_scratch.data());
        scores[j] = Dot(qv, kv, hd) * shape.scale;
        max_score = std::max(max_score, scores[j]);
      }
      float sum = 0;
      for (int64_t j = 0; j < visible; ++j) sum += scores[j] = std::exp(scores[j] - max_score);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (int64_t j = 0; j < visible; ++j) {
        const int64_t slot =
            static_cast<int64_t>(seq.block_table[j / shape.block_size]) * shape.block_size +
            j % shape.block_size;
        const float* vv =
            CacheRow(cache.v, cache.dtype, slot * kv_width + kv_offset, hd, row_scratch.data());
        const float p = scores[j] / sum;
        for (int d = 0; d < hd; ++d) acc[d] += p * vv[d];
      }
      std::copy(acc.begin(), acc.end(), out + (row * heads + h) * hd);
    }
  });
}

void RouteTopK(const float* logits, int num_experts, int top_k, bool norm_topk_prob, int* ids,
               float* weights) {
  std::vector<float> probs(logits, logits + num_experts);
  const float max_logit = *std::max_element(probs.begin(), probs.end());
  float sum = 0;
  for (float& p : probs) sum += p = std::exp(p - max_logit);
  for (float& p : probs) p /= sum;
  std::vector<int> order(num_experts);
  for (int e = 0; e < num_experts; ++e) order[e] = e;
  std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int a, int b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float chosen = 0;
  for (int i = 0; i < top_k; ++i) chosen += probs[order[i]];
  for (int i = 0; i < top_k; ++i) {
    ids[i] = order[i];
    weights[i] = norm_topk_prob ? probs[order[i]] / chosen : probs[order[i]];
  }
}

void CpuBackend::Moe(const float* x, int64_t rows, int hidden, const float* router_logits,
                     const MoeExperts& experts, float* out) {
  const int k = experts.top_k;
  std::vector<int> ids(rows * k);
  std::vector<float> weights(rows * k);
  for (int64_t r = 0; r < rows; ++r) {
    RouteTopK(router_logits + r * experts.num_experts, experts.num_experts, k,
              experts.norm_topk_prob, &ids[r * k], &weights[r * k]);
  }
  std::fill(out, out + rows * hidden, 0.0f);
  const int inter = experts.intermediate;
  // One expert at a time, at most every row: xs and y [rows, hidden], gate_up [rows, 2 inter],
  // act [rows, inter], in one backend buffer (what the memory plan counts: model_family.h
  // StepShape::moe_copies).
  Result<Buffer> scratch = Allocate(static_cast<size_t>(rows) * (2 * hidden + 3 * inter));
  if (!scratch.ok()) throw std::bad_alloc();
  float* const xs = scratch->data();
  float* const gate_up = xs + rows * hidden;
  float* const act = gate_up + rows * 2 * inter;
  float* const y = act + rows * inter;
  for (size_t local = 0; local < experts.gate_up.size(); ++local) {
    const int expert = experts.expert_begin + static_cast<int>(local);
    std::vector<int64_t> picked_rows;
    std::vector<float> picked_weights;
    for (int64_t i = 0; i < rows * k; ++i) {
      if (ids[i] != expert) continue;
      picked_rows.push_back(i / k);
      picked_weights.push_back(weights[i]);
    }
    const int64_t n = static_cast<int64_t>(picked_rows.size());
    if (n == 0) continue;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(&xs[i * hidden], x + picked_rows[i] * hidden, hidden * sizeof(float));
    }
    Linear(xs, n, hidden, experts.gate_up[local], 2 * inter, gate_up);
    SiluMul(gate_up, n, inter, act);
    Linear(act, n, inter, experts.down[local], hidden, y);
    for (int64_t i = 0; i < n; ++i) {
      float* o = out + picked_rows[i] * hidden;
      for (int d = 0; d < hidden; ++d) o[d] += picked_weights[i] * y[i * hidden + d];
    }
  }
}

}  // namespace spark::engine::backend::cpu
