#include "engine/model/deepseek_v4/tensor_loader.h"

#include <cmath>
#include <cstring>

#include "engine/core/block_quant.h"
#include "engine/core/dtype.h"
#include "engine/model/deepseek_v4/weight_names.h"

namespace spark::engine::model::dsv4 {
namespace {

// Block sizes of FP8 scales seen in released checkpoints (V4: 128, V4.1: 32).
constexpr int64_t kFp8Blocks[] = {128, 32, 64};

std::string Join(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 1; i < names.size(); ++i) s += (i > 1 ? ", " : "") + names[i];
  return s;
}

}  // namespace

TensorNaming V4Naming() { return {CandidateNames, IsIgnoredTensor}; }

const RawTensor* Loader::Lookup(const std::string& canonical) const {
  for (const std::string& name : naming_.candidates(canonical)) {
    if (const RawTensor* t = src_.Find(name)) return t;
  }
  return nullptr;
}

Result<Vec> Loader::Float(const std::string& canonical, const std::vector<int64_t>& shape) {
  const RawTensor* t = Lookup(canonical);
  if (t == nullptr) return Missing(canonical);
  Use(*t);
  return Floats(*t, shape);
}

Result<Mat> Loader::Matrix(const std::string& canonical, const std::vector<int64_t>& shape) {
  const RawTensor* t = Lookup(canonical);
  if (t == nullptr) return Missing(canonical);
  Use(*t);
  if (types_.keep_quantised) {
    SPARK_ASSIGN_OR_RETURN(Mat m, Packed(*t, shape));
    if (!m.empty()) return m;
  }
  SPARK_ASSIGN_OR_RETURN(Vec v, Floats(*t, shape));
  return Mat::Floats(std::move(v), shape[0], shape.size() > 1 ? shape[1] : 1);
}

Result<Vec> Loader::Floats(const RawTensor& t, const std::vector<int64_t>& shape) {
  if (t.dtype == "I8" || t.dtype == "U8") return Fp4(t, shape);
  if (t.shape != shape) return ShapeError(t, shape);
  if (t.dtype == "F8_E4M3") {
    if (const RawTensor* scale = ScaleOf(t)) return Fp8(t, *scale, shape);
  }
  return Convert(t);
}

Result<Mat> Loader::Packed(const RawTensor& t, const std::vector<int64_t>& shape) {
  if (shape.size() != 2) return Mat();
  const int64_t rows = shape[0], cols = shape[1];
  if (t.dtype == "I8" || t.dtype == "U8") {
    if (t.shape != std::vector<int64_t>{rows, cols / 2} || cols % 32 != 0) return Mat();
    const RawTensor* s = ScaleOf(t);
    if (s == nullptr || s->bytes.size() != static_cast<size_t>(rows * (cols / 32)) ||
        (s->dtype != "F8_E8M0" && s->dtype != "U8")) {
      return Mat();  // Floats names what is wrong
    }
    return PackE2M1(t.bytes.data(), rows, cols, s->bytes.data());
  }
  if (t.dtype != "F8_E4M3" || t.shape != shape) return Mat();
  const RawTensor* s = ScaleOf(t);
  if (s == nullptr || s->shape.size() != 2) return Mat();
  for (int64_t b : kFp8Blocks) {
    if (core::ScaleBlocks(rows, b) != s->shape[0] || core::ScaleBlocks(cols, b) != s->shape[1]) {
      continue;
    }
    std::vector<uint8_t> bytes(s->bytes.begin(), s->bytes.end());
    if (s->dtype != "F8_E8M0" && s->dtype != "U8") {
      // fp32 (or bf16) scales are kept only when each is a power of two, as UE8M0 holds them.
      SPARK_ASSIGN_OR_RETURN(Vec values, ScaleValues(*s));
      bytes.resize(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        int exponent = 0;
        const float mantissa = std::frexp(values[i], &exponent);
        if (mantissa != 0.5f || exponent - 1 + 127 < 1 || exponent - 1 + 127 > 254) return Mat();
        bytes[i] = static_cast<uint8_t>(exponent - 1 + 127);
      }
    }
    return PackE4M3(t.bytes.data(), rows, cols, bytes.data(), b);
  }
  return Mat();
}

