// AVX-512 block of SLAB attention for items of many query vectors (prefill tiles): the query
// vectors sit in the lanes of each zmm (16 per register, up to 4 registers), so
//   - Q is transposed once per item (stage_qt_avx512), not K once per block;
//   - scores take each K pair as a broadcast straight from the cache row: vdpbf16ps of the
//     broadcast against the Q^T hi and lo columns, 2·NV·TT independent chains;
//   - the online softmax runs down the tokens with no horizontal reduction: max, exp and sum are
//     vertical over 16 vectors at a time;
//   - P·V accumulates O^T (head_dim rows of NV registers) with broadcast V pairs from a per-block
//     interleave of V (two token rows per dword) against P^T pairs.
// Q stays split into BF16 hi + lo; P is rounded to BF16 or split likewise (AttnBlock::
// round_p_to_bf16), the same numerics as the tokens-in-lanes block (attention_avx512.cpp).
// Every function carries the target attribute; only called after cpuid said avx512_bf16.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_block.h"
#include "kernels/exp_avx512.h"

// GCC 12 reports the _mm512_undefined_ps() pass-through operand of the inlined intrinsics as
// (maybe) used uninitialized, as in attention_avx512.cpp: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {
namespace {

inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// In place: r[i] lane j becomes the old r[j] lane i (16×16 dwords).
SLAB_AVX512 inline void transpose16(__m512i r[16]) {
  __m512i t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
  }
  for (int q = 0; q < 4; ++q) {  // u[4q + j], 128-bit lane k: column 4k + j of rows 4q..4q+3
    u[4 * q + 0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
    u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
    u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
  }
  for (int j = 0; j < 4; ++j) {
    const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
    const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
    const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
    const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
    r[j] = _mm512_shuffle_i32x4(v0, v2, 0x88);
    r[4 + j] = _mm512_shuffle_i32x4(v1, v3, 0x88);
    r[8 + j] = _mm512_shuffle_i32x4(v0, v2, 0xdd);
    r[12 + j] = _mm512_shuffle_i32x4(v1, v3, 0xdd);
  }
}

// Dword of the interleaved V chunk (unpacklo/hi_epi16 of two rows, see interleave_v) that holds
// element d of both rows.
inline int v_pair_index(int d) {
  const int e = d % 32, k = e / 8, j = e % 8;
  return (d / 32) * 32 + (j < 4 ? 0 : 16) + 4 * k + (j & 3);
}

// Scores of TT tokens from t0 against all NV·16 vectors, masked to each vector's [lo, hi) and
// stored as S^T rows (row t - ta, NV registers each).
template <int NV, int TT>
SLAB_AVX512 void score_tokens(const AttnBlock& b, const LanesScratch& w, int t0, int ta, const __m512i* lo,
                              const __m512i* hi) {
  const int ncols = b.hd / 2;
  const float* qh = w.qt;
  const float* ql = w.qt + w.qt_lo_offset;
  __m512 acc[TT][NV];
  for (int t = 0; t < TT; ++t) {
    for (int g = 0; g < NV; ++g) acc[t][g] = _mm512_setzero_ps();
  }
  const bf16_t* k0 = b.kraw + static_cast<size_t>(t0) * b.hd;
  for (int c = 0; c < ncols; ++c) {
    // Plain __m512i arrays, cast at the use: GCC 12 keeps arrays of __m512bh on the stack.
    __m512i h[NV], l[NV];
    for (int g = 0; g < NV; ++g) {
      h[g] = _mm512_loadu_si512(qh + (static_cast<size_t>(c) * NV + g) * 16);
      l[g] = _mm512_loadu_si512(ql + (static_cast<size_t>(c) * NV + g) * 16);
    }
#pragma GCC unroll 8
    for (int t = 0; t < TT; ++t) {
      const __m512bh kb =
          (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(k0 + static_cast<size_t>(t) * b.hd + 2 * c)));
#pragma GCC unroll 4
      for (int g = 0; g < NV; ++g) {
        acc[t][g] = _mm512_dpbf16_ps(acc[t][g], (__m512bh)h[g], kb);
        acc[t][g] = _mm512_dpbf16_ps(acc[t][g], (__m512bh)l[g], kb);
      }
    }
  }
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int t = 0; t < TT; ++t) {
    const __m512i tv = _mm512_set1_epi32(t0 + t);
    float* row = w.s + static_cast<size_t>(t0 + t - ta) * NV * 16;
    for (int g = 0; g < NV; ++g) {
      const __mmask16 seen = _mm512_cmple_epi32_mask(lo[g], tv) & _mm512_cmplt_epi32_mask(tv, hi[g]);
      _mm512_storeu_ps(row + 16 * g, _mm512_mask_blend_ps(seen, neg_inf, acc[t][g]));
    }
  }
}

