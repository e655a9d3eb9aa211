#include "engine/model/model.h"

#include <algorithm>

#include "engine/model/model_family.h"

namespace spark::engine::model {

Result<std::unique_ptr<Model>> LoadModel(const std::string& dir, backend::Backend& backend,
                                         comm::Communicator* comm, const ModelOptions& options) {
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, LoadModelConfig(dir));
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
  const ModelFamily* family = FindModelFamily(config.model_type);  // parsed: it exists
  Status supported = CheckSupported(*family, backend.name(), options);
  if (!supported.ok()) return Status(supported.code(), dir + ": " + supported.message());
  return family->load(dir, std::move(config), backend, comm, options);
}

Status Model::DraftTokens(std::span<const DraftBlock>, PagedKvCache&,
                          std::vector<std::vector<int32_t>>*) {
  return UnimplementedError(config().model_type + " has no draft model loaded");
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

Status Model::CheckLaunch(const ForwardBatch& batch, bool ids_from_last) const {
  if (launched_rows_.size() >= kMaxLaunched) {
    return FailedPreconditionError(std::to_string(launched_rows_.size()) +
                                   " steps launched and not taken (TakeArgMax first)");
  }
  if (!ids_from_last) return Status::Ok();
  if (last_launched_rows_ < 0) {
    return InvalidArgumentError("ids_from_last: no step was launched before this one");
  }
  if (batch.num_tokens() != static_cast<int64_t>(batch.sequences.size()) ||
      batch.num_tokens() != last_launched_rows_) {
    return InvalidArgumentError(
        "ids_from_last: needs one token per sequence and the last launched step's " +
        std::to_string(last_launched_rows_) + " rows (got " + std::to_string(batch.num_tokens()) +
        " tokens in " + std::to_string(batch.sequences.size()) + " sequences)");
  }
  return Status::Ok();
}

Status Model::LaunchArgMax(const ForwardBatch& batch, PagedKvCache& cache, bool ids_from_last) {
  SPARK_RETURN_IF_ERROR(CheckLaunch(batch, ids_from_last));
  std::vector<int32_t> ids;
  if (ids_from_last) {
    ForwardBatch fed = batch;
    fed.token_ids = last_ids_;
    SPARK_RETURN_IF_ERROR(ForwardArgMax(fed, cache, &ids));
  } else {
    SPARK_RETURN_IF_ERROR(ForwardArgMax(batch, cache, &ids));
  }
  last_ids_ = ids;
  last_launched_rows_ = static_cast<int64_t>(ids.size());
  launched_rows_.push_back(last_launched_rows_);
  launched_ids_.push_back(std::move(ids));
  return Status::Ok();
}

Status Model::TakeArgMax(std::vector<int32_t>* ids) {
  if (launched_ids_.empty()) return FailedPreconditionError("TakeArgMax: no step launched");
  *ids = std::move(launched_ids_.front());
  launched_ids_.pop_front();
  launched_rows_.pop_front();
  return Status::Ok();
}

}  // namespace spark::engine::model
