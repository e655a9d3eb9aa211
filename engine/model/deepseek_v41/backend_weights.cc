#include "engine/model/deepseek_v41/backend_weights.h"

#include <utility>

namespace spark::engine::model::dsv41 {
namespace {

Status Put(backend::Backend& backend, Vec& host, backend::Buffer* dst) {
  if (host.empty()) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(*dst, backend.Allocate(host.size()));
  backend.Upload(host, dst->data());
  Vec().swap(host);
  return Status::Ok();
}

Status Put(backend::Backend& backend, dsv4::WeightTypes types, dsv4::Mat& host,
           backend::Buffer* dst) {
  if (host.empty()) return Status::Ok();
  SPARK_ASSIGN_OR_RETURN(*dst, dsv4::UploadMatrix(backend, types, host));
  return Status::Ok();
}

}  // namespace

Result<BackendWeights> UploadWeights(Weights host, const core::ModelConfig& c,
                                     backend::Backend& backend) {
  BackendWeights w;
  const dsv4::WeightTypes types = host.base.types;
  SPARK_ASSIGN_OR_RETURN(w.base, dsv4::UploadWeights(std::move(host.base), c, backend));
  const size_t layers = host.layers.size();
  w.index_wk.resize(layers);
  w.index_k_norm.resize(layers);
  for (size_t i = 0; i < layers; ++i) {
    SPARK_RETURN_IF_ERROR(Put(backend, types, host.layers[i].index_wk, &w.index_wk[i]));
    SPARK_RETURN_IF_ERROR(Put(backend, host.layers[i].index_k_norm, &w.index_k_norm[i]));
    w.engram_of_layer.push_back(host.layers[i].engram);
  }
  for (EngramWeights& e : host.engram) {
    SPARK_RETURN_IF_ERROR(Put(backend, types, e.wkv, &w.engram_wkv.emplace_back()));
    SPARK_RETURN_IF_ERROR(Put(backend, e.weight, &w.engram_weight.emplace_back()));
    w.tables.push_back(e.table);
  }
  return w;
}

}  // namespace spark::engine::model::dsv41
