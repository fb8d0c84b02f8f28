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

// GCC 12 reports the _mm512_undefined_ps() pass-through operand inside the unpack and shuffle
// intrinsics as "may be used uninitialized" once inlined into the blocks: a false positive.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
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

// Online softmax of one vector over a block: the running max after its scores s[lo, hi) and
// alpha = e^(old max - new max), the factor its earlier sums take (0 when it has seen nothing
// yet). Lanes outside [lo, hi) of the 16-token groups are read as they are (Masked = false: they
// hold -inf already) or not at all (Masked).
struct SoftmaxStep {
  float mnew, alpha;
};
template <bool Masked>
SLAB_ATTN_AVX512 inline SoftmaxStep softmax_step(const float* s, int lo, int hi, float mold) {
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  __m512 vmax = neg_inf;
  for (int g = lo & ~15; g < hi; g += 16) {
    const __m512 v = Masked ? _mm512_mask_loadu_ps(neg_inf, range_mask(g, lo, hi), s + g) : _mm512_loadu_ps(s + g);
    vmax = _mm512_max_ps(vmax, v);
  }
  const float mnew = std::max(mold, _mm512_reduce_max_ps(vmax));
  const float alpha = mold == -std::numeric_limits<float>::infinity()
                          ? 0.0f
                          : _mm512_cvtss_f32(exp_avx512(_mm512_set1_ps(mold - mnew)));
  return {mnew, alpha};
}

}  // namespace slab::kern::detail
