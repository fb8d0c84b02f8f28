// AVX-512 block of SLAB attention: scores (FP32 FMA over head_dim, 16 tokens reduced into one
// zmm at a time), masked online softmax with a vectorised exp, and P·V. Every function carries
// the target attribute (see linear_bf16_avx512.cpp); only called after cpuid said avx512_bf16.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_block.h"

// GCC 12 reports the _mm512_undefined_ps() pass-through operand inside the unpack and shuffle
// intrinsics as "may be used uninitialized" once they are inlined here: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#define SLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {
namespace {

// exp(x) for x <= 0 (scores minus their running max). Range reduction x = n ln2 + r with
// |r| <= ln2/2 (ln2 split in two for an exact n ln2), degree-6 Taylor polynomial of e^r
// (truncation < 1.2e-7 relative), then scalef by 2^n, which flushes to 0 below 2^-149. Relative
// error below 2e-7 over [-87, 0]; inputs below -103 (and -inf) give 0 up to 2^-149.
SLAB_AVX512 inline __m512 exp_neg(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-103.0f));
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

// Lane j of the result = horizontal sum of a[j].
SLAB_AVX512 inline __m512 reduce16(const __m512* a) {
  __m512 b[8];
  for (int i = 0; i < 8; ++i) {
    b[i] = _mm512_add_ps(_mm512_unpacklo_ps(a[2 * i], a[2 * i + 1]),
                         _mm512_unpackhi_ps(a[2 * i], a[2 * i + 1]));
  }
  __m512 c[4];
  for (int i = 0; i < 4; ++i) {
    const __m512d x = _mm512_castps_pd(b[2 * i]), y = _mm512_castps_pd(b[2 * i + 1]);
    c[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(x, y)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(x, y)));
  }
  const __m512 d0 = _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 d1 = _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(2, 0, 2, 0)),
                                  _mm512_shuffle_f32x4(c[2], c[3], _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(d0, d1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// Lanes j of a 16-token group starting at g that fall in [lo, hi).
SLAB_AVX512 inline __mmask16 range_mask(int g, int lo, int hi) {
  const int a = std::max(0, lo - g), e = std::min(16, hi - g);
  if (e <= a) return 0;
  const uint32_t upto = e >= 16 ? 0xffffu : ((1u << e) - 1u);
  return static_cast<__mmask16>(upto & ~((1u << a) - 1u));
}

// o[i + j] = alpha[i + j] o[i + j] + sum_{t in [lo, hi)} s[i + j][t] v[t] for j < VB.
template <int NC, int VB>
SLAB_AVX512 inline void pv(const AttnBlock& b, int i, int lo, int hi, const float* alphas) {
  constexpr int hd = 16 * NC;
  __m512 o[VB][NC];
  const float* s[VB];
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    const __m512 va = _mm512_set1_ps(alphas[i + j]);
    const float* op = b.o + static_cast<size_t>(i + j) * hd;
    s[j] = b.s + static_cast<size_t>(i + j) * static_cast<size_t>(b.lds);
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) o[j][c] = _mm512_mul_ps(va, _mm512_loadu_ps(op + 16 * c));
  }
  for (int t = lo; t < hi; ++t) {
    const float* vr = b.v + static_cast<size_t>(t) * hd;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      const __m512 v = _mm512_loadu_ps(vr + 16 * c);
#pragma GCC unroll 4
      for (int j = 0; j < VB; ++j) o[j][c] = _mm512_fmadd_ps(_mm512_set1_ps(s[j][t]), v, o[j][c]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    float* op = b.o + static_cast<size_t>(i + j) * hd;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(op + 16 * c, o[j][c]);
  }
}

template <int NC>
SLAB_AVX512 void block_impl(const AttnBlock& b) {
  constexpr int hd = 16 * NC;
  constexpr int VB = NC <= 4 ? 4 : NC <= 8 ? 2 : 1;
  constexpr int NP = (NC + 1) / 2;  // 32-element chunks of head_dim
  float alphas[kAttnMaxVectors];
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int i = 0; i < b.m; ++i) {
    const int lo = b.lo[i], hi = b.hi[i];
    if (lo >= hi) continue;
    const float* qp = b.qhl + static_cast<size_t>(i) * (32 * NP);
    float* s = b.s + static_cast<size_t>(i) * static_cast<size_t>(b.lds);
    __m512bh qhi[NP], qlo[NP];
#pragma GCC unroll 8
    for (int c = 0; c < NP; ++c) {
      qhi[c] = (__m512bh)_mm512_loadu_si512(qp + 16 * c);
      qlo[c] = (__m512bh)_mm512_loadu_si512(qp + 16 * (NP + c));
    }

    // Scores of the 16-token groups that meet [lo, hi); other lanes become -inf and their K
    // rows are not read.
    __m512 vmax = neg_inf;
    const int g0 = lo & ~15;
    for (int g = g0; g < hi; g += 16) {
      __m512 acc[16];
#pragma GCC unroll 16
      for (int t = 0; t < 16; ++t) {
        acc[t] = _mm512_setzero_ps();
        if (g + t < lo || g + t >= hi) continue;
        const bf16_t* kr = b.kraw + static_cast<size_t>(g + t) * hd;
#pragma GCC unroll 8
        for (int c = 0; c < NP; ++c) {
          const __m512bh kv =
              2 * c + 1 < NC
                  ? (__m512bh)_mm512_loadu_si512(kr + 32 * c)
                  : (__m512bh)_mm512_zextsi256_si512(
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kr + 32 * c)));
          acc[t] = _mm512_dpbf16_ps(acc[t], qhi[c], kv);
          acc[t] = _mm512_dpbf16_ps(acc[t], qlo[c], kv);
        }
      }
      const __m512 sv = _mm512_mask_blend_ps(range_mask(g, lo, hi), neg_inf, reduce16(acc));
      _mm512_storeu_ps(s + g, sv);
      vmax = _mm512_max_ps(vmax, sv);
    }

    const float mold = b.mx[i];
    const float mnew = std::max(mold, _mm512_reduce_max_ps(vmax));
    const float alpha = mold == -std::numeric_limits<float>::infinity()
                            ? 0.0f  // nothing seen yet
                            : _mm512_cvtss_f32(exp_neg(_mm512_set1_ps(mold - mnew)));
    const __m512 vm = _mm512_set1_ps(mnew);
    __m512 vsum = _mm512_setzero_ps();
    for (int g = g0; g < hi; g += 16) {
      const __m512 p = _mm512_maskz_mov_ps(range_mask(g, lo, hi),
                                           exp_neg(_mm512_sub_ps(_mm512_loadu_ps(s + g), vm)));
      _mm512_storeu_ps(s + g, p);
      vsum = _mm512_add_ps(vsum, p);
    }
    b.l[i] = b.l[i] * alpha + _mm512_reduce_add_ps(vsum);
    b.mx[i] = mnew;

    alphas[i] = alpha;
  }

  // P·V, VB vectors with the same token range at a time: each V row is loaded once for all of
  // them and VB·NC independent accumulator chains hide the FMA latency.
  for (int i = 0; i < b.m;) {
    const int lo = b.lo[i], hi = b.hi[i];
    int n = 1;
    while (n < VB && i + n < b.m && b.lo[i + n] == lo && b.hi[i + n] == hi) ++n;
    if (lo < hi) {
      if (n == VB) {
        pv<NC, VB>(b, i, lo, hi, alphas);
      } else {
        for (int j = 0; j < n; ++j) pv<NC, 1>(b, i + j, lo, hi, alphas);
      }
    }
    i += n;
  }
}

}  // namespace

