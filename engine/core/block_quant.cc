#include "engine/core/block_quant.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "engine/core/dtype.h"

namespace spark::engine::core {
namespace {

Status SizeError(const std::string& name, const char* what, size_t found, int64_t expected) {
  return InvalidArgumentError(name + ": " + what + " has " + std::to_string(found) +
                              " bytes/values, expected " + std::to_string(expected));
}

}  // namespace

float E8M0ToFloat(uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

float E2M1ToFloat(uint8_t nibble) {
  static constexpr float kMagnitude[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  const float v = kMagnitude[nibble & 0x7];
  return (nibble & 0x8) ? -v : v;
}

int64_t ScaleBlocks(int64_t extent, int64_t block) { return (extent + block - 1) / block; }

void ApplyBlockScales(std::span<float> values, int64_t cols, int64_t row0, int64_t col0,
                      std::span<const float> scales, int64_t scale_cols, BlockShape block) {
  const int64_t rows = cols > 0 ? static_cast<int64_t>(values.size()) / cols : 0;
  for (int64_t r = 0; r < rows; ++r) {
    const float* scale_row = &scales[((row0 + r) / block.rows) * scale_cols];
    for (int64_t c = 0; c < cols; ++c) values[r * cols + c] *= scale_row[(col0 + c) / block.cols];
  }
}

Fp8Blocks QuantizeFp8Blocks(std::span<const float> values, int64_t rows, int64_t cols,
                            int64_t block) {
  const int64_t scale_cols = ScaleBlocks(cols, block);
  Fp8Blocks q;
  q.values.resize(static_cast<size_t>(rows * cols));
  q.scales.assign(static_cast<size_t>(ScaleBlocks(rows, block) * scale_cols), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* s = q.scales.data() + (r / block) * scale_cols;
    for (int64_t c = 0; c < cols; ++c)
      s[c / block] = std::max(s[c / block], std::fabs(values[r * cols + c]));
  }
  for (float& s : q.scales) s = s > 0.0f ? s / kF8E4M3Max : 1.0f;
  for (int64_t r = 0; r < rows; ++r) {
    const float* s = q.scales.data() + (r / block) * scale_cols;
    for (int64_t c = 0; c < cols; ++c) {
      q.values[r * cols + c] = FloatToF8E4M3(values[r * cols + c] / s[c / block]);
    }
  }
  return q;
}

Result<std::vector<float>> DequantFp8Blocks(std::span<const uint8_t> weight, int64_t rows,
                                            int64_t cols, std::span<const float> scales,
                                            BlockShape block, const std::string& name) {
  if (rows <= 0 || cols <= 0 || block.rows <= 0 || block.cols <= 0) {
    return InvalidArgumentError(name + ": non-positive shape or block size");
  }
  const int64_t scale_cols = ScaleBlocks(cols, block.cols);
  const int64_t scale_count = ScaleBlocks(rows, block.rows) * scale_cols;
  if (static_cast<int64_t>(weight.size()) != rows * cols) {
    return SizeError(name, "fp8 weight", weight.size(), rows * cols);
  }
  if (static_cast<int64_t>(scales.size()) != scale_count) {
    return SizeError(name + ".scale", "block scale", scales.size(), scale_count);
  }
  std::vector<float> out(static_cast<size_t>(rows * cols));
  ConvertToFloat(DType::kF8E4M3, weight.data(), out.size(), out.data());
  ApplyBlockScales(out, cols, 0, 0, scales, scale_cols, block);
  return out;
}

Result<std::vector<float>> DequantFp4(std::span<const uint8_t> packed, int64_t rows, int64_t cols,
                                      std::span<const uint8_t> scales, const std::string& name) {
  if (rows <= 0 || cols <= 0 || cols % 32 != 0) {
    return InvalidArgumentError(
        name + ": fp4 weight needs a positive multiple of 32 columns, got " + std::to_string(cols));
  }
  if (static_cast<int64_t>(packed.size()) != rows * cols / 2) {
    return SizeError(name, "packed fp4 weight", packed.size(), rows * cols / 2);
  }
  if (static_cast<int64_t>(scales.size()) != rows * cols / 32) {
    return SizeError(name + ".scale", "e8m0 scale", scales.size(), rows * cols / 32);
  }
  std::vector<float> out(static_cast<size_t>(rows * cols));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; c += 2) {
      const uint8_t byte = packed[(r * cols + c) / 2];
      const float scale = E8M0ToFloat(scales[(r * cols + c) / 32]);
      out[r * cols + c] = E2M1ToFloat(byte & 0x0F) * scale;
      out[r * cols + c + 1] = E2M1ToFloat(byte >> 4) * scale;
    }
  }
  return out;
}

}  // namespace spark::engine::core
