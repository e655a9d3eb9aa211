// Element types of checkpoint tensors and their conversion to fp32 (the CPU backend's only type).
//
// Names follow the safetensors header ("F32", "BF16", "F16", "F8_E4M3", "F8_E8M0", "I64", "I32",
// "I8", "U8"). Float conversions are exact (every value of these types is representable in fp32);
// integers convert exactly up to 2^24 in magnitude. The integer and E8M0 types appear in
// DeepSeek checkpoints: E8M0 block scales, packed FP4 experts stored as I8, I64/I32 hash-routing
// tables; their loaders read the raw bytes (SafetensorsFile::RawBytes, block_quant.h).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::engine::core {

enum class DType { kF32, kBF16, kF16, kF8E4M3, kF8E8M0, kI64, kI32, kI8, kU8 };

// "F32", "BF16", "F16", "F8_E4M3", "F8_E8M0", "I64", "I32", "I8", "U8".
std::string_view DTypeName(DType dtype);

// Bytes per element.
size_t DTypeSize(DType dtype);

// Parses a safetensors dtype name. InvalidArgument names the accepted types.
Result<DType> ParseDType(std::string_view name);

float Bf16ToFloat(uint16_t bits);
// Rounds to the nearest bf16, ties to even (NaN stays NaN).
uint16_t FloatToBf16(float value);
float F16ToFloat(uint16_t bits);
// OCP FP8 E4M3 ("fn": no infinities, 0x7F/0xFF are NaN, bias 7).
float F8E4M3ToFloat(uint8_t bits);
// The largest finite E4M3 magnitude.
constexpr float kF8E4M3Max = 448.0f;
// The nearest E4M3 value (ties to even), saturating at +-kF8E4M3Max; NaN gives 0x7F.
uint8_t FloatToF8E4M3(float value);
// OCP E8M0 scale: 2^(bits - 127); 0xFF is NaN.
float F8E8M0ToFloat(uint8_t bits);

// Converts `count` elements of `dtype` at `src` (little-endian, any alignment) to fp32 at `dst`.
void ConvertToFloat(DType dtype, const void* src, size_t count, float* dst);

}  // namespace spark::engine::core