template <int NV>
SLAB_AVX512 void score_rows(const AttnBlock& b, const LanesScratch& w, int t_lo, int t_hi, int ta, const __m512i* lo,
                            const __m512i* hi) {
  constexpr int TT = NV >= 4 ? 5 : NV == 3 ? 6 : 8;  // NV·TT accumulators, Q hi/lo in 2·NV more
  int t = t_lo;
  for (; t + TT <= t_hi; t += TT) score_tokens<NV, TT>(b, w, t, ta, lo, hi);
  switch (t_hi - t) {
    case 0: break;
    case 1: score_tokens<NV, 1>(b, w, t, ta, lo, hi); break;
    case 2: score_tokens<NV, 2>(b, w, t, ta, lo, hi); break;
    case 3: score_tokens<NV, 3>(b, w, t, ta, lo, hi); break;
    case 4: score_tokens<NV, 4>(b, w, t, ta, lo, hi); break;
    case 5: score_tokens<NV, 5>(b, w, t, ta, lo, hi); break;
    case 6: score_tokens<NV, 6>(b, w, t, ta, lo, hi); break;
    default: score_tokens<NV, 7>(b, w, t, ta, lo, hi); break;
  }
}

// Online softmax down the rows [0, n) of S^T, NV registers wide; P replaces S (0 where masked).
// Writes the rescale factor of each vector to alpha.
template <int NV>
SLAB_AVX512 void softmax_rows(const AttnBlock& b, const LanesScratch& w, int n, float* alpha) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int g = 0; g < NV; ++g) {
    __m512 vmax = neg_inf;
    for (int t = 0; t < n; ++t)
      vmax = _mm512_max_ps(vmax, _mm512_loadu_ps(w.s + (static_cast<size_t>(t) * NV + g) * 16));
    const __m512 mold = _mm512_loadu_ps(b.mx + 16 * g);
    const __m512 mnew = _mm512_max_ps(mold, vmax);
    const __mmask16 had = _mm512_cmp_ps_mask(mold, neg_inf, _CMP_NEQ_OQ);  // seen a token before
    const __mmask16 has = _mm512_cmp_ps_mask(mnew, neg_inf, _CMP_NEQ_OQ);
    const __m512 scale = _mm512_maskz_mov_ps(had, exp_avx512(_mm512_maskz_sub_ps(had, mold, mnew)));
    _mm512_storeu_ps(alpha + 16 * g, scale);
    const __m512 base = _mm512_maskz_mov_ps(has, mnew);
    __m512 sum = _mm512_setzero_ps();
    for (int t = 0; t < n; ++t) {
      float* row = w.s + (static_cast<size_t>(t) * NV + g) * 16;
      const __m512 x = _mm512_loadu_ps(row);
      const __mmask16 seen = _mm512_cmp_ps_mask(x, neg_inf, _CMP_NEQ_OQ);
      const __m512 p = _mm512_maskz_mov_ps(seen, exp_avx512(_mm512_sub_ps(x, base)));
      _mm512_storeu_ps(row, p);
      sum = _mm512_add_ps(sum, p);
    }
    _mm512_storeu_ps(b.l + 16 * g, _mm512_fmadd_ps(_mm512_loadu_ps(b.l + 16 * g), scale, sum));
    _mm512_storeu_ps(b.mx + 16 * g, mnew);
  }
}

// P^T as BF16 pairs: dword j of (pair u, register g) = (p[16g + j][2u], p[16g + j][2u + 1]);
// with SplitP the BF16 lo parts follow at pt_lo_offset.
template <int NV, bool SplitP>
SLAB_AVX512 void pack_p_pairs(const LanesScratch& w, int n_pairs) {
  // Words 2j, 2j + 1 of the result from words j, 16 + j of cvtne2ps_pbh(p_odd, p_even).
  alignas(64) static constexpr uint16_t kInterleave[32] = {0,  16, 1,  17, 2,  18, 3,  19, 4,  20, 5,
                                                           21, 6,  22, 7,  23, 8,  24, 9,  25, 10, 26,
                                                           11, 27, 12, 28, 13, 29, 14, 30, 15, 31};
  const __m512i idx = _mm512_load_si512(kInterleave);
  for (int u = 0; u < n_pairs; ++u) {
    for (int g = 0; g < NV; ++g) {
      const __m512 p0 = _mm512_loadu_ps(w.s + (static_cast<size_t>(2 * u) * NV + g) * 16);
      const __m512 p1 = _mm512_loadu_ps(w.s + (static_cast<size_t>(2 * u + 1) * NV + g) * 16);
      const __m512i h = (__m512i)_mm512_cvtne2ps_pbh(p1, p0);
      float* dst = w.pt + (static_cast<size_t>(u) * NV + g) * 16;
      _mm512_storeu_si512(dst, _mm512_permutexvar_epi16(idx, h));
      if constexpr (SplitP) {
        const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(h)), 16));
        const __m512 h1 =
            _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(h, 1)), 16));
        const __m512i l = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(p1, h1), _mm512_sub_ps(p0, h0));
        _mm512_storeu_si512(dst + w.pt_lo_offset, _mm512_permutexvar_epi16(idx, l));
      }
    }
  }
}

