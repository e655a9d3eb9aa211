// Element types of checkpoint tensors and their conversion to fp32 (the CPU backend's only type).
//
// Names follow the safetensors header ("F32", "BF16", "F16", "F8_E4M3"). Conversions are exact
// (every value of these types is representable in fp32).
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"

namespace spark::engine::core {

enum class DType { kF32, kBF16, kF16, kF8E4M3 };

// "F32", "BF16", "F16", "F8_E4M3".
std::string_view DTypeName(DType dtype);

// Bytes per element.
size_t DTypeSize(DType dtype);

// Parses a safetensors dtype name. InvalidArgument names the accepted types.
Result<DType> ParseDType(std::string_view name);

float Bf16ToFloat(uint16_t bits);
float F16ToFloat(uint16_t bits);
// OCP FP8 E4M3 ("fn": no infinities, 0x7F/0xFF are NaN, bias 7).
float F8E4M3ToFloat(uint8_t bits);

// Converts `count` elements of `dtype` at `src` (little-endian, any alignment) to fp32 at `dst`.
void ConvertToFloat(DType dtype, const void* src, size_t count, float* dst);

}  // namespace spark::engine::core
