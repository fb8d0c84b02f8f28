// AVX-512 forms of the per-row ops in rowwise_bf16.h (RMSNorm and SiLU·up to BF16) and
// gated_activation.h (GeLU-tanh·up to BF16, soft-capping). tanh(u) = 1 - 2 / (e^(2u) + 1) on
// exp_avx512: saturates to ±1 at both ends (e^(2u) clamps near 1.6e38 or flushes to 0),
// absolute error ~1e-7. Target attributes per function, as in linear_bf16_avx512.cpp: the rest
// of the binary stays baseline.
// At prefill sizes these ops run over every row of the MLP's intermediate (11k values per token
// on TinyLlama), where the scalar loop's libm exp alone cost ~5 % of a 512-token prefill.
#include <immintrin.h>

#include <cstddef>

#include "kernels/exp_avx512.h"
#include "kernels/gated_activation.h"
#include "kernels/rowwise_bf16_internal.h"

// GCC 12's unmasked min/max/roundscale/scalef intrinsics pass _mm512_undefined_ps() as the
// merge source, which -Wmaybe-uninitialized reports once inlined here (a false positive: the
// mask is all ones).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {
namespace {

SLAB_AVX512 inline __mmask16 tail_mask(int valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

SLAB_AVX512 inline void store_bf16(bf16_t* dst, __mmask16 m, __m512 v) {
  _mm256_mask_storeu_epi16(dst, m, (__m256i)_mm512_cvtneps_pbh(v));
}

SLAB_AVX512 inline __m512 tanh16(__m512 u) {
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = exp_avx512(_mm512_add_ps(u, u));
  return _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
}

}  // namespace

SLAB_AVX512 void silu_mul_to_bf16_avx512(bf16_t* out, const float* gate, const float* up, int n) {
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    // silu(g) = g / (1 + e^-g); for g < -88 e^-g saturates near 1.6e38 and the quotient is ~0.
    const __m512 denom = _mm512_add_ps(_mm512_set1_ps(1.0f), exp_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g)));
    store_bf16(out + i, m, _mm512_mul_ps(_mm512_div_ps(g, denom), u));
  }
}

SLAB_AVX512 void rmsnorm_to_bf16_avx512(bf16_t* out, const float* x, const float* weight, int n, float eps) {
  __m512 s0 = _mm512_setzero_ps(), s1 = s0;
  int i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 a = _mm512_loadu_ps(x + i), b = _mm512_loadu_ps(x + i + 16);
    s0 = _mm512_fmadd_ps(a, a, s0);
    s1 = _mm512_fmadd_ps(b, b, s1);
  }
  for (; i < n; i += 16) {
    const __m512 a = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
    s0 = _mm512_fmadd_ps(a, a, s0);
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(s0, s1));
  float sum = 0;
  for (float v : lanes) sum += v;
  const __m512 scale = _mm512_set1_ps(1.0f / __builtin_sqrtf(sum / static_cast<float>(n) + eps));
  for (i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 v =
        _mm512_mul_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, x + i), scale), _mm512_maskz_loadu_ps(m, weight + i));
    store_bf16(out + i, m, v);
  }
}

SLAB_AVX512 void gelu_tanh_mul_to_bf16_avx512(bf16_t* out, const float* gate, const float* up, int n) {
  const __m512 k = _mm512_set1_ps(0.7978845608028654f);  // sqrt(2 / pi)
  const __m512 c = _mm512_set1_ps(0.044715f), half = _mm512_set1_ps(0.5f), one = _mm512_set1_ps(1.0f);
  for (int i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __m512 g = _mm512_maskz_loadu_ps(m, gate + i);
    const __m512 u = _mm512_maskz_loadu_ps(m, up + i);
    const __m512 inner = _mm512_mul_ps(k, _mm512_fmadd_ps(_mm512_mul_ps(c, g), _mm512_mul_ps(g, g), g));
    const __m512 gelu = _mm512_mul_ps(_mm512_mul_ps(half, g), _mm512_add_ps(one, tanh16(inner)));
    store_bf16(out + i, m, _mm512_mul_ps(gelu, u));
  }
}

SLAB_AVX512 void softcap_avx512(float* x, size_t n, float cap) {
  const __m512 c = _mm512_set1_ps(cap), inv = _mm512_set1_ps(1.0f / cap);
  for (size_t i = 0; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i >= 16 ? 16 : static_cast<int>(n - i));
    const __m512 v = _mm512_maskz_loadu_ps(m, x + i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_mul_ps(c, tanh16(_mm512_mul_ps(v, inv))));
  }
}

}  // namespace slab::kern::detail
