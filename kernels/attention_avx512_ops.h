#pragma once
// Internal to the attention blocks on AVX-512 (attention_avx512.cpp) and on the AMX tiles
// (attention_amx.cpp): the lane mask of a token range and the per-block transpose of K. Include
// only from translation units whose callers carry an AVX-512 target attribute.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "kernels/attention_block.h"
#include "kernels/exp_avx512.h"

// GCC 12 reports the _mm512_undefined_ps() pass-through operand inside the unpack, shuffle and
// masked max intrinsics as "(may be) used uninitialized" once inlined into the blocks: a false
// positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_ATTN_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {

// Lanes j of a 16-token group starting at g that fall in [lo, hi).
SLAB_ATTN_AVX512 inline __mmask16 range_mask(int g, int lo, int hi) {
  const int a = std::max(0, lo - g), e = std::min(16, hi - g);
  if (e <= a) return 0;
  const uint32_t upto = e >= 16 ? 0xffffu : ((1u << e) - 1u);
  return static_cast<__mmask16>(upto & ~((1u << a) - 1u));
}

// A block's K in the tiled order: column c (the BF16 pair of dims 2c, 2c + 1) of the 16-token
// group g is 16 dwords at base + (g · group_cols + c) · 16. Either the KV cache's own tiled K
// (kv_tiled_k_offset: group_cols = head_dim / 2) or transpose_k's scratch copy of a row-major K.
struct KTiles {
  const float* base;
  size_t group_cols;
};

// K of the 16-token groups [g_lo, g_hi) transposed for vdpbf16ps with tokens in lanes: zmm
// (group gi, column c) = the 16 tokens' BF16 pairs (k[2c], k[2c + 1]), at kt + (gi·NP·16 + c)·16.
// Rows of tokens outside [t_lo, t_hi) are zero and not read.
template <int NC>
SLAB_ATTN_AVX512 void transpose_k(const AttnBlock& b, int t_lo, int t_hi) {
  constexpr int hd = 16 * NC;
  constexpr int NP = (NC + 1) / 2;
  for (int g = t_lo & ~15; g < t_hi; g += 16) {
    for (int h = 0; h < NP; ++h) {
      __m512i r[16];
#pragma GCC unroll 16
      for (int i = 0; i < 16; ++i) {
        const bf16_t* src = b.kraw + static_cast<size_t>(g + i) * hd + 32 * h;
        if (g + i < t_lo || g + i >= t_hi) {
          r[i] = _mm512_setzero_si512();
        } else if (2 * h + 1 < NC) {
          r[i] = _mm512_loadu_si512(src);
        } else {
          r[i] = _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
        }
      }
      __m512i t[16], u[16];
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {
        t[2 * i] = _mm512_unpacklo_epi32(r[2 * i], r[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(r[2 * i], r[2 * i + 1]);
      }
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) {  // rows 4q..4q+3: u[4q + j] holds column 4k + j in lane k
        u[4 * q + 0] = _mm512_unpacklo_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 1] = _mm512_unpackhi_epi64(t[4 * q], t[4 * q + 2]);
        u[4 * q + 2] = _mm512_unpacklo_epi64(t[4 * q + 1], t[4 * q + 3]);
        u[4 * q + 3] = _mm512_unpackhi_epi64(t[4 * q + 1], t[4 * q + 3]);
      }
      float* dst = b.kt + (static_cast<size_t>(g / 16) * NP * 16 + 16 * static_cast<size_t>(h)) * 16;
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m512i v0 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0x88);
        const __m512i v1 = _mm512_shuffle_i32x4(u[j], u[4 + j], 0xdd);
        const __m512i v2 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0x88);
        const __m512i v3 = _mm512_shuffle_i32x4(u[8 + j], u[12 + j], 0xdd);
        _mm512_storeu_si512(dst + 16 * j, _mm512_shuffle_i32x4(v0, v2, 0x88));
        _mm512_storeu_si512(dst + 16 * (4 + j), _mm512_shuffle_i32x4(v1, v3, 0x88));
        _mm512_storeu_si512(dst + 16 * (8 + j), _mm512_shuffle_i32x4(v0, v2, 0xdd));
        _mm512_storeu_si512(dst + 16 * (12 + j), _mm512_shuffle_i32x4(v1, v3, 0xdd));
      }
    }
  }
}