Result<std::vector<int32_t>> Loader::Ints(const std::string& canonical,
                                          const std::vector<int64_t>& shape) {
  const RawTensor* t = Lookup(canonical);
  if (t == nullptr) return Missing(canonical);
  Use(*t);
  if (t->shape != shape) return ShapeError(*t, shape);
  std::vector<int32_t> out(t->bytes.size() / t->element_size);
  for (size_t i = 0; i < out.size(); ++i) {
    if (t->dtype == "I64") {
      int64_t v;
      std::memcpy(&v, t->bytes.data() + 8 * i, 8);
      out[i] = static_cast<int32_t>(v);
    } else if (t->dtype == "I32") {
      std::memcpy(&out[i], t->bytes.data() + 4 * i, 4);
    } else {
      return InvalidArgumentError(t->file + ": tensor '" + t->name + "': dtype " + t->dtype +
                                  " is not an integer table (expected I64 or I32)");
    }
  }
  return out;
}

void Loader::Use(const RawTensor& t) {
  if (used_.insert(t.name).second && on_read_) on_read_(t.bytes.size());
}

void Loader::Skip(const std::string& prefix) {
  for (const char* w : {"w1", "w2", "w3"}) {
    if (const RawTensor* t = Lookup(prefix + w + ".weight")) {
      used_.insert(t->name);
      ScaleOf(*t);
    }
  }
}

Status Loader::CheckAllUsed() const {
  std::vector<std::string> extra;
  for (const auto& [name, t] : src_.tensors()) {
    if (!used_.count(name) && !naming_.ignored(name)) extra.push_back(name);
  }
  if (extra.empty()) return Status::Ok();
  std::string list;
  for (size_t i = 0; i < extra.size() && i < 8; ++i) list += (i ? ", " : "") + extra[i];
  if (extra.size() > 8) list += ", ... (" + std::to_string(extra.size()) + " in all)";
  return InvalidArgumentError(src_.dir() + ": unexpected tensors that config.json gives no " +
                              "place to: " + list +
                              "; check num_hidden_layers, layer_types and n_routed_experts");
}

Status Loader::Missing(const std::string& canonical) const {
  const std::string others = Join(naming_.candidates(canonical));
  return NotFoundError(src_.dir() + ": tensor '" + canonical + "' is missing" +
                       (others.empty() ? "" : " (also tried " + others + ")"));
}

Status Loader::ShapeError(const RawTensor& t, const std::vector<int64_t>& shape) {
  return InvalidArgumentError(t.file + ": tensor '" + t.name + "' has shape " + ShapeText(t.shape) +
                              ", config.json implies " + ShapeText(shape));
}

