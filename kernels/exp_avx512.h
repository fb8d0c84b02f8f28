#pragma once
// Internal to the kernels' AVX-512 files: e^x on 16 lanes. Include only from a translation unit
// whose callers carry an AVX-512 target attribute (the function carries its own).
#include <immintrin.h>

namespace slab::kern::detail {

// e^x for x in [-104, 88] (inputs outside are clamped; -inf gives 0): x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two for an exact n ln2), the degree-6 Taylor polynomial of e^r
// (truncation < 1.2e-7 relative), then vscalefps by 2^n, which flushes to 0 below 2^-149 with
// no exponent-field arithmetic. Relative error below 2.5e-7 over [-87, 88] (2.3e-7 the largest
// found, tests/unit/test_exp_kernels.cpp).
__attribute__((target("avx512f"))) inline __m512 exp_avx512(__m512 x) {
  x = _mm512_min_ps(x, _mm512_set1_ps(88.0f));
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.428606765330187045e-06f), r);
  __m512 p = _mm512_set1_ps(1.0f / 720.0f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

// e^x for x <= 0, for the attention softmax's s - max and its rescale factors (inputs below -104
// are clamped; -inf gives 0): 2^(x log2 e) = 2^n 2^f with n = round(x log2 e) and f = x log2 e - n
// from one fused multiply-subtract, 2^f on [-1/2, 1/2] by a degree-5 polynomial (fitted for
// relative error: 1.7e-7 evaluated in FP32), then vscalefps. 10 operations against exp_avx512's
// 13: 5.1 cycles per 16 values against 6.6 on Zen 5, most of a softmax's time. The product x log2 e
// carries |x| · 2^-24 absolute error, so the relative error grows to ~1e-6 at x = -16, where
// e^x < 1.2e-7 no longer counts beside the block's maximum's weight of 1.
__attribute__((target("avx512f"))) inline __m512 exp_nonpositive_avx512(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-104.0f));
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512 f = _mm512_fmsub_ps(x, log2e, n);
  __m512 p = _mm512_set1_ps(1.326469355e-3f);
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(9.671514854e-3f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(5.550733954e-2f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(2.402224243e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(6.931470037e-1f));
  p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
  return _mm512_scalef_ps(p, n);
}

}  // namespace slab::kern::detail
