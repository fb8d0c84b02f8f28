#pragma once
// Internal to the kernels' AVX-512 files: e^x on 16 lanes. Include only from a translation unit
// whose callers carry an AVX-512 target attribute (the function carries its own).
#include <immintrin.h>

namespace slab::kern::detail {

// e^x for x in [-104, 88] (inputs outside are clamped; -inf gives 0): x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two for an exact n ln2), the degree-6 Taylor polynomial of e^r
// (truncation < 1.2e-7 relative), then vscalefps by 2^n, which flushes to 0 below 2^-149 with
// no exponent-field arithmetic. Relative error below 2e-7 over [-87, 88].
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

}  // namespace slab::kern::detail
