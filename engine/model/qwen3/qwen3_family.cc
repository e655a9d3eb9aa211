#include "engine/model/qwen3/qwen3_family.h"

#include "engine/core/checkpoint.h"
#include "engine/model/qwen3/qwen3_config.h"
#include "engine/model/qwen3/qwen3_model.h"
#include "engine/model/qwen3/qwen3_weights.h"
#include "engine/model/qwen3/step_widths.h"

namespace spark::engine::model::qwen3 {
namespace {

using backend::DType;

constexpr std::string_view kModelTypes[] = {"qwen3", "qwen3_moe"};
constexpr std::string_view kBackends[] = {"cpu", "cuda"};
constexpr DType kWeightTypes[] = {DType::kF32, DType::kBF16, DType::kFP8};
constexpr DType kKvTypes[] = {DType::kF32, DType::kBF16};

// Feeds options.on_progress from the checkpoint's reads (see ModelOptions::on_progress).
void ReportLoadProgress(core::Checkpoint& ckpt, const ModelOptions& options) {
  if (!options.on_progress) return;
  const double expected = std::max<double>(
      1.0, static_cast<double>(ckpt.total_tensor_bytes()) / std::max(1, options.shard.size));
  ckpt.set_read_observer(
      [expected, read = uint64_t{0}, cb = options.on_progress](uint64_t bytes) mutable {
        read += bytes;
        cb(std::min(0.999, static_cast<double>(read) / expected));
      });
  options.on_progress(0.0);
}

Result<std::unique_ptr<Model>> LoadQwen3(const std::string& dir, core::ModelConfig config,
                                         backend::Backend& backend, comm::Communicator* comm,
                                         const ModelOptions& options) {
  SPARK_ASSIGN_OR_RETURN(auto ckpt, core::Checkpoint::Open(dir));
  ReportLoadProgress(*ckpt, options);
  SPARK_ASSIGN_OR_RETURN(Qwen3Weights weights,
                         LoadQwen3Weights(*ckpt, config, options.shard, options.moe_sharding,
                                          options.weight_dtype, backend));
  return std::unique_ptr<Model>(
      new Qwen3Model(std::move(config), std::move(weights), backend, comm, options));
}

}  // namespace

Result<MemoryFootprint> Qwen3Memory(const core::ModelConfig& c, const MemoryQuery& q) {
  SPARK_RETURN_IF_ERROR(q.shard.CheckFits(c, q.moe));
  const DType w = q.weight_dtype;
  const int64_t hidden = c.hidden_size, hd = c.head_dim;
  const int64_t heads = q.shard.Heads(c).size, kv_heads = q.shard.KvHeads(c).size;
  const int64_t vocab = q.shard.Vocab(c.vocab_size).size;
  auto matrix = [&](int64_t rows, int64_t cols) {
    return static_cast<int64_t>(backend::MatrixBytes(rows, cols, w));
  };
  auto fp32 = [](int64_t n) { return 4 * n; };
  MemoryFootprint f;
  f.weight_bytes = fp32(vocab * hidden) + fp32(hidden);  // embedding, final norm
  if (!c.tie_word_embeddings) f.weight_bytes += matrix(vocab, hidden);
  const int64_t dense = q.shard.Even(c.intermediate_size).size;
  const bool by_expert = q.moe == MoeSharding::kByExpert;
  const int64_t experts = by_expert ? q.shard.Even(c.moe.num_experts).size : c.moe.num_experts;
  const int64_t channels =
      by_expert ? c.moe.intermediate_size : q.shard.Even(c.moe.intermediate_size).size;
  for (const core::LayerSpec& layer : c.layers) {
    int64_t b = fp32(2 * hidden + 2 * hd);  // input/post norms, q/k norms
    if (w == DType::kFP8) {
      b += matrix(heads * hd, hidden) + 2 * matrix(kv_heads * hd, hidden);
    } else {
      b += matrix((heads + 2 * kv_heads) * hd, hidden);  // q, k, v stacked
    }
    b += matrix(hidden, heads * hd);  // o
    if (layer.mlp == core::MlpType::kMoe) {
      b += fp32(c.moe.num_experts * hidden);  // router
      b += experts * (matrix(2 * channels, hidden) + matrix(hidden, channels));
    } else {
      b += matrix(2 * dense, hidden) + matrix(hidden, dense);
    }
    f.weight_bytes += b;
  }
  f.kv_bytes_per_token = int64_t{2} * c.num_layers * kv_heads * hd *
                         static_cast<int64_t>(backend::DTypeBytes(q.kv_dtype));
  return f;
}

Result<int64_t> Qwen3StepMemory(const core::ModelConfig& c, const MemoryQuery& q,
                                const StepShape& shape) {
  SPARK_RETURN_IF_ERROR(q.shard.CheckFits(c, q.moe));
  const StepWidths w = PlannedStepWidths(c, q.shard, q.moe);
  const int64_t n = shape.tokens, rows = shape.logit_rows, world = q.shard.size;
  const int64_t vocab = q.shard.Vocab(c.vocab_size).size,
                padded = q.shard.VocabPadded(c.vocab_size);
  // The launched-ahead ArgMax pairs, kept with the model (Qwen3Model::feed_).
  int64_t floats = world * Qwen3Model::kMaxLaunchRows * 2;
  floats += n * w.FloatsPerToken();
  if (shape.bf16_inputs) floats += (n * c.hidden_size + 1) / 2 + (n * w.inter + 1) / 2;
  // Then the larger of the MoE op's scratch (inside a layer) and the logits: the rows of the
  // padded shard and this rank's part (Logits), or the part and the ArgMax pairs gathered over
  // the ranks (ForwardArgMax).
  const int64_t sampled = rows * padded + rows * vocab;
  const int64_t greedy = rows * vocab + (world > 1 ? rows * 2 : 0) + world * rows * 2;
  const bool has_moe = std::any_of(c.layers.begin(), c.layers.end(), [](const core::LayerSpec& l) {
    return l.mlp == core::MlpType::kMoe;
  });
  const int64_t copies = n * shape.moe_copies;
  const int64_t moe = !has_moe ? 0
                               : copies * (2 * c.hidden_size + 3 * w.expert_inter) +
                                     (shape.moe_copies > 1 ? copies : 0);
  floats += std::max({sampled, greedy, moe});
  return 4 * floats;
}

constinit const ModelFamily kQwen3Family = {
    .name = "qwen3",
    .model_types = kModelTypes,
    .parse_config = ParseQwen3Config,
    .load = LoadQwen3,
    .memory = Qwen3Memory,
    .step_memory = Qwen3StepMemory,
    .backends = kBackends,
    .weight_dtypes = kWeightTypes,
    .kv_dtypes = kKvTypes,
    .chat_format = "qwen3",
    .reasoning_parser = "qwen3",
    .tool_parser = "qwen3",
};

}  // namespace spark::engine::model::qwen3
