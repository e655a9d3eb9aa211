// Mat: a DeepSeek weight matrix as the loader hands it to the upload — fp32 values, or the
// checkpoint's own FP8 / FP4 codes and UE8M0 scales already in the backend's packed layout
// (backend_types.h: kE4M3B32, kE2M1B32), so that a backend that holds those types gets the
// released bytes and nothing is widened on the way.
//
// WeightTypes says what the backend holds: from ModelOptions::weight_dtype, fp32 widens
// everything to fp32 (the reference numerics), bf16 keeps every matrix in bf16 (FP8 / FP4
// decoded: exact, e4m3 and e2m1 values times a power of two fit bf16), and fp8 keeps FP8 and
// FP4 matrices as released (float matrices in bf16).
//
// The slicing tensor parallelism needs (rows, columns, stacking) keeps the packed form where
// the 32-wide scale blocks allow it and otherwise falls back to fp32 values of the same numbers
// (held in bf16, exact), so every shard loads; `quantised()` tells which one a Mat is.
// Thread-safety: plain values.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.h"
#include "engine/backend/backend.h"
#include "engine/model/tp_shard.h"

namespace spark::engine::model::dsv4 {

using Vec = std::vector<float>;

struct WeightTypes {
  bool keep_quantised = false;                   // FP8 / FP4 matrices as released
  backend::DType floats = backend::DType::kF32;  // what float (and decoded) matrices become
  static WeightTypes For(backend::DType weight_dtype);
};

// InvalidArgument, naming the backend and the --weight-dtype that works, when `backend` does not
// hold the matrices `types` asks for.
Status CheckHeld(const backend::Backend& backend, const WeightTypes& types);

struct Mat {
  int64_t rows = 0, cols = 0;
  backend::DType dtype = backend::DType::kF32;  // kF32: `values`; else `packed`
  Vec values;
  std::vector<uint8_t> packed;

  bool empty() const { return rows == 0 || cols == 0; }
  bool quantised() const { return backend::IsQuantised(dtype); }
  // An fp32 matrix of `values` [rows, cols].
  static Mat Floats(Vec values, int64_t rows, int64_t cols);
};

// The fp32 values of `m` (decoded when packed).
Vec Decoded(const Mat& m);
// Rows [r.begin, r.end()) / columns [r.begin, r.end()) of m.
Mat SliceRows(const Mat& m, Range r);
Mat SliceCols(const Mat& m, Range r);
// [a; b]: b's rows after a's (same column count).
Mat StackRows(const Mat& a, const Mat& b);

// The packed layout of E4M3 codes [rows, cols] with UE8M0 scales per block x block (block 32,
// 64 or 128: larger blocks repeat their scale over their 32 x 32 sub-blocks, exactly).
Mat PackE4M3(const uint8_t* codes, int64_t rows, int64_t cols, const uint8_t* scales,
             int64_t block);
// The packed layout of E2M1 nibbles [rows, cols / 2] with UE8M0 scales [rows, cols / 32].
Mat PackE2M1(const uint8_t* packed, int64_t rows, int64_t cols, const uint8_t* scales);

}  // namespace spark::engine::model::dsv4
