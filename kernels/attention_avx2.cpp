// AVX2 block of SLAB attention: the scalar block's algorithm (K and V widened to FP32,
// attention_block.h) with 8-lane FMAs. Scores take four tokens at a time, each an 8-lane
// dot product over head_dim reduced by one hadd tree; the softmax uses exp_avx2; P·V keeps 32
// elements of a query vector's output in registers across the block's tokens. Needs head_dim a
// multiple of 8 (else the driver runs the scalar block). The scalar path's sums are sequential
// FP32 and were not vectorised by the compiler: on AVX2 machines attention ran at scalar speed.
// Every function carries the target attribute; only called after cpuid said avx2 and fma.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/attention_block.h"
#include "kernels/exp_avx2.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// q · k over hd (a multiple of 8) as 8 lanes of partial sums.
SLAB_AVX2 inline __m256 dot_lanes(const float* q, const float* k, int hd) {
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int d = 0;
  for (; d + 16 <= hd; d += 16) {
    a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a0);
    a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d + 8), _mm256_loadu_ps(k + d + 8), a1);
  }
  if (d < hd) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a0);
  return _mm256_add_ps(a0, a1);
}

// The four lane sums of a, b, c, d as one 128-bit vector (a's sum in lane 0).
SLAB_AVX2 inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 ab = _mm256_hadd_ps(a, b), cd = _mm256_hadd_ps(c, d);
  const __m256 abcd = _mm256_hadd_ps(ab, cd);  // per 128-bit half: a, b, c, d partial sums
  return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

SLAB_AVX2 inline float hsum(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}

// s[t] = q · k[t] for t in [lo, hi); returns the largest.
SLAB_AVX2 float scores(const float* q, const float* kb, int hd, int lo, int hi, float* s) {
  const auto uhd = static_cast<size_t>(hd);
  __m128 best4 = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  int t = lo;
  for (; t + 4 <= hi; t += 4) {
    const float* k = kb + static_cast<size_t>(t) * uhd;
    const __m128 four = hsum4(dot_lanes(q, k, hd), dot_lanes(q, k + uhd, hd), dot_lanes(q, k + 2 * uhd, hd),
                              dot_lanes(q, k + 3 * uhd, hd));
    _mm_storeu_ps(s + t, four);
    best4 = _mm_max_ps(best4, four);
  }
  alignas(16) float b4[4];
  _mm_store_ps(b4, best4);
  float best = std::max(std::max(b4[0], b4[1]), std::max(b4[2], b4[3]));
  for (; t < hi; ++t) {
    s[t] = hsum(dot_lanes(q, kb + static_cast<size_t>(t) * uhd, hd));
    best = std::max(best, s[t]);
  }
  return best;
}

// Rows [t_a, t_b) of a BF16 [nt][hd] block into FP32 dst (same layout).
SLAB_AVX2 inline void widen_rows(const bf16_t* src, float* dst, size_t hd, int t_a, int t_b) {
  if (t_b > t_a) convert_bf16_to_f32_avx2(dst + t_a * hd, src + t_a * hd, static_cast<size_t>(t_b - t_a) * hd);
}

// scores() for the block's first vector, widening its K rows four tokens ahead of the dot
// products and its V rows alongside, so that a chunk's cache reads overlap the arithmetic of
// the one before (as a pass of their own they had nothing to overlap). Same sums as scores().
SLAB_AVX2 float scores_widening(const float* q, const AttnBlock& b, int lo, int hi, float* s) {
  const auto uhd = static_cast<size_t>(b.hd);
  widen_rows(b.kraw, b.k_widen, uhd, lo, std::min(lo + 4, hi));
  __m128 best4 = _mm_set1_ps(-std::numeric_limits<float>::infinity());
  const int pf_share = prefetch_share(b, (hi - lo + 3) / 4);  // a later block's lines, spread
  int pf = 0;
  int t = lo;
  for (; t + 4 <= hi; t += 4) {
    pf = prefetch_stream(b, pf, std::min(pf + pf_share, 2 * b.pf_lines));
    widen_rows(b.kraw, b.k_widen, uhd, t + 4, std::min(t + 8, hi));
    widen_rows(b.vraw, b.v_widen, uhd, t, t + 4);
    const float* k = b.k_widen + static_cast<size_t>(t) * uhd;
    const __m128 four = hsum4(dot_lanes(q, k, b.hd), dot_lanes(q, k + uhd, b.hd), dot_lanes(q, k + 2 * uhd, b.hd),
                              dot_lanes(q, k + 3 * uhd, b.hd));
    _mm_storeu_ps(s + t, four);
    best4 = _mm_max_ps(best4, four);
  }
  widen_rows(b.vraw, b.v_widen, uhd, t, hi);
  prefetch_stream(b, pf, 2 * b.pf_lines);
  alignas(16) float b4[4];
  _mm_store_ps(b4, best4);
  float best = std::max(std::max(b4[0], b4[1]), std::max(b4[2], b4[3]));
  for (; t < hi; ++t) {
    s[t] = hsum(dot_lanes(q, b.k_widen + static_cast<size_t>(t) * uhd, b.hd));
    best = std::max(best, s[t]);
  }
  return best;
}

