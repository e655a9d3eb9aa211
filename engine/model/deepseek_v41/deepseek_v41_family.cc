#include "engine/model/deepseek_v41/deepseek_v41_family.h"

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v41/cache_layout.h"
#include "engine/model/deepseek_v41/deepseek_v41_config.h"
#include "engine/model/deepseek_v41/deepseek_v41_model.h"
#include "engine/model/deepseek_v41/engram_hash.h"
#include "engine/model/deepseek_v41/engram_token_map.h"
#include "engine/model/deepseek_v41/footprint.h"
#include "engine/model/deepseek_v41/weights.h"
#include "engine/model/deepseek_v41/workspace.h"

namespace spark::engine::model::dsv41 {
namespace {

Result<std::unique_ptr<Model>> LoadDeepseekV41(const std::string& dir, core::ModelConfig config,
                                               backend::Backend& backend, comm::Communicator* comm,
                                               const ModelOptions& options) {
  if (backend.deepseek_ops() == nullptr) {
    return UnimplementedError(dir + ": the " + backend.name() +
                              " backend has no DeepSeek ops (backend/deepseek_ops.h)");
  }
  const dsv4::WeightTypes types = dsv4::WeightTypes::For(options.weight_dtype);
  SPARK_RETURN_IF_ERROR(dsv4::CheckHeld(backend, types));
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<dsv4::TensorSource> source, dsv4::TensorSource::Open(dir));
  std::vector<int32_t> token_map;
  std::unique_ptr<EngramHashing> hashing;
  if (!config.dsv41.engram_layer_ids.empty()) {
    const std::string tokenizer = options.tokenizer_dir.empty() ? dir : options.tokenizer_dir;
    SPARK_ASSIGN_OR_RETURN(
        token_map, LoadCompressedTokenMap(tokenizer, config.dsv41.engram_compressed_vocab_size,
                                          config.dsv41.engram_pad_id));
    SPARK_ASSIGN_OR_RETURN(
        EngramHashing h,
        EngramHashing::Create(config.dsv41, token_map[config.dsv41.engram_pad_id]));
    hashing = std::make_unique<EngramHashing>(std::move(h));
  }
  SPARK_ASSIGN_OR_RETURN(Weights weights, LoadWeights(*source, config, hashing.get(), options.shard,
                                                      options.moe_sharding, {}, types));
  std::optional<DraftWeights> draft;
  if (options.load_draft) {
    SPARK_ASSIGN_OR_RETURN(
        draft, LoadDraftWeights(*source, config, types, options.shard, options.moe_sharding));
  }
  return std::unique_ptr<Model>(new DeepseekV41Model(std::move(config), std::move(source),
                                                     std::move(weights), std::move(hashing),
                                                     std::move(token_map), backend, comm,
                                                     std::move(draft)));
}

}  // namespace

