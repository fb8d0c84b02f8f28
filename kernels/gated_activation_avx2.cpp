// AVX2 forms of gated_activation.h, the twins of gated_activation_avx512.cpp on 8 lanes; the
// tail goes through a stack buffer.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/exp_avx2.h"
#include "kernels/gated_activation.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

SLAB_AVX2 inline __m256 tanh8(__m256 u) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_avx2(_mm256_add_ps(u, u));
  return _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
}

SLAB_AVX2 inline __m256 gelu_mul8(__m256 g, __m256 u) {
  const __m256 k = _mm256_set1_ps(0.7978845608028654f);  // sqrt(2 / pi)
  const __m256 inner =
      _mm256_mul_ps(k, _mm256_fmadd_ps(_mm256_mul_ps(_mm256_set1_ps(0.044715f), g), _mm256_mul_ps(g, g), g));
  const __m256 gelu =
      _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), g), _mm256_add_ps(_mm256_set1_ps(1.0f), tanh8(inner)));
  return _mm256_mul_ps(gelu, u);
}

}  // namespace

SLAB_AVX2 void gelu_tanh_mul_to_bf16_avx2(bf16_t* out, const float* gate, const float* up, int n) {
  constexpr int kChunk = 256;
  alignas(32) float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    int i = 0;
    for (; i + 8 <= len; i += 8) {
      _mm256_store_ps(buf + i, gelu_mul8(_mm256_loadu_ps(gate + b + i), _mm256_loadu_ps(up + b + i)));
    }
    if (i < len) {
      alignas(32) float g[8] = {}, u[8] = {};
      std::memcpy(g, gate + b + i, static_cast<size_t>(len - i) * sizeof(float));
      std::memcpy(u, up + b + i, static_cast<size_t>(len - i) * sizeof(float));
      alignas(32) float r[8];
      _mm256_store_ps(r, gelu_mul8(_mm256_load_ps(g), _mm256_load_ps(u)));
      std::memcpy(buf + i, r, static_cast<size_t>(len - i) * sizeof(float));
    }
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), Isa::avx2);
  }
}

SLAB_AVX2 void softcap_avx2(float* x, size_t n, float cap) {
  const __m256 c = _mm256_set1_ps(cap), inv = _mm256_set1_ps(1.0f / cap);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_mul_ps(c, tanh8(_mm256_mul_ps(_mm256_loadu_ps(x + i), inv))));
  }
  if (i < n) {
    alignas(32) float t[8] = {};
    std::memcpy(t, x + i, (n - i) * sizeof(float));
    _mm256_store_ps(t, _mm256_mul_ps(c, tanh8(_mm256_mul_ps(_mm256_load_ps(t), inv))));
    std::memcpy(x + i, t, (n - i) * sizeof(float));
  }
}

}  // namespace slab::kern::detail