// 32 floats (f0 then f1) as BF16: hi = each rounded to BF16 (f0's in the low half), and with
// `with_lo` lo = what rounding left (f - hi) rounded to BF16, so hi + lo holds f to ~2^-16.
struct BF16Parts {
  __m512i hi, lo;
};
SLAB_ATTN_AVX512 inline BF16Parts split_bf16(__m512 f0, __m512 f1, bool with_lo) {
  BF16Parts p;
  p.hi = (__m512i)_mm512_cvtne2ps_pbh(f1, f0);
  p.lo = _mm512_setzero_si512();
  if (with_lo) {
    const __m512 h0 = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_castsi512_si256(p.hi)), 16));
    const __m512 h1 =
        _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(p.hi, 1)), 16));
    p.lo = (__m512i)_mm512_cvtne2ps_pbh(_mm512_sub_ps(f1, h1), _mm512_sub_ps(f0, h0));
  }
  return p;
}

// The block's K as KTiles: the cache's when it is tiled, else transposed now into b.kt.
template <int NC>
SLAB_ATTN_AVX512 KTiles block_k_tiles(const AttnBlock& b, int t_lo, int t_hi) {
  if (b.k_tiled) return {reinterpret_cast<const float*>(b.kraw), static_cast<size_t>(8 * NC)};
  transpose_k<NC>(b, t_lo, t_hi);
  return {b.kt, static_cast<size_t>(16 * ((NC + 1) / 2))};
}

// Lane j of the result = the 16 lanes of r[j] combined by Op, in _mm512_reduce_add_ps's order
// (lane x with x + 8, then x + 4, x + 2, x + 1): the same bits as reducing each register alone,
// for 5 shuffles and an op per pair of registers instead of 8 per register. The tree is the
// same for every lane, so a vector's result does not depend on which lane it was given.
struct MaxOp {
  SLAB_ATTN_AVX512 static __m512 apply(__m512 a, __m512 b) { return _mm512_max_ps(a, b); }
};
struct AddOp {
  SLAB_ATTN_AVX512 static __m512 apply(__m512 a, __m512 b) { return _mm512_add_ps(a, b); }
};
template <typename Op>
SLAB_ATTN_AVX512 inline __m512 reduce16(const __m512* r) {
  __m512 t[8], u[4], v[2];
#pragma GCC unroll 8
  for (int k = 0; k < 8; ++k) {  // lanes 0..7: r[2k]'s x op x + 8, lanes 8..15: r[2k + 1]'s
    t[k] = Op::apply(_mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], 0x44),
                     _mm512_shuffle_f32x4(r[2 * k], r[2 * k + 1], 0xee));
  }
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {  // 128-bit lane L: r[4k + L]'s x op x + 4
    u[k] = Op::apply(_mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0x88),
                     _mm512_shuffle_f32x4(t[2 * k], t[2 * k + 1], 0xdd));
  }
#pragma GCC unroll 2
  for (int k = 0; k < 2; ++k) {  // 128-bit lane L: r[8k + L] then r[8k + 4 + L], x op x + 2
    const __m512d a = _mm512_castps_pd(u[2 * k]), b = _mm512_castps_pd(u[2 * k + 1]);
    v[k] = Op::apply(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // Lane 4L + c: r[4c + L]'s total; then back to lane j = r[j].
  const __m512 w = Op::apply(_mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512i to_natural = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_permutexvar_ps(to_natural, w);
}

// P as BF16 rows for the AMX block's A tiles (AmxScratch::p, p_lo): vector i's row at p + i · ldp
// over the 32-token steps [t0, t1) (t0 <= every vector's lo, t1 >= its hi), zero outside its
// [lo, hi); with `split`, p_lo the lo parts.
struct PRows {
  bf16_t* p = nullptr;
  bf16_t* p_lo = nullptr;
  int ldp = 0, t0 = 0, t1 = 0;
  bool split = false;
};

// 16 weights of P as BF16 at hi (and what rounding left, rounded, at lo): split_bf16's bits.
SLAB_ATTN_AVX512 inline void store_p_bf16(bf16_t* hi, bf16_t* lo, __m512 p, bool split) {
  const __m256i h = (__m256i)_mm512_cvtneps_pbh(p);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi), h);
  if (split) {
    const __m512 hf = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(lo), (__m256i)_mm512_cvtneps_pbh(_mm512_sub_ps(p, hf)));
  }
}