namespace {

// Elements DSpark holds on its rank (dspark.h): the draft stack sharded by `r`
// (dspark_weights.h; the confidence head is not kept), its RoPE tables and unit norm and the 1/N
// pre.
int64_t DraftFloats(const core::ModelConfig& c, const dsv4::ShardRanges& r) {
  const core::DeepseekV4Settings& d = c.dsv4;
  const core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, hd = c.head_dim, ql = d.q_lora_rank, n = c.residual_streams;
  const int64_t heads = r.heads.size, e = s.dspark_n_routed_experts;
  int64_t stage = 2 * ((n + 2) * n * (n * hidden + 1) + 3) + 2 * hidden;  // mHC, norms
  stage += ql * hidden + ql + heads * hd * ql + hd * hidden + hd + heads;  // q, kv, sinks
  stage += d.o_lora_rank * heads * hd + hidden * r.groups.size * d.o_lora_rank;  // wo_a, wo_b
  stage += e * hidden + e;                                                     // router
  stage += r.experts.size * 3 * r.expert_channels.size * hidden + 3 * r.shared_channels.size * hidden;
  const auto targets = static_cast<int64_t>(s.dspark_target_layer_ids.size());
  const int64_t vocab = c.vocab_size, rank = s.dspark_markov_rank;
  // markov_head is split by vocabulary rows as the lm_head (r.vocab), markov_head.embed is whole.
  return s.num_nextn_predict_layers * stage + targets * hidden * hidden + 2 * hidden +
         vocab * rank + r.vocab.size * rank + d.rope_head_dim + hd + n;
}

// What DSpark keeps beside a step (dspark.h), grown to the largest so far and then held: the
// target step's captures, the combined context and a scratch row per token, and the capture
// pre; the draft forward's workspace and base logits (this rank's vocabulary slice) for every
// block the step drafts, and the Markov rows, biased logits and argmax pairs per block.
int64_t DraftStepFloats(const core::ModelConfig& c, const dsv4::ShardRanges& target,
                        const dsv4::ShardRanges& draft, const StepShape& shape) {
  const core::DeepseekV41Settings& s = c.dsv41;
  const auto targets = static_cast<int64_t>(s.dspark_target_layer_ids.size());
  const int64_t context = shape.tokens * ((targets + 2) * c.hidden_size + c.residual_streams);
  const int64_t rows = shape.draft_blocks * shape.draft_block_tokens, local = target.vocab.size;
  return context + rows * (WorkspaceFloatsPerToken(DraftConfig(c), draft, 1, 0) + local) +
         shape.draft_blocks * (s.dspark_markov_rank + local + 2);
}

}  // namespace

Result<MemoryFootprint> DeepseekV41Memory(const core::ModelConfig& c, const MemoryQuery& q) {
  SPARK_ASSIGN_OR_RETURN(dsv4::ShardRanges r, dsv4::PlanShard(c, q.shard, q.moe));
  const core::DeepseekV4Settings& d = c.dsv4;
  const core::DeepseekV41Settings& s = c.dsv41;
  const int64_t hidden = c.hidden_size, hd = c.head_dim, ql = d.q_lora_rank, n = c.residual_streams;
  const int64_t di = d.index_head_dim, ih = d.index_n_heads, e = c.moe.num_experts;
  int64_t floats = r.vocab.size * hidden * (c.tie_word_embeddings ? 1 : 2) + hidden;
  for (int i = 0; i < c.num_layers; ++i) {
    floats += 2 * ((n + 2) * n * (n * hidden + 1) + 3) + 2 * hidden;         // mHC, norms
    floats += ql * hidden + ql + r.heads.size * hd * ql + hd * hidden + hd;  // q, kv
    floats +=
        r.heads.size + d.o_lora_rank * r.heads.size * hd + hidden * r.groups.size * d.o_lora_rank;
    if (s.IsKvSource(i))
      floats += hd * hidden * (s.compress_ratios[i] > 1 ? 2 : 1) + hd + di * hd + di;
    if (s.IsIndexSource(i)) floats += ih * di * ql + ih * hidden;
    floats += e * hidden + e;  // router and its bias (bias_vl stays on the host)
    floats +=
        r.experts.size * 3 * r.expert_channels.size * hidden + 3 * r.shared_channels.size * hidden;
    const int engram = s.EngramIndex(i);
    if (engram >= 0) {
      const int64_t cols = int64_t{s.engram_max_ngram_size - 1} * s.engram_n_heads;
      floats += (n + 1) * hidden * cols * s.engram_head_dim + n * hidden;
    }
  }
  // Constants beside the weights: RoPE tables, the unit norm, the one-hot first pre and, with
  // Engram, its token map (vocab_size floats).
  floats += d.rope_head_dim + hd + n + (s.engram_layer_ids.empty() ? 0 : c.vocab_size);
  MemoryFootprint f;
  f.weight_bytes = 4 * floats;
  // fp8: the released storage (ServingMemory: FP8 / FP4 kept, float matrices in bf16; within
  // each matrix's padding); bf16: two bytes an element.
  if (q.weight_dtype == backend::DType::kFP8) {
    SPARK_ASSIGN_OR_RETURN(ServingFootprint released, ServingMemory(c, q.shard, q.moe));
    f.weight_bytes = released.weight_bytes;
  } else if (q.weight_dtype == backend::DType::kBF16) {
    f.weight_bytes /= 2;
  }
  const int draft_layers = q.draft ? s.num_nextn_predict_layers : 0;
  if (draft_layers > 0) {
    // The DSpark stack, unsharded: fp32 or bf16 as the backbone; with the released types one
    // byte an element (FP8; its FP4 experts take half that, so this is an upper bound).
    const int bytes = q.weight_dtype == backend::DType::kF32    ? 4
                      : q.weight_dtype == backend::DType::kBF16 ? 2
                                                                : 1;
    SPARK_ASSIGN_OR_RETURN(dsv4::ShardRanges dr, dsv4::PlanShard(DraftConfig(c), q.shard, q.moe));
    f.weight_bytes += bytes * DraftFloats(c, dr);
  }
  f.kv_bytes_per_token = CacheLayout(c, draft_layers).spec().bytes_per_token();
  return f;
}