// V rows [2·ua, 2·ua + 2·n_pairs) of the block, two rows per dword (unpacklo/hi_epi16 per 32
// elements of head_dim), rows outside [t_lo, t_hi) as zeros (never read).
SLAB_AVX512 void interleave_v(const AttnBlock& b, const LanesScratch& w, int ua, int n_pairs, int t_lo, int t_hi) {
  const int nchunks = (b.hd + 31) / 32;
  for (int u = 0; u < n_pairs; ++u) {
    const int t = 2 * (ua + u);
    for (int c = 0; c < nchunks; ++c) {
      __m512i rows[2];
      for (int r = 0; r < 2; ++r) {
        const bf16_t* src = b.vraw + static_cast<size_t>(t + r) * b.hd + 32 * c;
        if (t + r < t_lo || t + r >= t_hi) {
          rows[r] = _mm512_setzero_si512();
        } else if (32 * c + 32 <= b.hd) {
          rows[r] = _mm512_loadu_si512(src);
        } else {
          rows[r] = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
        }
      }
      float* dst = w.vi + (static_cast<size_t>(u) * nchunks + c) * 32;
      _mm512_storeu_si512(dst, _mm512_unpacklo_epi16(rows[0], rows[1]));
      _mm512_storeu_si512(dst + 16, _mm512_unpackhi_epi16(rows[0], rows[1]));
    }
  }
}

// O^T rows [d0, d0 + DB) = alpha O^T + sum over pairs of P^T pairs x broadcast V pairs. Not
// inlined: inside block_lanes GCC 12 runs out of zmm registers and spills the P registers.
template <int NV, int DB, bool SplitP>
__attribute__((noinline)) SLAB_AVX512 void pv_rows(const AttnBlock& b, const LanesScratch& w, int d0, int n_pairs,
                                                   const float* alpha) {
  const int nchunks = (b.hd + 31) / 32;
  __m512 acc[DB][NV];
  int at[DB];
  for (int d = 0; d < DB; ++d) {
    at[d] = v_pair_index(d0 + d);
    for (int g = 0; g < NV; ++g) {
      acc[d][g] = _mm512_mul_ps(_mm512_loadu_ps(alpha + 16 * g),
                                _mm512_loadu_ps(w.ot + (static_cast<size_t>(d0 + d) * NV + g) * 16));
    }
  }
  for (int u = 0; u < n_pairs; ++u) {
    __m512i p[NV], pl[NV];  // __m512i: see score_tokens
    for (int g = 0; g < NV; ++g) {
      p[g] = _mm512_loadu_si512(w.pt + (static_cast<size_t>(u) * NV + g) * 16);
      if constexpr (SplitP) pl[g] = _mm512_loadu_si512(w.pt + w.pt_lo_offset + (static_cast<size_t>(u) * NV + g) * 16);
    }
    const float* vrow = w.vi + static_cast<size_t>(u) * nchunks * 32;
#pragma GCC unroll 8
    for (int d = 0; d < DB; ++d) {
      const __m512bh vb = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(vrow + at[d])));
#pragma GCC unroll 4
      for (int g = 0; g < NV; ++g) {
        acc[d][g] = _mm512_dpbf16_ps(acc[d][g], (__m512bh)p[g], vb);
        if constexpr (SplitP) acc[d][g] = _mm512_dpbf16_ps(acc[d][g], (__m512bh)pl[g], vb);
      }
    }
  }
  for (int d = 0; d < DB; ++d) {
    for (int g = 0; g < NV; ++g) _mm512_storeu_ps(w.ot + (static_cast<size_t>(d0 + d) * NV + g) * 16, acc[d][g]);
  }
}

