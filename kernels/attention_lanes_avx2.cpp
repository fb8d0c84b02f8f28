// AVX2 block of SLAB attention with the query vectors in the lanes, for shapes whose GQA group
// fills an 8-lane register (kernels/attention.h: chosen per shape, so decode rows run it too).
// FP32 on 8-lane FMAs like attention_avx2.cpp (K and V widened from the cache's BF16 as the
// scores go, below), 8 or 16 vectors a register group:
//   - Q is transposed once per item (stage_qt_avx2), so scores broadcast one K element a token
//     against the group's Q^T registers: with 16 vectors, 12 FMAs a column for 2 loads and 6
//     broadcasts, where the one-vector block loads q and k for every FMA (two loads an FMA:
//     load-bound at half the FMA rate);
//   - the online softmax runs down the tokens, 8 vectors a register, no horizontal reduction;
//   - P·V accumulates O^T rows against broadcast V elements.
// FP32 products of exact values and FP32 sums like the one-vector block, in another order; each
// vector is computed the same way whatever the item holds (lanes do not interact).
// Every function carries the target attribute; only called after cpuid said avx2 and fma.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_block.h"
#include "kernels/exp_avx2.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// Rows [t_a, t_b) of a BF16 [nt][hd] block into FP32 dst (same layout).
SLAB_AVX2 inline void widen_rows(const bf16_t* src, float* dst, int hd, int t_a, int t_b) {
  if (t_b <= t_a) return;
  const size_t off = static_cast<size_t>(t_a) * hd;
  convert_bf16_to_f32_avx2(dst + off, src + off, static_cast<size_t>(t_b - t_a) * hd);
}

// Vectors go in register groups of R 8-lane registers (R = 2 from 16 vectors, else 1: a decode
// row of 8 query heads a KV head fills one); w (the row stride of Q^T, S^T and O^T) is the
// vectors rounded up to a whole group, lanes_width_avx2.

// S^T rows t - t_lo of TT tokens from t0 for the vectors [8Rg, 8Rg + 8R), masked to each
// vector's [lo, hi) (-inf outside).
template <int R, int TT>
SLAB_AVX2 void score_tokens(const AttnBlock& b, const LanesScratch& l, int g, int t0, int t_lo, const __m256i* lo,
                            const __m256i* hi) {
  const int w = l.width;
  // Every loop over acc is unrolled: with the inner loop over r left rolled, GCC kept the 12
  // accumulators on the stack and stored them on every d (the scores ran at about half the
  // speed of P·V).
  __m256 acc[TT][R];
#pragma GCC unroll 8
  for (int t = 0; t < TT; ++t) {
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) acc[t][r] = _mm256_setzero_ps();
  }
  const float* qt = l.qt + 8 * R * g;
  const float* k0 = l.k + static_cast<size_t>(t0) * b.hd;
  for (int d = 0; d < b.hd; ++d) {
    __m256 q[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) q[r] = _mm256_loadu_ps(qt + static_cast<size_t>(d) * w + 8 * r);
#pragma GCC unroll 8
    for (int t = 0; t < TT; ++t) {
      const __m256 kb = _mm256_broadcast_ss(k0 + static_cast<size_t>(t) * b.hd + d);
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[t][r] = _mm256_fmadd_ps(q[r], kb, acc[t][r]);
    }
  }
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 8
  for (int t = 0; t < TT; ++t) {
    const __m256i tv = _mm256_set1_epi32(t0 + t);
    float* row = l.s + static_cast<size_t>(t0 + t - t_lo) * w + 8 * R * g;
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      // seen: lo <= t < hi, i.e. !(lo > t) && hi > t
      const __m256i seen = _mm256_andnot_si256(_mm256_cmpgt_epi32(lo[r], tv), _mm256_cmpgt_epi32(hi[r], tv));
      _mm256_storeu_ps(row + 8 * r, _mm256_blendv_ps(neg_inf, acc[t][r], _mm256_castsi256_ps(seen)));
    }
  }
}

