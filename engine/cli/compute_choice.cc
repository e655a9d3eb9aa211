#include "engine/cli/compute_choice.h"

#include <algorithm>

#include "engine/core/checkpoint.h"
#include "engine/model/model_family.h"

namespace spark::engine::cli {
namespace {

using backend::DType;

bool Keeps(std::span<const DType> list, DType t) {
  return std::find(list.begin(), list.end(), t) != list.end();
}

// F8_E4M3 when the checkpoint holds FP8 matrices (FP8 releases keep embeddings and small
// projections in BF16), else the float type most of its matrix bytes are stored in.
core::DType StoredType(const core::Checkpoint& ckpt) {
  const std::map<core::DType, uint64_t> bytes = ckpt.MatrixBytesByDType();
  if (bytes.count(core::DType::kF8E4M3) > 0) return core::DType::kF8E4M3;
  core::DType best = core::DType::kF32;
  uint64_t most = 0;
  for (core::DType t : {core::DType::kF32, core::DType::kBF16, core::DType::kF16}) {
    if (auto it = bytes.find(t); it != bytes.end() && it->second > most) best = t, most = it->second;
  }
  return best;
}

Result<DType> AutoWeights(const ComputeRequest& r, const model::ModelFamily& family,
                          std::string* why) {
  DType want = DType::kF32;
  if (r.backend == "cpu") {
    *why = "auto: fp32 on the cpu backend";
  } else {
    SPARK_ASSIGN_OR_RETURN(auto ckpt, core::Checkpoint::Open(r.model_dir));
    const core::DType stored = StoredType(*ckpt);
    want = stored == core::DType::kF8E4M3 ? DType::kFP8 : DType::kBF16;
    *why = "auto: the checkpoint's " + std::string(core::DTypeName(stored)) + " matrices";
    if (stored == core::DType::kF32) *why += "; fp32 only when asked";
  }
  if (!Keeps(family.weight_dtypes, want)) {
    *why += "; " + std::string(family.name) + " keeps " +
            backend::DTypeName(family.weight_dtypes.front());
    want = family.weight_dtypes.front();
  }
  return want;
}

}  // namespace

std::string ComputeChoice::Describe() const {
  return std::string("weights ") + backend::DTypeName(weights) + " (" + weights_why +
         "), KV cache " + backend::DTypeName(kv) + " (" + kv_why + "), CUDA graphs " +
         (cuda_graphs ? "on" : "off") + " (" + graphs_why + ")";
}

Result<ComputeChoice> ChooseCompute(const ComputeRequest& r) {
  SPARK_ASSIGN_OR_RETURN(core::ModelConfig config, model::LoadModelConfig(r.model_dir));
  const model::ModelFamily* family = model::FindModelFamily(config.model_type);
  ComputeChoice c;
  if (r.weight_dtype == "auto") {
    SPARK_ASSIGN_OR_RETURN(c.weights, AutoWeights(r, *family, &c.weights_why));
  } else {
    SPARK_ASSIGN_OR_RETURN(c.weights, backend::ParseDType(r.weight_dtype));
    c.weights_why = "--weight-dtype";
  }
  if (r.kv_dtype == "auto") {
    c.kv = backend::KvDTypeFor(c.weights);
    c.kv_why = "auto: as the weights";
    if (!Keeps(family->kv_dtypes, c.kv)) {
      c.kv = family->kv_dtypes.front();
      c.kv_why += "; " + std::string(family->name) + " keeps " + backend::DTypeName(c.kv);
    }
  } else {
    SPARK_ASSIGN_OR_RETURN(c.kv, backend::ParseDType(r.kv_dtype));
    c.kv_why = "--kv-dtype";
  }
  if (r.cuda_graphs.has_value()) {
    c.cuda_graphs = *r.cuda_graphs && r.backend == "cuda";
    c.graphs_why = *r.cuda_graphs ? (r.backend == "cuda" ? "--cuda-graphs" : "the cpu backend has none")
                                  : "--no-cuda-graphs";
  } else {
    c.cuda_graphs = r.backend == "cuda";
    c.graphs_why = c.cuda_graphs ? "default on cuda" : "the " + r.backend + " backend has none";
  }
  return c;
}

}  // namespace spark::engine::cli
