#include "engine/backend/backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>

#include "engine/core/block_quant.h"

namespace spark::engine::backend {

size_t DTypeBytes(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return 2;
    case DType::kFP8:
    case DType::kE4M3B32:
    case DType::kE2M1B32:
      return 1;
    case DType::kF32:
      break;
  }
  return 4;
}

const char* DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kFP8:
      return "fp8";
    case DType::kE4M3B32:
      return "fp8_e4m3_b32";
    case DType::kE2M1B32:
      return "fp4_e2m1_b32";
    case DType::kF32:
      break;
  }
  return "fp32";
}

Result<DType> ParseDType(const std::string& text) {
  if (text == "fp32" || text == "f32" || text == "float32") return DType::kF32;
  if (text == "bf16" || text == "bfloat16") return DType::kBF16;
  if (text == "fp8" || text == "fp8_e4m3") return DType::kFP8;
  return InvalidArgumentError("unknown weight type '" + text + "' (choose fp32, bf16 or fp8)");
}

DType KvDTypeFor(DType weights) { return weights == DType::kFP8 ? DType::kBF16 : weights; }

Status Backend::DownloadLater(const float* src, size_t count) {
  if (downloaded_later_.size() >= kMaxDownloadsLater) {
    return FailedPreconditionError(name() + " backend: " + std::to_string(kMaxDownloadsLater) +
                                   " downloads queued already (take one first)");
  }
  std::vector<float> host(count);
  Download(src, host);
  SPARK_RETURN_IF_ERROR(status());
  downloaded_later_.push_back(std::move(host));
  return Status::Ok();
}

Status Backend::TakeDownload(std::span<float> host) {
  if (downloaded_later_.empty()) {
    return FailedPreconditionError(name() + " backend: no download queued to take");
  }
  if (host.size() != downloaded_later_.front().size()) {
    return InvalidArgumentError(name() + " backend: the queued download holds " +
                                std::to_string(downloaded_later_.front().size()) + " floats, not " +
                                std::to_string(host.size()));
  }
  std::copy(downloaded_later_.front().begin(), downloaded_later_.front().end(), host.begin());
  downloaded_later_.pop_front();
  return Status::Ok();
}

void Backend::EmbeddingOfArgMax(const float* table, int64_t row_begin, int64_t rows, int hidden,
                                const float* pairs, int parts, int64_t tokens, float* out) {
  std::vector<float> host(static_cast<size_t>(parts) * tokens * 2);
  Download(pairs, host);
  Result<std::vector<int32_t>> ids = MergeArgMax(host, parts, tokens);
  Embedding(table, row_begin, rows, hidden,
            ids.ok() ? *ids : std::vector<int32_t>(static_cast<size_t>(tokens), 0), out);
}

Result<Buffer> Backend::AllocateWeights(size_t count, DType dtype) {
  if (dtype != DType::kF32) {
    return InvalidArgumentError(name() + " backend keeps no " + DTypeName(dtype) +
                                (dtype == DType::kFP8 ? " buffers other than Linear matrices"
                                                      : " weights; use --weight-dtype fp32"));
  }
  return Allocate(count);
}

void Backend::UploadWeights(std::span<const float> host, Buffer& dst) { Upload(host, dst.data()); }

namespace {
// Floats that hold an fp8 matrix of `values` elements and its scales.
size_t Fp8Floats(int64_t rows, int64_t cols) {
  const size_t values = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  return (Fp8ScaleOffset(values) + sizeof(float) * Fp8ScaleCount(rows, cols)) / sizeof(float);
}
}  // namespace

size_t MatrixBytes(int64_t rows, int64_t cols, DType dtype) {
  if (dtype == DType::kFP8) return Fp8Floats(rows, cols) * sizeof(float);
  if (IsQuantised(dtype)) {
    return QuantScaleOffset(dtype, rows, cols) + QuantScaleBytes(dtype, rows, cols);
  }
  return static_cast<size_t>(rows) * static_cast<size_t>(cols) * DTypeBytes(dtype);
}