// O^T rows [d0, d0 + DB) of the vectors [8Rg, 8Rg + 8R) = alpha O^T + sum_t P^T[t] v[t][d].
template <int R, int DB>
SLAB_AVX2 void pv_rows(const AttnBlock& b, const LanesScratch& l, int g, int d0, int t_lo, int t_hi,
                       const float* alpha) {
  const int w = l.width;
  __m256 acc[DB][R], a[R];
  float* ot = l.ot + 8 * R * g;
  for (int r = 0; r < R; ++r) a[r] = _mm256_loadu_ps(alpha + 8 * R * g + 8 * r);
  for (int d = 0; d < DB; ++d) {
    for (int r = 0; r < R; ++r) {
      acc[d][r] = _mm256_mul_ps(a[r], _mm256_loadu_ps(ot + static_cast<size_t>(d0 + d) * w + 8 * r));
    }
  }
  for (int t = t_lo; t < t_hi; ++t) {
    const float* p = l.s + static_cast<size_t>(t - t_lo) * w + 8 * R * g;
    __m256 pr[R];
    for (int r = 0; r < R; ++r) pr[r] = _mm256_loadu_ps(p + 8 * r);
    const float* v = l.v + static_cast<size_t>(t) * b.hd + d0;
#pragma GCC unroll 8
    for (int d = 0; d < DB; ++d) {
      const __m256 vb = _mm256_broadcast_ss(v + d);
      for (int r = 0; r < R; ++r) acc[d][r] = _mm256_fmadd_ps(pr[r], vb, acc[d][r]);
    }
  }
  for (int d = 0; d < DB; ++d) {
    for (int r = 0; r < R; ++r) _mm256_storeu_ps(ot + static_cast<size_t>(d0 + d) * w + 8 * r, acc[d][r]);
  }
}

