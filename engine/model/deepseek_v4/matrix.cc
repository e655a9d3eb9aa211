#include "engine/model/deepseek_v4/matrix.h"

#include <cstring>

#include "engine/core/block_quant.h"
#include "engine/core/dtype.h"

namespace spark::engine::model::dsv4 {
namespace {

using backend::DType;
using backend::kQuantBlock;

int64_t Blocks(int64_t extent) { return (extent + kQuantBlock - 1) / kQuantBlock; }

// An empty packed matrix of `dtype` [rows, cols] (codes and scales zero).
Mat Packed(DType dtype, int64_t rows, int64_t cols) {
  Mat m;
  m.rows = rows;
  m.cols = cols;
  m.dtype = dtype;
  m.packed.assign(backend::MatrixBytes(rows, cols, dtype), 0);
  return m;
}

uint8_t* Codes(Mat& m) { return m.packed.data(); }
const uint8_t* Codes(const Mat& m) { return m.packed.data(); }
uint8_t* Scales(Mat& m) {
  return m.packed.data() + backend::QuantScaleOffset(m.dtype, m.rows, m.cols);
}
const uint8_t* Scales(const Mat& m) {
  return m.packed.data() + backend::QuantScaleOffset(m.dtype, m.rows, m.cols);
}
// Scale rows: per 32 rows for E4M3, per row for E2M1.
int64_t ScaleRows(const Mat& m) {
  return m.dtype == DType::kE2M1B32 ? m.rows : Blocks(m.rows);
}
int64_t RowsPerScale(const Mat& m) { return m.dtype == DType::kE2M1B32 ? 1 : kQuantBlock; }

// The fp32 fallback of a packed matrix whose slice the blocks cannot express.
Mat AsFloats(const Mat& m) { return Mat::Floats(Decoded(m), m.rows, m.cols); }

Vec SliceRowValues(const Vec& v, int64_t cols, Range r) {
  return Vec(v.begin() + r.begin * cols, v.begin() + r.end() * cols);
}

Vec SliceColValues(const Vec& v, int64_t rows, int64_t cols, Range r) {
  Vec out;
  out.reserve(rows * r.size);
  for (int64_t i = 0; i < rows; ++i) {
    out.insert(out.end(), v.begin() + i * cols + r.begin, v.begin() + i * cols + r.end());
  }
  return out;
}

}  // namespace

WeightTypes WeightTypes::For(DType weight_dtype) {
  switch (weight_dtype) {
    case DType::kBF16:
      return {false, DType::kBF16};
    case DType::kFP8:
      return {true, DType::kBF16};
    default:
      return {false, DType::kF32};
  }
}

Status CheckHeld(const backend::Backend& backend, const WeightTypes& types) {
  const bool ok = backend.HoldsWeights(types.floats) &&
                  (!types.keep_quantised || (backend.HoldsWeights(DType::kE4M3B32) &&
                                             backend.HoldsWeights(DType::kE2M1B32)));
  if (ok) return Status::Ok();
  return InvalidArgumentError(
      "the " + backend.name() + " backend does not hold DeepSeek weights as " +
      (types.keep_quantised ? std::string("released (FP8 / FP4)")
                            : std::string(backend::DTypeName(types.floats))) +
      "; use --weight-dtype fp32 there");
}

Mat Mat::Floats(Vec values, int64_t rows, int64_t cols) {
  Mat m;
  m.rows = rows;
  m.cols = cols;
  m.values = std::move(values);
  return m;
}

Vec Decoded(const Mat& m) {
  if (!m.quantised()) return m.values;
  Vec out(static_cast<size_t>(m.rows * m.cols));
  const int64_t kb = Blocks(m.cols), per = RowsPerScale(m);
  const uint8_t* codes = Codes(m);
  const uint8_t* scales = Scales(m);
  for (int64_t r = 0; r < m.rows; ++r) {
    for (int64_t c = 0; c < m.cols; ++c) {
      const float s = core::E8M0ToFloat(scales[(r / per) * kb + c / kQuantBlock]);
      const int64_t i = r * m.cols + c;
      const float v = m.dtype == DType::kE4M3B32
                          ? core::F8E4M3ToFloat(codes[i])
                          : core::E2M1ToFloat((codes[i / 2] >> (4 * (i % 2))) & 0xF);
      out[i] = v * s;
    }
  }
  return out;
}

Mat SliceRows(const Mat& m, Range r) {
  if (!m.quantised()) return Mat::Floats(SliceRowValues(m.values, m.cols, r), r.size, m.cols);
  if (r.begin % RowsPerScale(m) != 0) return SliceRows(AsFloats(m), r);
  Mat out = Packed(m.dtype, r.size, m.cols);
  const size_t row_bytes = backend::QuantCodeBytes(m.dtype, 1, m.cols);
  std::memcpy(Codes(out), Codes(m) + r.begin * row_bytes, r.size * row_bytes);
  const int64_t first = r.begin / RowsPerScale(m), kb = Blocks(m.cols);
  std::memcpy(Scales(out), Scales(m) + first * kb, ScaleRows(out) * kb);
  return out;
}

Mat SliceCols(const Mat& m, Range r) {
  if (!m.quantised()) {
    return Mat::Floats(SliceColValues(m.values, m.rows, m.cols, r), m.rows, r.size);
  }
  const int64_t half = m.dtype == DType::kE2M1B32 ? 2 : 1;  // values per byte
  // Packed slices start on a scale block and hold whole blocks (a partial block only where the
  // matrix itself ends): the products that read them take k in whole blocks.
  const bool whole_blocks = r.size % kQuantBlock == 0 || r.end() == m.cols;
  if (r.begin % kQuantBlock != 0 || !whole_blocks || r.size % half != 0) {
    return SliceCols(AsFloats(m), r);
  }
  Mat out = Packed(m.dtype, m.rows, r.size);
  for (int64_t i = 0; i < m.rows; ++i) {
    std::memcpy(Codes(out) + i * r.size / half, Codes(m) + (i * m.cols + r.begin) / half,
                r.size / half);
  }
  const int64_t kb = Blocks(m.cols), out_kb = Blocks(r.size), first = r.begin / kQuantBlock;
  for (int64_t i = 0; i < ScaleRows(m); ++i) {
    std::memcpy(Scales(out) + i * out_kb, Scales(m) + i * kb + first, out_kb);
  }
  return out;
}

Mat StackRows(const Mat& a, const Mat& b) {
  if (a.empty()) return b;
  const bool same = a.dtype == b.dtype && a.cols == b.cols;
  if (!a.quantised() && same) {
    Vec v = a.values;
    v.insert(v.end(), b.values.begin(), b.values.end());
    return Mat::Floats(std::move(v), a.rows + b.rows, a.cols);
  }
  if (!same || (a.quantised() && a.rows % RowsPerScale(a) != 0)) {
    return StackRows(a.quantised() ? AsFloats(a) : a, b.quantised() ? AsFloats(b) : b);
  }
  Mat out = Packed(a.dtype, a.rows + b.rows, a.cols);
  const size_t a_codes = backend::QuantCodeBytes(a.dtype, a.rows, a.cols);
  std::memcpy(Codes(out), Codes(a), a_codes);
  std::memcpy(Codes(out) + a_codes, Codes(b), backend::QuantCodeBytes(b.dtype, b.rows, b.cols));
  const int64_t kb = Blocks(a.cols);
  std::memcpy(Scales(out), Scales(a), ScaleRows(a) * kb);
  std::memcpy(Scales(out) + ScaleRows(a) * kb, Scales(b), ScaleRows(b) * kb);
  return out;
}

Mat PackE4M3(const uint8_t* codes, int64_t rows, int64_t cols, const uint8_t* scales,
             int64_t block) {
  Mat m = Packed(DType::kE4M3B32, rows, cols);
  std::memcpy(Codes(m), codes, static_cast<size_t>(rows * cols));
  const int64_t kb = Blocks(cols), src_kb = (cols + block - 1) / block;
  for (int64_t R = 0; R < Blocks(rows); ++R) {
    for (int64_t C = 0; C < kb; ++C) {
      Scales(m)[R * kb + C] = scales[(R * kQuantBlock / block) * src_kb + C * kQuantBlock / block];
    }
  }
  return m;
}

Mat PackE2M1(const uint8_t* packed, int64_t rows, int64_t cols, const uint8_t* scales) {
  Mat m = Packed(DType::kE2M1B32, rows, cols);
  std::memcpy(Codes(m), packed, static_cast<size_t>(rows * cols / 2));
  std::memcpy(Scales(m), scales, static_cast<size_t>(rows * Blocks(cols)));
  return m;
}

}  // namespace spark::engine::model::dsv4
