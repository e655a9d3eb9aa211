// What a rank computes in when the user leaves it to the engine (--weight-dtype auto,
// --kv-dtype auto, CUDA graphs unless --no-cuda-graphs), decided from the backend, the model
// family's row and the checkpoint's stored types, with the reason for each choice: the start-up
// line prints them. Rules:
//   weights  cuda: the checkpoint's (any F8_E4M3 matrices: fp8; else most bytes BF16 or F16:
//            bf16; F32: bf16 too, fp32 only when asked); cpu: fp32 (its reference path; bf16
//            there only checks accuracy); a type the family does not keep falls back to the
//            first it does.
//   KV cache as the weights (bf16 for fp8 weights), within the family's types.
//   graphs   on for the cuda backend, off on cpu (it has none); explicit flags win.
// Thread-safety: pure functions (ChooseCompute reads the checkpoint's headers).
#pragma once

#include <optional>
#include <string>

#include "base/status.h"
#include "engine/backend/backend_types.h"

namespace spark::engine::cli {

struct ComputeRequest {
  std::string backend = "cpu";
  std::string model_dir;
  std::string weight_dtype = "auto";  // auto, fp32, bf16, fp8
  std::string kv_dtype = "auto";      // auto, fp32, bf16
  std::optional<bool> cuda_graphs;    // unset: the backend's default
};

struct ComputeChoice {
  backend::DType weights = backend::DType::kF32;
  backend::DType kv = backend::DType::kF32;
  bool cuda_graphs = false;
  std::string weights_why, kv_why, graphs_why;

  // "weights bf16 (auto: the checkpoint's BF16 matrices), KV cache bf16 (auto: as the
  // weights), CUDA graphs on (default on cuda)".
  std::string Describe() const;
};

// InvalidArgument for a type name that is not one; the config and checkpoint errors of the
// model directory (NotFound naming the file).
Result<ComputeChoice> ChooseCompute(const ComputeRequest& request);

}  // namespace spark::engine::cli