template <int R>
SLAB_AVX2 void block_lanes(const AttnBlock& b, const LanesScratch& l) {
  constexpr int G = 8 * R;  // vectors a register group
  const int groups = (b.m + G - 1) / G, w = l.width;
  const auto [t_lo, t_hi] = visible_tokens(b);
  if (t_hi < 0) return;

  // Scores, a group × TT tokens at a time (R·TT accumulators of the 16 registers).
  constexpr int TT = R == 2 ? 6 : 8;
  for (int g = 0; g < groups; ++g) {
    alignas(32) int lo_a[G], hi_a[G];
    for (int j = 0; j < G; ++j) {  // lanes past m never see a token
      const int i = G * g + j;
      const bool live = i < b.m && b.lo[i] < b.hi[i];
      lo_a[j] = live ? b.lo[i] : 1 << 30;
      hi_a[j] = live ? b.hi[i] : -1;
    }
    __m256i lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      lo[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo_a + 8 * r));
      hi[r] = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi_a + 8 * r));
    }
    // The first group widens K and V from the cache's BF16, one chunk of tokens ahead for K and
    // alongside for V: the loads of a chunk then go out while the FMAs of the one before run.
    // Widened in a pass before the block, the loads had nothing to overlap and the pass took as
    // long as the block (bench_attention --isa avx2 decode, one Zen 5 core).
    // It also spreads the prefetch of a later block over its chunks (prefetch_stream).
    const bool widen = g == 0;
    const int pf_share = widen ? prefetch_share(b, (t_hi - t_lo + TT - 1) / TT) : 0;
    int pf = 0;
    int t = t_lo;
    if (widen) widen_rows(b.kraw, l.k, b.hd, t_lo, std::min(t_lo + TT, t_hi));
    for (; t + TT <= t_hi; t += TT) {
      if (widen) {
        pf = prefetch_stream(b, pf, std::min(pf + pf_share, 2 * b.pf_lines));
        widen_rows(b.kraw, l.k, b.hd, t + TT, std::min(t + 2 * TT, t_hi));
        widen_rows(b.vraw, l.v, b.hd, t, t + TT);
      }
      score_tokens<R, TT>(b, l, g, t, t_lo, lo, hi);
    }
    if (widen) {
      widen_rows(b.vraw, l.v, b.hd, t, t_hi);
      prefetch_stream(b, pf, 2 * b.pf_lines);
    }
    switch (t_hi - t) {
      case 0: break;
      case 1: score_tokens<R, 1>(b, l, g, t, t_lo, lo, hi); break;
      case 2: score_tokens<R, 2>(b, l, g, t, t_lo, lo, hi); break;
      case 3: score_tokens<R, 3>(b, l, g, t, t_lo, lo, hi); break;
      case 4: score_tokens<R, 4>(b, l, g, t, t_lo, lo, hi); break;
      case 5: score_tokens<R, 5>(b, l, g, t, t_lo, lo, hi); break;
      case 6: score_tokens<R, 6>(b, l, g, t, t_lo, lo, hi); break;
      default: score_tokens<R, 7>(b, l, g, t, t_lo, lo, hi); break;
    }
  }

  // Online softmax down the rows, 8 vectors a register.
  const int n = t_hi - t_lo;
  const __m256 neg_inf = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  alignas(32) float alpha[kAttnMaxVectors];
  for (int r = 0; r < w / 8; ++r) {
    __m256 vmax = neg_inf;
    for (int t = 0; t < n; ++t) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(l.s + static_cast<size_t>(t) * w + 8 * r));
    const __m256 mold = _mm256_loadu_ps(b.mx + 8 * r);
    const __m256 mnew = _mm256_max_ps(mold, vmax);
    const __m256 had = _mm256_cmp_ps(mold, neg_inf, _CMP_NEQ_OQ);  // seen a token before
    const __m256 has = _mm256_cmp_ps(mnew, neg_inf, _CMP_NEQ_OQ);
    const __m256 scale =
        _mm256_and_ps(had, exp_avx2(_mm256_sub_ps(_mm256_and_ps(had, mold), _mm256_and_ps(had, mnew))));
    const __m256 base = _mm256_and_ps(has, mnew);
    __m256 sum = _mm256_setzero_ps();
    for (int t = 0; t < n; ++t) {
      float* row = l.s + static_cast<size_t>(t) * w + 8 * r;
      const __m256 x = _mm256_loadu_ps(row);
      const __m256 p = _mm256_and_ps(_mm256_cmp_ps(x, neg_inf, _CMP_NEQ_OQ), exp_avx2(_mm256_sub_ps(x, base)));
      _mm256_storeu_ps(row, p);
      sum = _mm256_add_ps(sum, p);
    }
    _mm256_storeu_ps(b.l + 8 * r, _mm256_fmadd_ps(_mm256_loadu_ps(b.l + 8 * r), scale, sum));
    _mm256_storeu_ps(b.mx + 8 * r, mnew);
    _mm256_store_ps(alpha + 8 * r, scale);
  }

  // P·V, DB elements of head_dim × a group at a time; head_dim is a multiple of 8, so after
  // rows of 6 the tail is 2 or 4.
  constexpr int DB = R == 2 ? 6 : 8;
  for (int g = 0; g < groups; ++g) {
    int d0 = 0;
    for (; d0 + DB <= b.hd; d0 += DB) pv_rows<R, DB>(b, l, g, d0, t_lo, t_hi, alpha);
    if (b.hd - d0 == 2) pv_rows<R, 2>(b, l, g, d0, t_lo, t_hi, alpha);
    if (b.hd - d0 == 4) pv_rows<R, 4>(b, l, g, d0, t_lo, t_hi, alpha);
  }
}

}  // namespace

void attn_block_lanes_avx2(const AttnBlock& b, const LanesScratch& l) {
  if (b.m >= 16) return block_lanes<2>(b, l);
  block_lanes<1>(b, l);
}

SLAB_AVX2 void stage_qt_avx2(float* qt, const float* q, int m, int hd) {
  const int w = lanes_width_avx2(m);
  for (int d = 0; d < hd; ++d) {
    float* row = qt + static_cast<size_t>(d) * w;
    for (int v = 0; v < w; ++v) row[v] = v < m ? q[static_cast<size_t>(v) * hd + d] : 0.0f;
  }
}

}  // namespace slab::kern::detail