void attn_block_avx512(const AttnBlock& b) {
  switch (b.hd / 16) {
    case 1: return block_impl<1>(b);
    case 2: return block_impl<2>(b);
    case 3: return block_impl<3>(b);
    case 4: return block_impl<4>(b);
    case 5: return block_impl<5>(b);
    case 6: return block_impl<6>(b);
    case 7: return block_impl<7>(b);
    case 8: return block_impl<8>(b);
    case 9: return block_impl<9>(b);
    case 10: return block_impl<10>(b);
    case 11: return block_impl<11>(b);
    case 12: return block_impl<12>(b);
    case 13: return block_impl<13>(b);
    case 14: return block_impl<14>(b);
    case 15: return block_impl<15>(b);
    case 16: return block_impl<16>(b);
    default: return attn_block_scalar(b);
  }
}

SLAB_AVX512 void stage_q_hilo_avx512(float* dst, const float* q, int m, int hd) {
  const int nc = hd / 16, np = (nc + 1) / 2;
  for (int v = 0; v < m; ++v) {
    const float* qv = q + static_cast<size_t>(v) * hd;
    float* d = dst + static_cast<size_t>(v) * 32 * np;
    for (int c = 0; c < np; ++c) {
      const __m512 f0 = _mm512_loadu_ps(qv + 32 * c);
      const __m512 f1 = 2 * c + 1 < nc ? _mm512_loadu_ps(qv + 32 * c + 16) : _mm512_setzero_ps();
      const __m512i hi = (__m512i)_mm512_cvtne2ps_pbh(f1, f0);  // f0 in the low half
      const __m512 h0 = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(hi)), 16));
      const __m512 h1 = _mm512_castsi512_ps(
          _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(hi, 1)), 16));
      const __m512i lo =
          (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(f1, h1), _mm512_sub_ps(f0, h0));
      _mm512_storeu_si512(d + 16 * c, hi);
      _mm512_storeu_si512(d + 16 * (np + c), lo);
    }
  }
}

SLAB_AVX512 void widen_bf16_avx512(float* dst, const bf16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i w = _mm512_cvtepu16_epi32(
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + i)));
    _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace slab::kern::detail
