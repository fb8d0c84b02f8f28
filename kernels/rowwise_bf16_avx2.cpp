// AVX2 forms of the per-row ops in rowwise_bf16.h (RMSNorm and SiLU·up to BF16), the twins of
// rowwise_bf16_avx512.cpp on 8 lanes: SiLU on exp_avx2 where the portable loop called libm's exp
// per element (275 ms of a 512-token TinyLlama prefill on one Zen 2 core, ~2 %). The FP32 rows go
// through a stack buffer to convert_f32_to_bf16 (AVX2: round to nearest even, the bits of
// f32_to_bf16).
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/exp_avx2.h"
#include "kernels/rowwise_bf16_internal.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

constexpr int kChunk = 256;  // FP32 staging before the BF16 conversion

// silu(g)·u: g / (1 + e^-g) · u; for g < -87.3 e^-g clamps near 1.6e38 and the quotient is ~0.
SLAB_AVX2 inline __m256 silu_mul8(__m256 g, __m256 u) {
  const __m256 denom = _mm256_add_ps(_mm256_set1_ps(1.0f), exp_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g)));
  return _mm256_mul_ps(_mm256_div_ps(g, denom), u);
}

}  // namespace

SLAB_AVX2 void silu_mul_to_bf16_avx2(bf16_t* out, const float* gate, const float* up, int n) {
  alignas(32) float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    int i = 0;
    for (; i + 8 <= len; i += 8) {
      _mm256_store_ps(buf + i, silu_mul8(_mm256_loadu_ps(gate + b + i), _mm256_loadu_ps(up + b + i)));
    }
    if (i < len) {
      alignas(32) float g[8] = {}, u[8] = {}, r[8];
      std::memcpy(g, gate + b + i, static_cast<size_t>(len - i) * sizeof(float));
      std::memcpy(u, up + b + i, static_cast<size_t>(len - i) * sizeof(float));
      _mm256_store_ps(r, silu_mul8(_mm256_load_ps(g), _mm256_load_ps(u)));
      std::memcpy(buf + i, r, static_cast<size_t>(len - i) * sizeof(float));
    }
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), Isa::avx2);
  }
}

SLAB_AVX2 void rmsnorm_to_bf16_avx2(bf16_t* out, const float* x, const float* weight, int n, float eps) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0;
  int i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    s0 = _mm256_fmadd_ps(a, a, s0);
    s1 = _mm256_fmadd_ps(b, b, s1);
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(s0, s1));
  float sum = 0;
  for (float v : lanes) sum += v;
  for (; i < n; ++i) sum += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(sum / static_cast<float>(n) + eps);
  const __m256 scale8 = _mm256_set1_ps(scale);
  alignas(32) float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    int j = 0;
    for (; j + 8 <= len; j += 8) {
      _mm256_store_ps(
          buf + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + b + j), scale8), _mm256_loadu_ps(weight + b + j)));
    }
    for (; j < len; ++j) buf[j] = x[b + j] * scale * weight[b + j];
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), Isa::avx2);
  }
}

}  // namespace slab::kern::detail