template <int NV, bool SplitP>
SLAB_AVX512 void block_lanes(const AttnBlock& b, const LanesScratch& w) {
  // Lanes past m never see a token: empty ranges.
  alignas(64) int lo_a[16 * NV], hi_a[16 * NV];
  int t_lo = 1 << 30, t_hi = -1;
  for (int i = 0; i < 16 * NV; ++i) {
    const bool live = i < b.m && b.lo[i] < b.hi[i];
    lo_a[i] = live ? b.lo[i] : 1 << 30;
    hi_a[i] = live ? b.hi[i] : -1;
    if (live) {
      t_lo = std::min(t_lo, b.lo[i]);
      t_hi = std::max(t_hi, b.hi[i]);
    }
  }
  if (t_hi < 0) return;
  __m512i lo[NV], hi[NV];
  for (int g = 0; g < NV; ++g) {
    lo[g] = _mm512_load_si512(lo_a + 16 * g);
    hi[g] = _mm512_load_si512(hi_a + 16 * g);
  }
  for (int l = 0; l < 2 * b.pf_lines; ++l) {  // a later block of the item, while this one computes
    _mm_prefetch((l < b.pf_lines ? b.pf_k + 64 * l : b.pf_v + 64 * (l - b.pf_lines)), _MM_HINT_T1);
  }

  // Rows of S^T from an even token ta so that P pairs up; tokens outside [t_lo, t_hi) are -inf.
  const int ta = t_lo & ~1, tb = (t_hi + 1) & ~1;
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int t : {ta, tb - 1}) {
    if (t >= t_lo && t < t_hi) continue;
    for (int g = 0; g < NV; ++g) _mm512_storeu_ps(w.s + (static_cast<size_t>(t - ta) * NV + g) * 16, neg_inf);
  }
  score_rows<NV>(b, w, t_lo, t_hi, ta, lo, hi);
  alignas(64) float alpha[16 * NV];
  softmax_rows<NV>(b, w, tb - ta, alpha);
  const int n_pairs = (tb - ta) / 2;
  pack_p_pairs<NV, SplitP>(w, n_pairs);
  interleave_v(b, w, ta / 2, n_pairs, t_lo, t_hi);
  // NV·DB accumulators + NV P registers (x2 with SplitP) within the 32 zmm; head_dim is a
  // multiple of 16, so the tail after rows of 6 is 2 or 4.
  constexpr int DB = SplitP ? (NV >= 3 ? 4 : 8) : NV == 4 ? 6 : NV == 3 ? 8 : 12;
  int d0 = 0;
  for (; d0 + DB <= b.hd; d0 += DB) pv_rows<NV, DB, SplitP>(b, w, d0, n_pairs, alpha);
  if (b.hd - d0 == 2) pv_rows<NV, 2, SplitP>(b, w, d0, n_pairs, alpha);
  if (b.hd - d0 == 4) pv_rows<NV, 4, SplitP>(b, w, d0, n_pairs, alpha);
  if (b.hd - d0 == 8) pv_rows<NV, 8, SplitP>(b, w, d0, n_pairs, alpha);
}

}  // namespace

static_assert(kAttnLanesMinVectors > 16 && kAttnMaxVectors <= 64, "the lanes block runs 2 to 4 registers of vectors");

void attn_block_lanes_avx512(const AttnBlock& b, const LanesScratch& w) {
  const int nv = (b.m + 15) / 16;
  if (b.round_p_to_bf16) {
    switch (nv) {
      case 2: return block_lanes<2, false>(b, w);
      case 3: return block_lanes<3, false>(b, w);
      default: return block_lanes<4, false>(b, w);
    }
  }
  switch (nv) {
    case 2: return block_lanes<2, true>(b, w);
    case 3: return block_lanes<3, true>(b, w);
    default: return block_lanes<4, true>(b, w);
  }
}

SLAB_AVX512 void stage_qt_avx512(float* qt, const float* qhl, int m, int hd) {
  const int np = (hd + 31) / 32;  // 32-element chunks; qhl holds np hi then np lo per vector
  const int nv = (m + 15) / 16;
  const size_t lo_offset = static_cast<size_t>(16 * np) * nv * 16;
  for (int half = 0; half < 2; ++half) {
    for (int c = 0; c < np; ++c) {
      for (int g = 0; g < nv; ++g) {
        __m512i r[16];
        for (int j = 0; j < 16; ++j) {
          const int v = 16 * g + j;
          r[j] = v < m ? _mm512_loadu_si512(qhl + static_cast<size_t>(v) * 32 * np + (half * np + c) * 16)
                       : _mm512_setzero_si512();
        }
        transpose16(r);  // r[i]: pair column 16c + i of the 16 vectors
        for (int i = 0; i < 16; ++i) {
          _mm512_storeu_si512(qt + half * lo_offset + (static_cast<size_t>(16 * c + i) * nv + g) * 16, r[i]);
        }
      }
    }
  }
}

}  // namespace slab::kern::detail
