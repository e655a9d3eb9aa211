// The logits of DeepSeek-V4 and V4.1: this rank's vocabulary rows of the head (lm_head, or the
// embedding when tied) applied to the normed rows, downloaded, then all-gathered into full rows
// (vocabulary-parallel head, ranks padded to ceil(vocab / world) rows).
// Thread-safety: as the backend and communicator.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "comm/communicator.h"
#include "engine/backend/backend.h"
#include "engine/core/model_config.h"
#include "engine/model/deepseek_v4/backend_weights.h"

namespace spark::engine::model::dsv4 {

// *logits = [rows, vocab] from `in` [rows, hidden]; `comm` null on one rank. The communicator's
// errors.
Status VocabParallelLogits(backend::Backend& backend, comm::Communicator* comm,
                           const BackendWeights& weights, const core::ModelConfig& config,
                           const backend::Buffer& in, int64_t rows, std::vector<float>* logits);

}  // namespace spark::engine::model::dsv4
