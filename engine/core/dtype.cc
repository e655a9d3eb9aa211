#include "engine/core/dtype.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace spark::engine::core {

std::string_view DTypeName(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return "F32";
    case DType::kBF16:
      return "BF16";
    case DType::kF16:
      return "F16";
    case DType::kF8E4M3:
      return "F8_E4M3";
    case DType::kF8E8M0:
      return "F8_E8M0";
    case DType::kI64:
      return "I64";
    case DType::kI32:
      return "I32";
    case DType::kI8:
      return "I8";
    case DType::kU8:
      return "U8";
  }
  return "?";
}

size_t DTypeSize(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return 4;
    case DType::kBF16:
      return 2;
    case DType::kF16:
      return 2;
    case DType::kI64:
      return 8;
    case DType::kI32:
      return 4;
    case DType::kF8E4M3:
    case DType::kF8E8M0:
    case DType::kI8:
    case DType::kU8:
      return 1;
  }
  return 0;
}

Result<DType> ParseDType(std::string_view name) {
  for (DType d : {DType::kF32, DType::kBF16, DType::kF16, DType::kF8E4M3, DType::kF8E8M0,
                  DType::kI64, DType::kI32, DType::kI8, DType::kU8}) {
    if (name == DTypeName(d)) return d;
  }
  return InvalidArgumentError("unsupported dtype '" + std::string(name) +
                              "' (supported: F32, BF16, F16, F8_E4M3, F8_E8M0, I64, I32, I8, U8)");
}

float Bf16ToFloat(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

float F16ToFloat(uint16_t bits) {
  const uint32_t sign = uint32_t{bits & 0x8000u} << 16;
  const uint32_t exp = (bits >> 10) & 0x1F;
  const uint32_t mant = bits & 0x3FF;
  float magnitude;
  if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal
  } else if (exp == 31) {
    magnitude =
        mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
  } else {
    return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
  }
  return sign ? -magnitude : magnitude;
}

uint16_t FloatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

namespace {

float DecodeF8E4M3(uint8_t bits) {
  const bool negative = bits & 0x80;
  const int exp = (bits >> 3) & 0xF;
  const int mant = bits & 0x7;
  float magnitude;
  if (exp == 0xF && mant == 0x7) {
    magnitude = std::numeric_limits<float>::quiet_NaN();
  } else if (exp == 0) {
    magnitude = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant/8 * 2^-6
  } else {
    magnitude = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
  }
  return negative ? -magnitude : magnitude;
}

}  // namespace

float F8E4M3ToFloat(uint8_t bits) {
  // Decoded once: weights widen through here byte by byte (checkpoint loads, the CPU backend's
  // fp8 Linear).
  static const std::array<float, 256> table = [] {
    std::array<float, 256> t{};
    for (int i = 0; i < 256; ++i) t[i] = DecodeF8E4M3(static_cast<uint8_t>(i));
    return t;
  }();
  return table[bits];
}

uint8_t FloatToF8E4M3(float value) {
  if (std::isnan(value)) return 0x7F;
  const uint8_t sign = std::signbit(value) ? 0x80 : 0x00;
  const float a = std::fabs(value);
  if (a >= kF8E4M3Max) return sign | 0x7E;  // saturate to the largest finite value
  // Quantum of a's binade: 2^(e - 3) for normals (e >= -6), 2^-9 for subnormals.
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the binade is 2^(e - 1)
  const int binade = std::max(e - 1, -6);
  const float quantum = std::ldexp(1.0f, binade - 3);
  const float q = std::nearbyint(a / quantum);  // ties to even under the default rounding mode
  const float rounded = q * quantum;
  if (rounded == 0.0f) return sign;
  // Encode `rounded` (exact in E4M3; rounding up may have moved it to the next binade).
  int re = 0;
  const float m = std::frexp(rounded, &re);  // rounded = m * 2^re
  const int exp = re - 1 + 7;                // biased exponent of 1.f * 2^(re - 1)
  if (exp <= 0) return sign | static_cast<uint8_t>(rounded / std::ldexp(1.0f, -9));
  const int mant = static_cast<int>((m * 2.0f - 1.0f) * 8.0f);
  return sign | static_cast<uint8_t>(exp << 3) | static_cast<uint8_t>(mant);
}

float F8E8M0ToFloat(uint8_t bits) {
  if (bits == 0xFF) return std::numeric_limits<float>::quiet_NaN();
  return std::ldexp(1.0f, static_cast<int>(bits) - 127);
}

void ConvertToFloat(DType dtype, const void* src, size_t count, float* dst) {
  const auto* bytes = static_cast<const uint8_t*>(src);
  switch (dtype) {
    case DType::kF32:
      std::memcpy(dst, src, count * sizeof(float));
      return;
    case DType::kBF16:
    case DType::kF16:
      for (size_t i = 0; i < count; ++i) {
        const uint16_t bits = static_cast<uint16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8));
        dst[i] = dtype == DType::kBF16 ? Bf16ToFloat(bits) : F16ToFloat(bits);
      }
      return;
    case DType::kF8E4M3:
      for (size_t i = 0; i < count; ++i) dst[i] = F8E4M3ToFloat(bytes[i]);
      return;
    case DType::kF8E8M0:
      for (size_t i = 0; i < count; ++i) dst[i] = F8E8M0ToFloat(bytes[i]);
      return;
    case DType::kI64:
      for (size_t i = 0; i < count; ++i) {
        int64_t v;
        std::memcpy(&v, bytes + 8 * i, 8);
        dst[i] = static_cast<float>(v);
      }
      return;
    case DType::kI32:
      for (size_t i = 0; i < count; ++i) {
        int32_t v;
        std::memcpy(&v, bytes + 4 * i, 4);
        dst[i] = static_cast<float>(v);
      }
      return;
    case DType::kI8:
      for (size_t i = 0; i < count; ++i) dst[i] = static_cast<int8_t>(bytes[i]);
      return;
    case DType::kU8:
      for (size_t i = 0; i < count; ++i) dst[i] = bytes[i];
      return;
  }
}

}  // namespace spark::engine::core