Result<Buffer> Backend::AllocateMatrix(int64_t rows, int64_t cols, DType dtype) {
  if (IsQuantised(dtype)) {
    if (!HoldsWeights(dtype)) {
      return InvalidArgumentError(name() + " backend keeps no " + DTypeName(dtype) + " matrices");
    }
    return AllocateWeights(MatrixBytes(rows, cols, dtype), dtype);
  }
  const size_t count = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  if (dtype != DType::kFP8) return AllocateWeights(count, dtype);
  SPARK_ASSIGN_OR_RETURN(Buffer b, Allocate(Fp8Floats(rows, cols)));
  void* p = b.data();
  return Buffer(p, count, DType::kFP8, [held = std::make_shared<Buffer>(std::move(b))](float*) {});
}

void Backend::UploadMatrix(std::span<const float> host, int64_t cols, Buffer& dst) {
  if (dst.dtype() != DType::kFP8) return UploadWeights(host, dst);
  const int64_t rows = cols > 0 ? static_cast<int64_t>(host.size()) / cols : 0;
  const core::Fp8Blocks q = core::QuantizeFp8Blocks(host, rows, cols, kFp8Block);
  UploadFp8Matrix(q.values, q.scales, dst);
}

Status CheckWeightBytesFit(const Backend::WeightBytes& src, const Buffer& dst, size_t offset) {
  const size_t capacity = dst.size() * DTypeBytes(dst.dtype());
  if (src.widen_bf16 && dst.dtype() != DType::kF32) {
    return InvalidArgumentError(std::string("bf16 weight bytes widen into fp32 buffers, not ") +
                                DTypeName(dst.dtype()));
  }
  if (dst.dtype() == DType::kFP8 || offset > capacity || src.dst_size() > capacity - offset) {
    return InvalidArgumentError("weight bytes [" + std::to_string(offset) + ", +" +
                                std::to_string(src.dst_size()) + ") do not fit a " +
                                DTypeName(dst.dtype()) + " buffer of " +
                                std::to_string(capacity) + " bytes");
  }
  if (src.rows > 1 && src.src_stride < src.row_bytes) {
    return InvalidArgumentError("weight rows of " + std::to_string(src.row_bytes) +
                                " bytes overlap at a stride of " + std::to_string(src.src_stride));
  }
  return Status::Ok();
}

Status Backend::UploadWeightBytes(const WeightBytes& src, Buffer& dst, size_t dst_offset) {
  (void)src, (void)dst, (void)dst_offset;
  return UnimplementedError(name() + " backend takes no raw weight bytes");
}

void Backend::UploadFp8Matrix(std::span<const uint8_t> values, std::span<const float> scales,
                              Buffer& dst) {
  // One host image of the buffer (values, padding, scales), uploaded as floats.
  std::vector<float> image((Fp8ScaleOffset(values.size()) + scales.size_bytes()) / sizeof(float));
  std::memcpy(image.data(), values.data(), values.size());
  std::memcpy(reinterpret_cast<char*>(image.data()) + Fp8ScaleOffset(values.size()), scales.data(),
              scales.size_bytes());
  Upload(image, dst.data());
}

void Backend::LinearMany(Input x, int64_t rows, int in_features, std::span<const LinearOut> outs) {
  for (const LinearOut& o : outs) Linear(x, rows, in_features, o.w, o.out_features, o.out);
}

void Backend::LinearSiluMul(Input x, int64_t rows, int in_features, WeightRef w, int inter,
                            float* gate_up, Output act) {
  Linear(x, rows, in_features, w, 2 * inter, gate_up);
  SiluMul(gate_up, rows, inter, act);
}

void Backend::QkNormRopeWriteKv(const QkvToCache& a, std::span<const int32_t> positions,
                                std::span<const int64_t> slots) {
  if (a.qkv != nullptr) {
    const ColumnSlice parts[] = {{a.q, a.heads * a.head_dim},
                                 {a.k, a.kv_heads * a.head_dim},
                                 {a.v, a.kv_heads * a.head_dim}};
    SplitColumns(a.qkv, static_cast<int64_t>(positions.size()), parts);
  }
  HeadNormRope(a.q, positions, a.heads, a.head_dim, a.q_norm, a.eps, a.theta);
  HeadNormRope(a.k, positions, a.kv_heads, a.head_dim, a.k_norm, a.eps, a.theta);
  WriteKv(a.k, a.v, slots, a.kv_heads * a.head_dim, a.cache);
}

