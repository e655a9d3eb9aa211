#include "engine/model/model.h"

#include <algorithm>

#include "engine/core/checkpoint.h"
#include "engine/model/deepseek_v4/deepseek_v4_model.h"
#include "engine/model/qwen3_model.h"

namespace spark::engine::model {
namespace {

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

}  // namespace

Result<std::unique_ptr<Model>> LoadModel(const std::string& dir, backend::Backend& backend,
                                         comm::Communicator* comm, const ModelOptions& options) {
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, core::LoadModelConfig(dir));
  if (options.shard.size > 1 && comm == nullptr) {
    return InvalidArgumentError("tensor parallelism of " + std::to_string(options.shard.size) +
                                " needs a communicator");
  }
  if (comm != nullptr &&
      (comm->world_size() != options.shard.size || comm->rank() != options.shard.rank)) {
    return InvalidArgumentError(
        "communicator is rank " + std::to_string(comm->rank()) + " of " +
        std::to_string(comm->world_size()) + " but the model shard is rank " +
        std::to_string(options.shard.rank) + " of " + std::to_string(options.shard.size));
  }
  if (config.model_type == "deepseek_v4" && options.weight_dtype != backend::DType::kF32) {
    return InvalidArgumentError(dir + ": deepseek_v4 keeps fp32 weights only (weight type " +
                                backend::DTypeName(options.weight_dtype) + " asked)");
  }
  if (config.model_type == "deepseek_v4" && options.kv_dtype != backend::DType::kF32) {
    return InvalidArgumentError(dir + ": deepseek_v4 keeps an fp32 KV cache only (" +
                                backend::DTypeName(options.kv_dtype) + " asked)");
  }
  if (config.model_type == "deepseek_v4") {
    return dsv4::LoadDeepseekV4(dir, std::move(config), backend, comm, options);
  }
  SPARK_ASSIGN_OR_RETURN(auto ckpt, core::Checkpoint::Open(dir));
  ReportLoadProgress(*ckpt, options);
  if (config.model_type == "qwen3" || config.model_type == "qwen3_moe") {
    SPARK_ASSIGN_OR_RETURN(Qwen3Weights weights,
                           LoadQwen3Weights(*ckpt, config, options.shard, options.moe_sharding,
                                            options.weight_dtype, backend));
    return std::unique_ptr<Model>(
        new Qwen3Model(std::move(config), std::move(weights), backend, comm, options));
  }
  return UnimplementedError(dir + "/config.json: model_type '" + config.model_type +
                            "' has no implementation");
}

Status Model::ForwardArgMax(const ForwardBatch& batch, PagedKvCache& cache,
                            std::vector<int32_t>* ids) {
  std::vector<float> logits;
  SPARK_RETURN_IF_ERROR(Forward(batch, cache, &logits));
  const int64_t rows = batch.num_logit_rows();
  std::vector<float> pairs(rows * 2);
  backend::ArgMaxRows(logits.data(), rows, config().vocab_size, 0, pairs.data());
  SPARK_ASSIGN_OR_RETURN(*ids, backend::MergeArgMax(pairs, 1, rows));
  return Status::Ok();
}

}  // namespace spark::engine::model