// A vector's P over the 16 tokens from g: as BF16 at `row` of `rows` (the AMX block), else in
// place of its scores s.
SLAB_ATTN_AVX512 inline void put_p(const PRows* rows, size_t row, float* s, int g, __m512 p) {
  if (rows) {
    store_p_bf16(rows->p + row + g, rows->p_lo + row + g, p, rows->split);
  } else {
    _mm512_storeu_ps(s + g, p);
  }
}

// Zeros over the tokens [from, to) (multiples of 16) of row i of `rows`.
SLAB_ATTN_AVX512 inline void zero_p_bf16(const PRows& rows, int i, int from, int to) {
  const size_t at = static_cast<size_t>(i) * static_cast<size_t>(rows.ldp);
  for (int t = from; t < to; t += 16) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows.p + at + t), _mm256_setzero_si256());
    if (rows.split) _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows.p_lo + at + t), _mm256_setzero_si256());
  }
}
// Zeros over row i's steps outside the 16-token groups that its [lo, hi) touches.
SLAB_ATTN_AVX512 inline void zero_p_bf16_outside(const PRows& rows, int i, int lo, int hi) {
  zero_p_bf16(rows, i, rows.t0, lo & ~15);
  zero_p_bf16(rows, i, (hi + 15) & ~15, rows.t1);
}

// Whether the vectors [i0, i0 + n) all see the same whole 16-token groups (lo and hi multiples of
// 16, lo < hi): then softmax16 reads and writes no lane masks. Prefill blocks off the diagonal
// and full decode blocks are so.
SLAB_ATTN_AVX512 inline bool same_whole_groups(const AttnBlock& b, int i0, int n) {
  const int lo = b.lo[i0], hi = b.hi[i0];
  if (lo >= hi || lo % 16 != 0 || hi % 16 != 0) return false;
  for (int j = 1; j < n; ++j) {
    if (b.lo[i0 + j] != lo || b.hi[i0 + j] != hi) return false;
  }
  return true;
}

// The online-softmax update of the block's vectors [i0, i0 + n), n <= 16, one lane each for the
// maxima, the rescale factors and the sums: for a vector with lo < hi, its scores s[lo, hi)
// become P = e^(s - new max) in place, zero on the other lanes of the 16-token groups from
// lo & ~15 (those lanes are read as they are when Masked is false, i.e. they hold -inf, and not
// at all when it is true); mx and l are updated and alphas[i] = e^(old max - new max), the factor
// its earlier sums take (0 when it had seen nothing). A vector with lo >= hi keeps its mx and l
// and gets alpha 1. Every lane computes what the one-vector form (_mm512_reduce_max_ps,
// _mm512_reduce_add_ps, exp_nonpositive_avx512 of the broadcast) would.
//
// Where same_whole_groups holds, the passes skip the masks (the same operations in the same
// order on the lanes that count, so the same bits: a row's result does not depend on which
// rows share its group of 16). Masked, with a range_mask per group, the softmax of an AMX
// prefill block's 64 vectors took ~720 ns on one Zen 5 core and ~270 ns without.
// Given `rows` (the AMX block), P goes there as BF16 over the block's steps instead of into s:
// zero outside each vector's [lo, hi), the whole row for a vector with lo >= hi.
template <bool Masked>
SLAB_ATTN_AVX512 inline void softmax16(const AttnBlock& b, int i0, int n, float* alphas, const PRows* rows = nullptr) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const auto lds = static_cast<size_t>(b.lds);
  const __mmask16 lanes = static_cast<__mmask16>((1u << n) - 1u);
  const bool whole = same_whole_groups(b, i0, n);
  __m512 r[16];
  __mmask16 live = 0;
  // The vector loops are unrolled so that r[j] stays in a register (a run-time index kept the
  // array on the stack, a store and a reload on every group: a decode block's softmax took ~75
  // ns against ~62).
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) r[j] = neg_inf;
  if (whole) {
    live = lanes;
    const int lo = b.lo[i0], hi = b.hi[i0];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j >= n) break;
      const float* s = b.s + static_cast<size_t>(i0 + j) * lds;
      for (int g = lo; g < hi; g += 16) r[j] = _mm512_max_ps(r[j], _mm512_loadu_ps(s + g));
    }
  } else {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j >= n) break;
      const int lo = b.lo[i0 + j], hi = b.hi[i0 + j];
      if (lo >= hi) continue;
      live = static_cast<__mmask16>(live | (1u << j));
      const float* s = b.s + static_cast<size_t>(i0 + j) * lds;
      for (int g = lo & ~15; g < hi; g += 16) {
        r[j] = _mm512_max_ps(
            r[j], Masked ? _mm512_mask_loadu_ps(neg_inf, range_mask(g, lo, hi), s + g) : _mm512_loadu_ps(s + g));
      }
    }
  }
  const __m512 mold = _mm512_mask_loadu_ps(neg_inf, lanes, b.mx + i0);
  const __m512 mnew = _mm512_mask_max_ps(mold, live, mold, reduce16<MaxOp>(r));
  const __mmask16 seen = _mm512_cmp_ps_mask(mold, neg_inf, _CMP_NEQ_OQ);
  __m512 alpha = _mm512_maskz_mov_ps(seen, exp_nonpositive_avx512(_mm512_sub_ps(mold, mnew)));
  alpha = _mm512_mask_mov_ps(_mm512_set1_ps(1.0f), live, alpha);
  alignas(64) float mn[16];
  _mm512_store_ps(mn, mnew);