void Backend::AddRmsNorm(float* h, const float* delta, const float* weight, int64_t rows, int dim,
                         float eps, Output out) {
  Add(h, delta, static_cast<size_t>(rows) * dim);
  RmsNorm(h, weight, rows, dim, eps, out);
}

void Backend::LinearAdd(Input x, int64_t rows, int in_features, WeightRef w, int out_features,
                        float* scratch, float* h) {
  Linear(x, rows, in_features, w, out_features, scratch);
  Add(h, scratch, static_cast<size_t>(rows) * out_features);
}

void Backend::LinearAddRmsNorm(Input x, int64_t rows, int in_features, WeightRef w,
                               int out_features, float* scratch, float* h, const float* norm,
                               float eps, Output out) {
  Linear(x, rows, in_features, w, out_features, scratch);
  AddRmsNorm(h, scratch, norm, rows, out_features, eps, out);
}

Status Backend::AllReduceAddRmsNorm(comm::Communicator* comm, float* h, float* delta,
                                    const float* weight, int64_t rows, int dim, float eps,
                                    Output out) {
  if (comm != nullptr && comm->world_size() > 1) {
    SPARK_RETURN_IF_ERROR(comm->AllReduceSum(delta, static_cast<size_t>(rows) * dim));
  }
  AddRmsNorm(h, delta, weight, rows, dim, eps, out);
  return Status::Ok();
}

void Backend::HeadNormRope(float* x, std::span<const int32_t> positions, int heads, int head_dim,
                           const float* weight, float eps, double theta) {
  RmsNorm(x, weight, static_cast<int64_t>(positions.size()) * heads, head_dim, eps, x);
  Rope(x, positions, heads, head_dim, theta);
}

void ArgMaxRows(const float* x, int64_t rows, int cols, int64_t index_offset, float* out) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x + r * cols;
    int best = 0;
    bool nan = false;
    for (int c = 0; c < cols; ++c) {
      nan = nan || std::isnan(xr[c]);
      if (xr[c] > xr[best]) best = c;
    }
    out[2 * r] = cols == 0 ? -std::numeric_limits<float>::infinity()
                 : nan     ? std::numeric_limits<float>::quiet_NaN()
                           : xr[best];
    out[2 * r + 1] = static_cast<float>(index_offset + best);
  }
}

Result<std::vector<int32_t>> MergeArgMax(std::span<const float> pairs, int parts, int64_t rows) {
  std::vector<int32_t> ids(rows, 0);
  for (int64_t r = 0; r < rows; ++r) {
    float best = 0.0f, best_id = 0.0f;
    for (int p = 0; p < parts; ++p) {
      const float value = pairs[(p * rows + r) * 2], id = pairs[(p * rows + r) * 2 + 1];
      if (std::isnan(value) || value == std::numeric_limits<float>::infinity()) {
        return InternalError("logits row " + std::to_string(r) +
                             " holds NaN or +inf (the forward pass broke)");
      }
      if (p == 0 || value > best || (value == best && id < best_id)) {
        best = value;
        best_id = id;
      }
    }
    ids[r] = static_cast<int32_t>(best_id);
  }
  return ids;
}

Buffer Buffer::View(size_t offset, size_t count) const {
  return Buffer(reinterpret_cast<char*>(data_) + offset * DTypeBytes(dtype_), count, dtype_,
                [](float*) {});
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    Reset();
    data_ = other.data_;
    size_ = other.size_;
    dtype_ = other.dtype_;
    release_ = std::move(other.release_);
    other.data_ = nullptr;
    other.size_ = 0;
    other.dtype_ = DType::kF32;
    other.release_ = nullptr;
  }
  return *this;
}

void Buffer::Reset() {
  if (data_ != nullptr && release_) release_(data_);
  data_ = nullptr;
  size_ = 0;
}

}  // namespace spark::engine::backend