const RawTensor* Loader::ScaleOf(const RawTensor& w) {
  const std::string suffix = ".weight";
  if (w.name.size() <= suffix.size() ||
      w.name.compare(w.name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return nullptr;
  }
  const std::string stem = w.name.substr(0, w.name.size() - suffix.size());
  for (const std::string& name : {stem + ".scale", stem + ".weight_scale_inv"}) {
    if (const RawTensor* s = src_.Find(name)) {
      Use(*s);
      return s;
    }
  }
  return nullptr;
}

Result<Vec> Loader::Convert(const RawTensor& t) {
  Result<core::DType> dtype = core::ParseDType(t.dtype);
  if (!dtype.ok()) {
    return InvalidArgumentError(t.file + ": tensor '" + t.name + "': dtype " + t.dtype +
                                " cannot be read as a float tensor");
  }
  Vec out(t.bytes.size() / core::DTypeSize(*dtype));
  core::ConvertToFloat(*dtype, t.bytes.data(), out.size(), out.data());
  return out;
}

Result<Vec> Loader::ScaleValues(const RawTensor& s) {
  if (s.dtype == "F8_E8M0" || s.dtype == "U8") {
    Vec out(s.bytes.size());
    for (size_t i = 0; i < out.size(); ++i) out[i] = core::E8M0ToFloat(s.bytes[i]);
    return out;
  }
  return Convert(s);
}

Result<Vec> Loader::Fp8(const RawTensor& w, const RawTensor& s, const std::vector<int64_t>& shape) {
  if (shape.size() != 2 || s.shape.size() != 2) {
    return InvalidArgumentError(w.file + ": tensor '" + w.name + "': fp8 block scales need a " +
                                "2-d weight and scale, got " + ShapeText(s.shape));
  }
  SPARK_ASSIGN_OR_RETURN(Vec scales, ScaleValues(s));
  for (int64_t b : kFp8Blocks) {
    if (core::ScaleBlocks(shape[0], b) == s.shape[0] &&
        core::ScaleBlocks(shape[1], b) == s.shape[1]) {
      return core::DequantFp8Blocks(w.bytes, shape[0], shape[1], scales, {b, b}, w.name);
    }
  }
  return DataLossError(s.file + ": tensor '" + s.name + "' has shape " + ShapeText(s.shape) +
                       ", which fits no 128x128, 32x32 or 64x64 blocking of " + ShapeText(shape));
}

Result<Vec> Loader::Fp4(const RawTensor& w, const std::vector<int64_t>& shape) {
  if (shape.size() != 2 || w.shape != std::vector<int64_t>{shape[0], shape[1] / 2}) {
    return InvalidArgumentError(w.file + ": tensor '" + w.name + "' (packed fp4) has shape " +
                                ShapeText(w.shape) + ", config.json implies " +
                                ShapeText({shape[0], shape[1] / 2}) + " bytes");
  }
  const RawTensor* s = ScaleOf(w);
  if (s == nullptr) {
    return NotFoundError(w.file + ": packed fp4 tensor '" + w.name + "' has no '.scale' tensor");
  }
  return core::DequantFp4(w.bytes, shape[0], shape[1], s->bytes, w.name);
}

// Rows [r.begin, r.end()) of a row-major [*, cols] matrix.
Vec SliceRows(const Vec& m, int64_t cols, Range r) {
  return Vec(m.begin() + r.begin * cols, m.begin() + r.end() * cols);
}


Status LoadHc(Loader& ld, const std::string& p, const std::string& site, int64_t n, int64_t hidden,
              HyperConnectionWeights* hc) {
  const int64_t mix = (2 + n) * n;
  SPARK_ASSIGN_OR_RETURN(hc->fn, ld.Float(p + "hc_" + site + "_fn", {mix, n * hidden}));
  SPARK_ASSIGN_OR_RETURN(hc->base, ld.Float(p + "hc_" + site + "_base", {mix}));
  SPARK_ASSIGN_OR_RETURN(hc->scale, ld.Float(p + "hc_" + site + "_scale", {3}));
  return Status::Ok();
}

// Channels `ch` of w1 then of w3, as one [2 * ch.size, hidden] matrix; w2's columns `ch`.
Status LoadSwiGlu(Loader& ld, const std::string& p, int64_t inter, int64_t hidden, Range ch,
                  Mat* gate_up, Mat* down) {
  SPARK_ASSIGN_OR_RETURN(Mat gate, ld.Matrix(p + "w1.weight", {inter, hidden}));
  SPARK_ASSIGN_OR_RETURN(Mat up, ld.Matrix(p + "w3.weight", {inter, hidden}));
  *gate_up = StackRows(SliceRows(gate, ch), SliceRows(up, ch));
  SPARK_ASSIGN_OR_RETURN(Mat w2, ld.Matrix(p + "w2.weight", {hidden, inter}));
  *down = SliceCols(w2, ch);
  // A channel slice the scale blocks cannot express leaves w2's columns as floats (a tensor-
  // parallel share of fewer than 32 channels, in small configs only): the expert's two
  // products then take floats together, as an expert's weights share one type.
  if (gate_up->quantised() != down->quantised()) {
    Mat& packed = gate_up->quantised() ? *gate_up : *down;
    packed = Mat::Floats(Decoded(packed), packed.rows, packed.cols);
  }
  return Status::Ok();
}

}  // namespace spark::engine::model::dsv4
