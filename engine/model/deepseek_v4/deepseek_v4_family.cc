#include "engine/model/deepseek_v4/deepseek_v4_family.h"

#include <algorithm>
#include <cmath>

#include "engine/model/deepseek_v4/cache_layout.h"
#include "engine/model/deepseek_v4/deepseek_v4_config.h"
#include "engine/model/deepseek_v4/deepseek_v4_model.h"
#include "engine/model/deepseek_v4/footprint.h"
#include "engine/model/deepseek_v4/tensor_source.h"
#include "engine/model/deepseek_v4/weights.h"
#include "engine/model/deepseek_v4/workspace.h"

namespace spark::engine::model::dsv4 {
namespace {

// Feeds options.on_progress from the tensors the loader consumes, as a fraction of this rank's
// expected share of the checkpoint (the way LoadModel reports it for the other architectures).
ReadObserver ProgressObserver(const TensorSource& source, const ModelOptions& options) {
  if (!options.on_progress) return {};
  const double expected = std::max<double>(
      1.0, static_cast<double>(source.total_bytes()) / std::max(1, options.shard.size));
  options.on_progress(0.0);
  return [expected, read = uint64_t{0}, cb = options.on_progress](uint64_t bytes) mutable {
    read += bytes;
    cb(std::min(0.999, static_cast<double>(read) / expected));
  };
}

Result<std::unique_ptr<Model>> LoadDeepseekV4(const std::string& dir, core::ModelConfig config,
                                              backend::Backend& backend, comm::Communicator* comm,
                                              const ModelOptions& options) {
  if (backend.deepseek_ops() == nullptr) {
    return UnimplementedError(dir + ": the " + backend.name() +
                              " backend has no DeepSeek ops (backend/deepseek_ops.h)");
  }
  const WeightTypes types = WeightTypes::For(options.weight_dtype);
  SPARK_RETURN_IF_ERROR(CheckHeld(backend, types));
  SPARK_ASSIGN_OR_RETURN(std::unique_ptr<TensorSource> source, TensorSource::Open(dir));
  SPARK_ASSIGN_OR_RETURN(Weights weights,
                         LoadWeights(*source, config, options.shard, options.moe_sharding,
                                     ProgressObserver(*source, options), types));
  return std::unique_ptr<Model>(
      new DeepseekV4Model(std::move(config), std::move(weights), backend, comm));
}

}  // namespace

Result<MemoryFootprint> DeepseekV4Memory(const core::ModelConfig& c, const MemoryQuery& q) {
  MemoryFootprint f;
  // fp8: the released storage (FP8 / FP4 kept, float matrices in bf16; within the padding of
  // each matrix); bf16: every element in two bytes; fp32: the reference's widths.
  if (q.weight_dtype == backend::DType::kFP8) {
    SPARK_ASSIGN_OR_RETURN(f.weight_bytes, WeightBytesPerRank(c, q.shard, q.moe));
  } else {
    SPARK_ASSIGN_OR_RETURN(f.weight_bytes, HeldWeightBytesPerRank(c, q.shard, q.moe));
    if (q.weight_dtype == backend::DType::kBF16) f.weight_bytes /= 2;
  }
  // Constants uploaded with them: the unit weight of the per-head query norm, and the inverse
  // frequencies of the two RoPE tables.
  f.weight_bytes += 4 * (int64_t{c.head_dim} + 2 * (c.dsv4.rope_head_dim / 2));
  f.kv_bytes_per_token = CacheLayout(c).spec().bytes_per_token();
  return f;
}

Result<int64_t> DeepseekV4StepMemory(const core::ModelConfig& c, const MemoryQuery& q,
                                     const StepShape& shape) {
  SPARK_ASSIGN_OR_RETURN(ShardRanges r, PlanShard(c, q.shard, q.moe));
  // The step's workspace, then this rank's logits rows (VocabParallelLogits).
  return 4 * (shape.tokens * WorkspaceFloatsPerToken(c, r) + shape.logit_rows * r.vocab.size);
}

Result<MemoryFootprint> DeepseekV4ServingMemory(const core::ModelConfig& c, const MemoryQuery& q) {
  MemoryFootprint f;
  SPARK_ASSIGN_OR_RETURN(f.weight_bytes, WeightBytesPerRank(c, q.shard, q.moe));
  const KvFootprint kv = ServingKvFootprint(c);
  f.kv_bytes_per_token = static_cast<int64_t>(std::ceil(kv.bytes_per_token));
  f.kv_bytes_per_sequence = kv.bytes_per_sequence;
  return f;
}

namespace {

constexpr std::string_view kModelTypes[] = {"deepseek_v4"};
constexpr std::string_view kBackends[] = {"cpu", "cuda"};
// fp32 widens every matrix (the reference numerics), bf16 keeps them all in bf16, fp8 keeps the
// FP8 and FP4 matrices as released (dsv4::WeightTypes).
constexpr backend::DType kWeightTypes[] = {backend::DType::kF32, backend::DType::kBF16,
                                           backend::DType::kFP8};
constexpr backend::DType kFp32[] = {backend::DType::kF32};

}  // namespace

constinit const ModelFamily kDeepseekV4Family = {
    .name = "deepseek_v4",
    .model_types = kModelTypes,
    .parse_config = ParseDeepseekV4Config,
    .load = LoadDeepseekV4,
    .memory = DeepseekV4Memory,
    .step_memory = DeepseekV4StepMemory,
    .serving_memory = DeepseekV4ServingMemory,
    .backends = kBackends,
    .weight_dtypes = kWeightTypes,
    .kv_dtypes = kFp32,
    .chat_format = "deepseek_v4",
    .reasoning_parser = "deepseek_v4",
    .tool_parser = "deepseek_v4",
};

}  // namespace spark::engine::model::dsv4
