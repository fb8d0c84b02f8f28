#pragma once
// BF16 as raw uint16_t bits (the upper half of an IEEE binary32) and conversions. Activations
// fed to the BF16 linear kernels are BF16 rows produced once per layer by the op before them
// (RMSNorm, SiLU·up, attention output); these helpers do that conversion.
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace slab::kern {

using bf16_t = uint16_t;

// Which implementation a kernel call uses. Chosen once at start-up from cpuid (see
// src/runtime/cpu_features.h: has_avx512_bf16_kernels(), has_avx2_kernels()); a kernel never
// checks by itself. avx2 needs avx2+fma; avx512_bf16 needs avx512f/bw/vl/bf16.
enum class Isa { scalar, avx2, avx512_bf16 };
const char* isa_name(Isa isa);

inline float bf16_to_f32(bf16_t v) {
  const uint32_t bits = uint32_t{v} << 16;
  float f;
  std::memcpy(&f, &bits, sizeof(f));
  return f;
}

// Round to nearest, ties to even; NaN stays a (quiet) NaN.
inline bf16_t f32_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<bf16_t>((bits >> 16) | 0x40u);
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<bf16_t>(bits >> 16);
}

// An IEEE half (FP16 bits) as FP32: exact, subnormals included.
inline float f16_to_f32(uint16_t h) {
  const auto bits_to_f32 = [](uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof(f));
    return f;
  };
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bits_to_f32(sign | 0x7f800000u | (mant << 13));  // inf / nan
  if (exp != 0) return bits_to_f32(sign | ((exp + 112u) << 23) | (mant << 13));
  if (mant == 0) return bits_to_f32(sign);  // +-0
  uint32_t e = 113;                         // a subnormal half is mant · 2^-24: normalise it
  while ((mant & 0x400u) == 0) {
    mant <<= 1;
    --e;
  }
  mant &= 0x3ffu;
  return bits_to_f32(sign | (e << 23) | (mant << 13));
}

// The value f takes after a round trip through BF16.
inline float round_to_bf16(float f) { return bf16_to_f32(f32_to_bf16(f)); }

// dst[i] = bf16(src[i]) for i < n (round to nearest even). The AVX-512 path flushes FP32
// denormals to zero, as vcvtneps2bf16 does.
void convert_f32_to_bf16(bf16_t* dst, const float* src, size_t n, Isa isa);
void convert_bf16_to_f32(float* dst, const bf16_t* src, size_t n);

}  // namespace slab::kern
