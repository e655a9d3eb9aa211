// Dequantisation of the block-scaled low-precision weights of DeepSeek checkpoints to fp32, and
// quantisation of fp32 weights to the same FP8 format.
//
// FP8: E4M3 weights [rows, cols] with one scale per block of block_rows x block_cols (128 x 128
// for V4), the scale given as fp32 or as UE8M0 (an 8-bit power of two, 2^(e - 127)).
// FP4: routed experts as e2m1 values packed two per byte (low nibble = even column) in
// [rows, cols / 2] bytes, with one E8M0 scale per 1 x 32 block: [rows, cols / 32] bytes.
// value = decoded element x scale of its block. The last block of a dimension may be partial.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"

namespace spark::engine::core {

// 2^(bits - 127); 0xFF (the E8M0 NaN) gives NaN.
float E8M0ToFloat(uint8_t bits);

// One e2m1 nibble (sign bit 3, exponent bits 2..1, mantissa bit 0): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
float E2M1ToFloat(uint8_t nibble);

struct BlockShape {
  int64_t rows = 128;
  int64_t cols = 128;
};

// Number of scale rows/cols a [rows, cols] weight needs: ceil(rows / block.rows) etc.
int64_t ScaleBlocks(int64_t extent, int64_t block);

// Multiplies `values`, the window [values.size() / cols, cols] at (row0, col0) of a
// block-scaled weight, by the scale of each element's block; `scales` is that weight's
// [*, scale_cols] fp32 block grid (the caller checks its shape).
void ApplyBlockScales(std::span<float> values, int64_t cols, int64_t row0, int64_t col0,
                      std::span<const float> scales, int64_t scale_cols, BlockShape block);

// fp8 e4m3 `weight` [rows, cols] times `scales` [ceil(rows/b.rows), ceil(cols/b.cols)] (fp32).
// InvalidArgument naming `name` and both sizes when a span's size disagrees with the shape.
Result<std::vector<float>> DequantFp8Blocks(std::span<const uint8_t> weight, int64_t rows,
                                            int64_t cols, std::span<const float> scales,
                                            BlockShape block, const std::string& name);

// fp32 `values` [rows, cols] as E4M3 with one fp32 scale per block x block: scale = the block's
// largest magnitude / 448 (1 for an all-zero block), value = FloatToF8E4M3(x / scale). An FP8
// checkpoint's weights whose blocks reach +-448 (as quantisers make them) come back with the
// same bytes.
struct Fp8Blocks {
  std::vector<uint8_t> values;  // [rows, cols]
  std::vector<float> scales;    // [ceil(rows / block), ceil(cols / block)]
};
Fp8Blocks QuantizeFp8Blocks(std::span<const float> values, int64_t rows, int64_t cols,
                            int64_t block);

// Packed e2m1 `packed` [rows, cols/2] bytes times E8M0 `scales` [rows, cols/32] bytes.
// InvalidArgument naming `name` when cols is odd or not a multiple of 32, or a size disagrees.
Result<std::vector<float>> DequantFp4(std::span<const uint8_t> packed, int64_t rows, int64_t cols,
                                      std::span<const uint8_t> scales, const std::string& name);

}  // namespace spark::engine::core
