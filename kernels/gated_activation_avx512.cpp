// AVX-512 forms of gated_activation.h. tanh(u) = 1 - 2 / (e^(2u) + 1) on exp_avx512: saturates
// to ±1 at both ends (e^(2u) clamps near 1.6e38 or flushes to 0), absolute error ~1e-7.
#include <immintrin.h>

#include "kernels/exp_avx512.h"
#include "kernels/gated_activation.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {
namespace {

SLAB_AVX512 inline __mmask16 tail_mask(size_t valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

SLAB_AVX512 inline __m512 tanh16(__m512 u) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp_avx512(_mm512_add_ps(u, u));
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
}

}  // namespace

SLAB_AVX512 void gelu_tanh_mul_to_bf16_avx512(bf16_t* out, const float* gate, const float* up, int n) {
  const __m512 k = _mm512_set1_ps(0.7978845608028654f);  // sqrt(2 / pi)
  const __m512 c = _mm512_set1_ps(0.044715f), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(static_cast<size_t>(n - i));
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 inner = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(c, g), _mm512_mul_ps(g, g), g));
    const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(half, g), _mm512_add_ps(one, tanh16(inner)));
    _mm256_mask_storeu_epi16(out + i, m, (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(gelu, u)));
  }
}

SLAB_AVX512 void softcap_avx512(float* x, size_t n, float cap) {
  const __m512 c = _mm512_set1_ps(cap), inv = _mm512_set1_ps(1.0f / cap);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, tanh16(_mm512_mul_ps(v, inv))));
  }
}

}  // namespace slab::kern::detail
