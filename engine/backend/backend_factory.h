// CreateBackend: the one place that turns a backend name ("cpu", "cuda") into a Backend, so
// commands and rank start-up need not know which backends this build holds.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"

namespace spark::engine::backend {

struct BackendOptions {
  std::string name = "cpu";  // "cpu" or "cuda"
  int threads = 0;           // cpu: worker threads (0 = one per hardware thread)
  int rank = 0;              // cuda: uses device rank % (number of devices)
  // cuda: how long a step's results may take (a dead peer leaves collectives waiting).
  std::chrono::milliseconds step_timeout{60000};
  // cuda: attention math may round to bf16 (set when the weights are bf16: the same precision).
  bool bf16_attention = false;
};

// The backends compiled into this build, e.g. {"cpu", "cuda"}.
std::vector<std::string> CompiledBackends();

// InvalidArgument for an unknown name (naming the choices); FailedPrecondition for "cuda" in a
// build without CUDA (how to get one); Unavailable for "cuda" when no GPU is visible.
Result<std::unique_ptr<Backend>> CreateBackend(const BackendOptions& options);

}  // namespace spark::engine::backend
