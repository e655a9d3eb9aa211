#include "engine/model/deepseek_v4/step_plan.h"

namespace spark::engine::model::dsv4 {
namespace {

int64_t SlotOf(const BatchSequence& s, int64_t pos, int block_size) {
  return int64_t{s.block_table[pos / block_size]} * block_size + pos % block_size;
}

}  // namespace

CompressedPlan PlanCompressed(const ForwardBatch& batch, int block_size, int ratio, bool overlap) {
  CompressedPlan p;
  p.ratio = ratio;
  Compression& c = p.compression;
  c.pool = overlap ? 2 * ratio : ratio;
  c.overlap = overlap;
  Candidates& k = p.candidates;
  int64_t t = 0;
  for (const BatchSequence& s : batch.sequences) {
    const int64_t list = static_cast<int64_t>(k.slots.size());
    for (int64_t w = 0; w < s.context_len / ratio; ++w) {
      k.slots.push_back(SlotOf(s, w * ratio + ratio - 1, block_size));
    }
    for (int64_t i = 0; i < s.query_len; ++i, ++t) {
      const int64_t p1 = batch.positions[t] + 1;
      k.first.push_back(list);
      k.count.push_back(static_cast<int32_t>(p1 / ratio));
      if (p1 % ratio != 0) continue;
      const int64_t w = p1 / ratio - 1;
      if (overlap) {
        for (int j = 0; j < ratio; ++j) {
          c.source_slots.push_back(w > 0 ? SlotOf(s, (w - 1) * ratio + j, block_size) : -1);
        }
      }
      for (int j = 0; j < ratio; ++j)
        c.source_slots.push_back(SlotOf(s, w * ratio + j, block_size));
      c.entry_slots.push_back(batch.slots[t]);
      c.entry_positions.push_back(static_cast<int32_t>(w * ratio));
    }
  }
  return p;
}

StepPlan PlanStep(const ForwardBatch& batch, int block_size, const core::DeepseekV4Settings& d) {
  StepPlan plan;
  int64_t start = 0;
  for (const BatchSequence& s : batch.sequences) {
    plan.sequences.push_back({start, s.query_len, s.context_len, s.block_table});
    start += s.query_len;
  }
  plan.csa = PlanCompressed(batch, block_size, d.compress_rate_csa, /*overlap=*/true);
  plan.hca = PlanCompressed(batch, block_size, d.compress_rate_hca, /*overlap=*/false);
  return plan;
}

Status CheckStep(const ForwardBatch& batch, const PagedKvCache& cache, const KvCacheSpec& spec,
                 int vocab_size) {
  SPARK_RETURN_IF_ERROR(batch.Validate(cache.block_size(), cache.num_blocks(), vocab_size));
  const KvCacheSpec& have = cache.spec();
  bool same = have.num_layers == spec.num_layers;
  for (int l = 0; same && l < spec.num_layers; ++l) {
    same = have.width(l) == spec.width(l) && have.v_width(l) == spec.v_width(l);
  }
  if (!same) {
    return InvalidArgumentError("kv cache was made for another model (" +
                                std::to_string(have.num_layers) + " layers, " +
                                std::to_string(have.bytes_per_token()) +
                                " bytes a token; expected " + std::to_string(spec.num_layers) +
                                ", " + std::to_string(spec.bytes_per_token()) + ")");
  }
  int64_t t = 0;
  for (const BatchSequence& s : batch.sequences) {
    for (int64_t i = 0; i < s.query_len; ++i, ++t) {
      if (batch.positions[t] != s.context_len - s.query_len + i) {
        return InvalidArgumentError("forward batch: token " + std::to_string(t) + " has position " +
                                    std::to_string(batch.positions[t]) + ", its sequence implies " +
                                    std::to_string(s.context_len - s.query_len + i));
      }
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::model::dsv4