// s[t] = exp(s[t] - m) for t in [lo, hi); returns their sum.
SLAB_AVX2 float exp_shifted(float* s, int lo, int hi, float m) {
  const __m256 mv = _mm256_set1_ps(m);
  __m256 acc = _mm256_setzero_ps();
  int t = lo;
  for (; t + 8 <= hi; t += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + t), mv));
    _mm256_storeu_ps(s + t, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = hsum(acc);
  if (t < hi) {  // the tail through one more vector, in a copy padded with -inf (exp: 0)
    alignas(32) float tail[8];
    for (int j = 0; j < 8; ++j) tail[j] = t + j < hi ? s[t + j] - m : -std::numeric_limits<float>::infinity();
    const __m256 e = exp_avx2(_mm256_load_ps(tail));
    _mm256_store_ps(tail, e);
    for (int j = 0; t + j < hi; ++j) {
      s[t + j] = tail[j];
      sum += tail[j];
    }
  }
  return sum;
}

// o = alpha · o + Σ_{t in [lo, hi)} p[t] v[t], 32 elements of o at a time in registers.
SLAB_AVX2 void accumulate_pv(float* o, float alpha, const float* p, const float* vb, int hd, int lo, int hi) {
  const auto uhd = static_cast<size_t>(hd);
  const __m256 av = _mm256_set1_ps(alpha);
  int d = 0;
  for (; d + 32 <= hd; d += 32) {
    __m256 a0 = _mm256_mul_ps(av, _mm256_loadu_ps(o + d)), a1 = _mm256_mul_ps(av, _mm256_loadu_ps(o + d + 8));
    __m256 a2 = _mm256_mul_ps(av, _mm256_loadu_ps(o + d + 16)), a3 = _mm256_mul_ps(av, _mm256_loadu_ps(o + d + 24));
    for (int t = lo; t < hi; ++t) {
      const __m256 pt = _mm256_broadcast_ss(p + t);
      const float* v = vb + static_cast<size_t>(t) * uhd + d;
      a0 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v), a0);
      a1 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + 8), a1);
      a2 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + 16), a2);
      a3 = _mm256_fmadd_ps(pt, _mm256_loadu_ps(v + 24), a3);
    }
    _mm256_storeu_ps(o + d, a0);
    _mm256_storeu_ps(o + d + 8, a1);
    _mm256_storeu_ps(o + d + 16, a2);
    _mm256_storeu_ps(o + d + 24, a3);
  }
  for (; d < hd; d += 8) {
    __m256 a0 = _mm256_mul_ps(av, _mm256_loadu_ps(o + d));
    for (int t = lo; t < hi; ++t) {
      a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p + t), _mm256_loadu_ps(vb + static_cast<size_t>(t) * uhd + d), a0);
    }
    _mm256_storeu_ps(o + d, a0);
  }
}

}  // namespace

SLAB_AVX2 void attn_block_avx2(const AttnBlock& b) {
  const auto hd = static_cast<size_t>(b.hd);
  // With k_widen set this block widens K and V itself: the rows any vector reads, [u_lo, u_hi),
  // those of the first live vector while its scores go, the rest (rows of later vectors only:
  // multi-token items under a causal mask) before.
  int first = -1, u_lo = b.nt, u_hi = 0;
  if (b.k_widen) {
    for (int i = 0; i < b.m; ++i) {
      if (b.lo[i] >= b.hi[i]) continue;
      if (first < 0) first = i;
      u_lo = std::min(u_lo, b.lo[i]);
      u_hi = std::max(u_hi, b.hi[i]);
    }
    if (first >= 0) {
      for (const bf16_t* src : {b.kraw, b.vraw}) {
        float* dst = src == b.kraw ? b.k_widen : b.v_widen;
        widen_rows(src, dst, hd, u_lo, b.lo[first]);
        widen_rows(src, dst, hd, b.hi[first], u_hi);
      }
    }
  }
  for (int i = 0; i < b.m; ++i) {
    const int lo = b.lo[i], hi = b.hi[i];
    if (lo >= hi) continue;
    float* s = b.s + static_cast<size_t>(i) * static_cast<size_t>(b.lds);
    const float* q = b.q + static_cast<size_t>(i) * hd;
    const float local = i == first ? scores_widening(q, b, lo, hi, s) : scores(q, b.k, b.hd, lo, hi, s);
    const float mnew = std::max(b.mx[i], local);
    const float alpha = std::exp(b.mx[i] - mnew);  // 0 when nothing was seen yet
    b.l[i] = b.l[i] * alpha + exp_shifted(s, lo, hi, mnew);
    b.mx[i] = mnew;
    accumulate_pv(b.o + static_cast<size_t>(i) * hd, alpha, s, b.v, b.hd, lo, hi);
  }
}

SLAB_AVX2 void convert_bf16_to_f32_avx2(float* dst, const bf16_t* src, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
  }
  for (; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

}  // namespace slab::kern::detail