Result<int64_t> DeepseekV41StepMemory(const core::ModelConfig& c, const MemoryQuery& q,
                                      const StepShape& shape) {
  SPARK_ASSIGN_OR_RETURN(dsv4::ShardRanges r, dsv4::PlanShard(c, q.shard, q.moe));
  const core::DeepseekV41Settings& s = c.dsv41;
  // The step's candidate width (StepPlan::stride): the entries the longest query may see at the
  // smallest compression ratio of a KV source.
  int ratio = 0;
  for (int layer : s.kv_source_layer_ids) {
    const int r_layer = s.compress_ratios[layer];
    if (r_layer > 0 && (ratio == 0 || r_layer < ratio)) ratio = r_layer;
  }
  const int stride = ratio > 0 ? static_cast<int>(shape.context / ratio) : 0;
  const int columns =
      s.engram_layer_ids.empty() ? 0 : (s.engram_max_ngram_size - 1) * s.engram_n_heads;
  int64_t floats = shape.tokens * WorkspaceFloatsPerToken(c, r, stride, columns) +
                   shape.logit_rows * r.vocab.size;
  if (q.draft && s.num_nextn_predict_layers > 0) {
    SPARK_ASSIGN_OR_RETURN(dsv4::ShardRanges dr, dsv4::PlanShard(DraftConfig(c), q.shard, q.moe));
    floats += DraftStepFloats(c, r, dr, shape);
  }
  return 4 * floats;
}

Result<MemoryFootprint> DeepseekV41ServingMemory(const core::ModelConfig& c, const MemoryQuery& q) {
  SPARK_ASSIGN_OR_RETURN(ServingFootprint s, ServingMemory(c, q.shard, q.moe));
  MemoryFootprint f;
  f.weight_bytes = s.weight_bytes;
  f.kv_bytes_per_token = s.kv_bytes_per_token;
  f.kv_bytes_per_sequence = s.kv_bytes_per_sequence;
  f.mapped_bytes = s.engram_table_bytes;
  return f;
}

namespace {

constexpr std::string_view kModelTypes[] = {"deepseek_v41", "deepseek_v41_text"};
constexpr std::string_view kBackends[] = {"cpu", "cuda"};
// fp32 widens every matrix (the reference numerics), bf16 keeps them all in bf16, fp8 keeps the
// FP8 and FP4 matrices as released (dsv4::WeightTypes).
constexpr backend::DType kWeightTypes[] = {backend::DType::kF32, backend::DType::kBF16,
                                           backend::DType::kFP8};
constexpr backend::DType kFp32[] = {backend::DType::kF32};

}  // namespace

constinit const ModelFamily kDeepseekV41Family = {
    .name = "deepseek_v41",
    .model_types = kModelTypes,
    .parse_config = ParseDeepseekV41Config,
    .load = LoadDeepseekV41,
    .memory = DeepseekV41Memory,
    .step_memory = DeepseekV41StepMemory,
    .serving_memory = DeepseekV41ServingMemory,
    .backends = kBackends,
    .weight_dtypes = kWeightTypes,
    .kv_dtypes = kFp32,
    .chat_format = "deepseek_v4",
    .reasoning_parser = "deepseek_v4",
    .tool_parser = "deepseek_v4",
    .draft_method = "dspark",
};

}  // namespace spark::engine::model::dsv41
