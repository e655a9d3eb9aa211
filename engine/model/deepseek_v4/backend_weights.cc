#include "engine/model/deepseek_v4/backend_weights.h"

#include <utility>

#include "engine/model/deepseek_v4/rope.h"

namespace spark::engine::model::dsv4 {
namespace {

// Moves host tensors into backend buffers, keeping the first error.
class Uploader {
 public:
  Uploader(backend::Backend& backend, WeightTypes types) : backend_(backend), types_(types) {}

  // A matrix in the type WeightTypes says (UploadMatrix).
  void Put(Mat& host, Buffer* dst) {
    if (!status_.ok() || host.empty()) return;
    Result<Buffer> b = UploadMatrix(backend_, types_, host);
    if (!b.ok()) {
      status_ = b.status();
      return;
    }
    *dst = std::move(*b);
  }
  void Put(std::vector<Mat>& host, std::vector<Buffer>* dst) {
    dst->resize(host.size());
    for (size_t i = 0; i < host.size(); ++i) Put(host[i], &(*dst)[i]);
  }

  // An empty tensor stays an empty buffer (data() null: "none" to the ops).
  void Put(Vec& host, Buffer* dst) {
    if (!status_.ok() || host.empty()) return;
    Result<Buffer> b = backend_.Allocate(host.size());
    if (!b.ok()) {
      status_ = b.status();
      return;
    }
    backend_.Upload(host, b->data());
    *dst = std::move(*b);
    Vec().swap(host);
  }
  void Put(std::vector<Vec>& host, std::vector<Buffer>* dst) {
    dst->resize(host.size());
    for (size_t i = 0; i < host.size(); ++i) Put(host[i], &(*dst)[i]);
  }
  void Put(Vec&& host, Buffer* dst) { Put(host, dst); }

  const Status& status() const { return status_; }

 private:
  backend::Backend& backend_;
  WeightTypes types_;
  Status status_;
};

void PutLayer(Uploader& up, LayerWeights& h, LayerBuffers* l) {
  l->attention = h.attention;
  l->mlp = h.mlp;
  for (auto [src, dst] : {std::pair{&h.hc_attn, &l->hc_attn}, {&h.hc_ffn, &l->hc_ffn}}) {
    up.Put(src->fn, &dst->fn);
    up.Put(src->base, &dst->base);
    up.Put(src->scale, &dst->scale);
  }
  for (auto [src, dst] :
       {std::pair{&h.compressor, &l->compressor}, {&h.index_compressor, &l->index_compressor}}) {
    up.Put(src->wkv, &dst->wkv);
    up.Put(src->wgate, &dst->wgate);
    up.Put(src->ape, &dst->ape);
    up.Put(src->norm, &dst->norm);
  }
  for (auto [src, dst] : {std::pair{&h.attn_norm, &l->attn_norm},
                          {&h.ffn_norm, &l->ffn_norm},
                          {&h.q_norm, &l->q_norm},
                          {&h.kv_norm, &l->kv_norm},
                          {&h.sinks, &l->sinks},
                          {&h.router_bias, &l->router_bias}}) {
    up.Put(*src, dst);
  }
  for (auto [src, dst] : {std::pair{&h.wq_a, &l->wq_a},
                          {&h.wq_b, &l->wq_b},
                          {&h.wkv, &l->wkv},
                          {&h.wo_a, &l->wo_a},
                          {&h.wo_b, &l->wo_b},
                          {&h.index_wq_b, &l->index_wq_b},
                          {&h.index_weights, &l->index_weights},
                          {&h.router, &l->router},
                          {&h.shared_gate_up, &l->shared_gate_up},
                          {&h.shared_down, &l->shared_down}}) {
    up.Put(*src, dst);
  }
  up.Put(Vec(h.tid2eid.begin(), h.tid2eid.end()), &l->tid2eid);
  up.Put(h.expert_gate_up, &l->expert_gate_up);
  up.Put(h.expert_down, &l->expert_down);
}

}  // namespace

Result<Buffer> UploadMatrix(backend::Backend& backend, const WeightTypes& types, Mat& host) {
  const backend::DType dtype = host.quantised() ? host.dtype : types.floats;
  SPARK_ASSIGN_OR_RETURN(Buffer b, backend.AllocateMatrix(host.rows, host.cols, dtype));
  if (host.quantised()) {
    backend::Backend::WeightBytes bytes;
    bytes.src = host.packed.data();
    bytes.row_bytes = host.packed.size();
    SPARK_RETURN_IF_ERROR(backend.UploadWeightBytes(bytes, b, 0));
    SPARK_RETURN_IF_ERROR(backend.FinishWeightUploads());
  } else {
    backend.UploadMatrix(host.values, host.cols, b);
    SPARK_RETURN_IF_ERROR(backend.status());
  }
  host = Mat();
  return b;
}

Result<BackendWeights> UploadWeights(Weights host, const core::ModelConfig& c,
                                     backend::Backend& backend) {
  Uploader up(backend, host.types);
  BackendWeights w;
  w.ranges = host.ranges;
  up.Put(host.head, &w.head);
  for (auto [src, dst] : {std::pair{&host.embed, &w.embed},
                          {&host.final_norm, &w.final_norm},
                          {&host.hc_head_fn, &w.hc_head_fn},
                          {&host.hc_head_base, &w.hc_head_base},
                          {&host.hc_head_scale, &w.hc_head_scale}}) {
    up.Put(*src, dst);
  }
  up.Put(Vec(c.head_dim, 1.0f), &w.unit_head_norm);
  const RopeFrequencies main(c.rope_theta, c.dsv4.rope_head_dim);
  const RopeFrequencies compress(c.dsv4.compress_rope_theta, c.dsv4.rope_head_dim,
                                 c.dsv4.compress_yarn);
  up.Put(Vec(main.inv_freq()), &w.main_freq);
  up.Put(Vec(compress.inv_freq()), &w.compress_freq);
  w.main_scale = main.scale();
  w.compress_scale = compress.scale();
  w.rope_dim = c.dsv4.rope_head_dim;
  w.layers.resize(host.layers.size());
  for (size_t i = 0; i < host.layers.size(); ++i) {
    PutLayer(up, host.layers[i], &w.layers[i]);
    host.layers[i] = {};
  }
  SPARK_RETURN_IF_ERROR(up.status());
  return w;
}

}  // namespace spark::engine::model::dsv4
