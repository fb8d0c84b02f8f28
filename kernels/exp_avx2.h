#pragma once
// Internal to the kernels' AVX2 files: e^x on 8 lanes, the AVX2 twin of exp_avx512.h. Include
// only from a translation unit whose callers carry an avx2,fma target attribute.
#include <immintrin.h>

namespace slab::kern::detail {

// e^x for x in [-87.3, 88] (above: clamped; below, -inf included: 0, since 2^n is built in the
// exponent field and must stay a normal float). Same reduction and degree-6 Taylor polynomial as
// exp_avx512: relative error below 2e-7.
__attribute__((target("avx2,fma"))) inline __m256 exp_avx2(__m256 x) {
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_min_ps(x, _mm256_set1_ps(88.0f));
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.428606765330187045e-06f), r);
  __m256 p = _mm256_set1_ps(1.0f / 720.0f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
  // n in [-126, 127]: (n + 127) << 23 is the bit pattern of 2^n.
  const __m256i biased = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
  const __m256 two_n = _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23));
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, two_n));
}

}  // namespace slab::kern::detail
