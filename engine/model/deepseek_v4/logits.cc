#include "engine/model/deepseek_v4/logits.h"

#include <algorithm>

namespace spark::engine::model::dsv4 {

Status VocabParallelLogits(backend::Backend& backend_, comm::Communicator* comm_,
                           const BackendWeights& w_, const core::ModelConfig& config_,
                           const backend::Buffer& in, int64_t rows, std::vector<float>* logits) {
  const int hidden = config_.hidden_size;
  const int64_t vocab = config_.vocab_size, local = w_.ranges.vocab.size;
  const int world = comm_ == nullptr ? 1 : comm_->world_size();
  const int64_t padded = (vocab + world - 1) / world;
  if (world == 1 && local == vocab) {
    // The whole vocabulary here: the rows download straight into the output (it keeps its
    // capacity across steps; scored prompts bring back hundreds of rows a step).
    SPARK_ASSIGN_OR_RETURN(backend::Buffer out, backend_.Allocate(rows * local));
    backend_.Linear(in.data(), rows, hidden, w_.lm_head().weight(), static_cast<int>(local),
                    out.data());
    logits->resize(rows * vocab);
    backend_.Download(out.data(), *logits);
    return Status::Ok();
  }
  std::vector<float> part(rows * std::max<int64_t>(local, 1));
  if (local > 0) {
    SPARK_ASSIGN_OR_RETURN(backend::Buffer out, backend_.Allocate(rows * local));
    backend_.Linear(in.data(), rows, hidden, w_.lm_head().weight(), static_cast<int>(local),
                    out.data());
    backend_.Download(out.data(), std::span(part).first(rows * local));
  }
  logits->assign(rows * vocab, 0.0f);
  if (world == 1) {
    std::copy_n(part.begin(), rows * vocab, logits->begin());
    return Status::Ok();
  }
  std::vector<float> mine(rows * padded, 0.0f), gathered(world * rows * padded);
  for (int64_t r = 0; r < rows; ++r) std::copy_n(&part[r * local], local, &mine[r * padded]);
  SPARK_RETURN_IF_ERROR(comm_->AllGather(mine.data(), mine.size(), gathered.data()));
  for (int rank = 0; rank < world; ++rank) {
    const int64_t begin = rank * padded, count = std::min(padded, vocab - begin);
    for (int64_t r = 0; r < rows && count > 0; ++r) {
      std::copy_n(&gathered[(rank * rows + r) * padded], count, &(*logits)[r * vocab + begin]);
    }
  }
  return Status::Ok();
}

}  // namespace spark::engine::model::dsv4
