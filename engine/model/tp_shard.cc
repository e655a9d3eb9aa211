#include "engine/model/tp_shard.h"

#include <algorithm>

#include "base/field_errors.h"

namespace spark::engine::model {

Status TpShard::CheckFits(const core::ModelConfig& c, MoeSharding moe) const {
  FieldErrors e;
  const std::string tp = std::to_string(size);
  auto divides = [&](const char* key, int value) {
    if (value % size != 0) e.Add(key, std::to_string(value) + " is not divisible by --tp " + tp);
  };
  if (size < 1 || rank < 0 || rank >= size) e.Add("tp", "rank must be in [0, tp)");
  divides("num_attention_heads", c.num_heads);
  if (c.num_kv_heads >= size) {
    divides("num_key_value_heads", c.num_kv_heads);
  } else if (size % c.num_kv_heads != 0) {
    e.Add("num_key_value_heads",
          std::to_string(c.num_kv_heads) + " must divide --tp " + tp + " to replicate KV heads");
  }
  bool any_dense = false, any_moe = false;
  for (const core::LayerSpec& l : c.layers)
    (l.mlp == core::MlpType::kMoe ? any_moe : any_dense) = true;
  if (any_dense) divides("intermediate_size", c.intermediate_size);
  if (any_moe && moe == MoeSharding::kInsideExperts)
    divides("moe_intermediate_size", c.moe.intermediate_size);
  if (any_moe && moe == MoeSharding::kByExpert) divides("num_experts", c.moe.num_experts);
  return e.ToStatus("config.json does not fit tensor parallelism");
}

Range TpShard::Even(int64_t total) const { return {rank * (total / size), total / size}; }

Range TpShard::Heads(const core::ModelConfig& c) const { return Even(c.num_heads); }

Range TpShard::KvHeads(const core::ModelConfig& c) const {
  if (c.num_kv_heads >= size) return Even(c.num_kv_heads);
  const int ranks_per_head = size / c.num_kv_heads;
  return {rank / ranks_per_head, 1};
}

Range TpShard::Vocab(int64_t vocab) const {
  const int64_t per = VocabPadded(vocab);
  const int64_t begin = std::min(vocab, rank * per);
  return {begin, std::min(vocab, begin + per) - begin};
}

}  // namespace spark::engine::model