#pragma GCC unroll 16
  for (int j = 0; j < 16; ++j) r[j] = _mm512_setzero_ps();
  if (whole) {
    const int lo = b.lo[i0], hi = b.hi[i0];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j >= n) break;
      float* s = b.s + static_cast<size_t>(i0 + j) * lds;
      const __m512 vm = _mm512_set1_ps(mn[j]);
      const size_t row = static_cast<size_t>(i0 + j) * static_cast<size_t>(rows ? rows->ldp : 0);
      for (int g = lo; g < hi; g += 16) {
        const __m512 p = exp_nonpositive_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + g), vm));
        put_p(rows, row, s, g, p);
        r[j] = _mm512_add_ps(r[j], p);
      }
      if (rows) zero_p_bf16_outside(*rows, i0 + j, lo, hi);
    }
  } else {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) {
      if (j >= n) break;
      if (!(live >> j & 1)) {
        if (rows) zero_p_bf16(*rows, i0 + j, rows->t0, rows->t1);
        continue;
      }
      const int lo = b.lo[i0 + j], hi = b.hi[i0 + j];
      float* s = b.s + static_cast<size_t>(i0 + j) * lds;
      const size_t row = static_cast<size_t>(i0 + j) * static_cast<size_t>(rows ? rows->ldp : 0);
      const __m512 vm = _mm512_set1_ps(mn[j]);
      for (int g = lo & ~15; g < hi; g += 16) {
        const __mmask16 m = range_mask(g, lo, hi);
        const __m512 x = Masked ? _mm512_maskz_loadu_ps(m, s + g) : _mm512_loadu_ps(s + g);
        const __m512 p = _mm512_maskz_mov_ps(m, exp_nonpositive_avx512(_mm512_sub_ps(x, vm)));
        put_p(rows, row, s, g, p);
        r[j] = _mm512_add_ps(r[j], p);
      }
      if (rows) zero_p_bf16_outside(*rows, i0 + j, lo, hi);
    }
  }
  const __m512 l = _mm512_mask_loadu_ps(_mm512_setzero_ps(), lanes, b.l + i0);
  _mm512_mask_storeu_ps(b.l + i0, live, _mm512_add_ps(_mm512_mul_ps(l, alpha), reduce16<AddOp>(r)));
  _mm512_mask_storeu_ps(b.mx + i0, live, mnew);
  _mm512_mask_storeu_ps(alphas + i0, lanes, alpha);
}

}  // namespace slab::kern::detail
