// AVX-512 block of SLAB attention: K transposed per block, scores and P·V by vdpbf16ps with Q
// and P split into BF16 hi + lo (see attention.h), or on FP32 FMAs with K and V widened in
// registers (fp32_products), masked online softmax with a vectorised exp.
// Every function carries the target attribute (see linear_bf16_avx512.cpp); only called after
// cpuid said avx512_bf16.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention.h"
#include "kernels/attention_avx512_ops.h"
#include "kernels/attention_block.h"
#include "kernels/exp_avx512.h"

namespace slab::kern::detail {
namespace {

// P·V with vdpbf16ps. Two V rows t, t + 1 interleaved by unpacklo/hi_epi16 give, per 32
// elements of head_dim, the pairs (v[t][d], v[t + 1][d]) that vdpbf16ps multiplies by a
// broadcast pair (p_t, p_t+1), with P split into BF16 hi + lo like Q. The interleave permutes
// head_dim inside a chunk: accumulator A lane 4k + j holds d = 8k + j, B lane 4k + j holds
// d = 8k + 4 + j (k = 128-bit lane); o is permuted in at the start and back at the end.
SLAB_ATTN_AVX512 inline __m512i idx_a() {
  return _mm512_setr_epi32(0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27);
}
SLAB_ATTN_AVX512 inline __m512i idx_b() {
  return _mm512_setr_epi32(4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30, 31);
}
// Natural d 0..15 / 16..31 from A, B.
SLAB_ATTN_AVX512 inline __m512i idx_n0() {
  return _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
}
SLAB_ATTN_AVX512 inline __m512i idx_n1() {
  return _mm512_setr_epi32(8, 9, 10, 11, 24, 25, 26, 27, 12, 13, 14, 15, 28, 29, 30, 31);
}

// Loads 32 BF16 of V row t at chunk c (16 when head_dim ends mid-chunk), zero outside [lo, hi).
template <int NC>
SLAB_ATTN_AVX512 inline __m512i v_chunk(const bf16_t* v, int t, int c, int lo, int hi) {
  if (t < lo || t >= hi) return _mm512_setzero_si512();
  const bf16_t* src = v + static_cast<size_t>(t) * (16 * NC) + 32 * c;
  if (2 * c + 1 < NC) return _mm512_loadu_si512(src);
  return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)));
}

// o[i + j] = alpha[i + j] o[i + j] + sum_{t in [lo, hi)} s[i + j][t] v[t] for j < VB.
template <int NC, int VB, bool SplitP>
SLAB_ATTN_AVX512 void pv(const AttnBlock& b, int i, int lo, int hi, const float* alphas) {
  constexpr int hd = 16 * NC;
  constexpr int NP = (NC + 1) / 2;
  // P as BF16 hi/lo pairs: dword u of ph[j] = (p[2u], p[2u + 1]).
  alignas(64) uint32_t ph[VB][kAttnMaxBlockSize / 2], pl[VB][kAttnMaxBlockSize / 2];
  const int t0 = lo & ~1;
  const int written_lo = lo & ~15;  // s holds P (zeros outside [lo, hi)) on these groups only
  for (int j = 0; j < VB; ++j) {
    const float* s = b.s + static_cast<size_t>(i + j) * static_cast<size_t>(b.lds);
    for (int g = lo & ~31; g < hi; g += 32) {
      const __m512 f0 = g >= written_lo ? _mm512_loadu_ps(s + g) : _mm512_setzero_ps();
      const __m512 f1 = g + 16 < hi ? _mm512_loadu_ps(s + g + 16) : _mm512_setzero_ps();
      const BF16Parts parts = split_bf16(f0, f1, SplitP);
      _mm512_store_si512(&ph[j][g / 2], parts.hi);
      if constexpr (SplitP) _mm512_store_si512(&pl[j][g / 2], parts.lo);
    }
  }

  __m512 acc[VB][NP][2];
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    const __m512 va = _mm512_set1_ps(alphas[i + j]);
    const float* op = b.o + static_cast<size_t>(i + j) * hd;
#pragma GCC unroll 8
    for (int c = 0; c < NP; ++c) {
      const __m512 n0 = _mm512_loadu_ps(op + 32 * c);
      const __m512 n1 = 2 * c + 1 < NC ? _mm512_loadu_ps(op + 32 * c + 16) : _mm512_setzero_ps();
      acc[j][c][0] = _mm512_mul_ps(va, _mm512_permutex2var_ps(n0, idx_a(), n1));
      acc[j][c][1] = _mm512_mul_ps(va, _mm512_permutex2var_ps(n0, idx_b(), n1));
    }
  }
  for (int t = t0; t < hi; t += 2) {
#pragma GCC unroll 8
    for (int c = 0; c < NP; ++c) {
      const __m512i va = v_chunk<NC>(b.vraw, t, c, lo, hi);
      const __m512i vb = v_chunk<NC>(b.vraw, t + 1, c, lo, hi);
      const __m512bh il = (__m512bh)_mm512_unpacklo_epi16(va, vb);
      const __m512bh ih = (__m512bh)_mm512_unpackhi_epi16(va, vb);
#pragma GCC unroll 4
      for (int j = 0; j < VB; ++j) {
        const __m512bh phj = (__m512bh)_mm512_set1_epi32(static_cast<int>(ph[j][t / 2]));
        acc[j][c][0] = _mm512_dpbf16_ps(acc[j][c][0], phj, il);
        acc[j][c][1] = _mm512_dpbf16_ps(acc[j][c][1], phj, ih);
        if constexpr (SplitP) {
          const __m512bh plj = (__m512bh)_mm512_set1_epi32(static_cast<int>(pl[j][t / 2]));
          acc[j][c][0] = _mm512_dpbf16_ps(acc[j][c][0], plj, il);
          acc[j][c][1] = _mm512_dpbf16_ps(acc[j][c][1], plj, ih);
        }
      }
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    float* op = b.o + static_cast<size_t>(i + j) * hd;
#pragma GCC unroll 8
    for (int c = 0; c < NP; ++c) {
      _mm512_storeu_ps(op + 32 * c, _mm512_permutex2var_ps(acc[j][c][0], idx_n0(), acc[j][c][1]));
      if (2 * c + 1 < NC) {
        _mm512_storeu_ps(op + 32 * c + 16, _mm512_permutex2var_ps(acc[j][c][0], idx_n1(), acc[j][c][1]));
      }
    }
  }
}

inline uint32_t load_u32(const float* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// How a block multiplies. dot_split / dot: vdpbf16ps on Q's BF16 hi + lo parts and P split so
// too, or P rounded to BF16 (round_p_to_bf16). fp32 (AttnBlock::fp32_products): where vdpbf16ps
// issues at a quarter of the 512-bit FMA's rate (the Intel cores LinearBlocking::fp32_products
// is set for), its two instructions per Q pair made decode attention compute-bound at ~35 % of
// the read bandwidth on two Xeon cores. There each BF16 K pair is widened in registers (the even
// dim: the dword shifted left 16; the odd dim: its high half kept) and multiplied by the FP32 Q
// elements, exact products summed in FP32, even and odd dims in chains of their own; V rows are
// widened as they are read and multiplied by P (rounded to BF16 first where round_p_to_bf16
// says so). Each form computes every vector one way whatever its item holds. The fp32 form
// prefetches a later block into L2, not L1: on two Xeon cores decode attention read 1.05-1.12x
// faster so (a core's 16 L1 fill buffers had capped its DRAM reads in flight); Zen, which
// preferred L1 for the dot products, never runs it. On two Xeon cores
// (bench/results/2026-12-01-xeon-2c-attention-fp32) a TinyLlama decode block in L1 ran 1.68x
// faster than on the dot products, decode attention from DRAM 1.13-1.40x, prefill 1.64-1.69x.
enum class Products { dot_split, dot, fp32 };

// Scores of VS vectors from i0 over G token groups from gi: 2·G·VS accumulator chains (Q hi and
// lo apart, or the even and odd dims apart), each K column loaded once for all VS vectors.
template <int NC, int VS, int G, Products P>
SLAB_ATTN_AVX512 void score_groups(const AttnBlock& b, KTiles kts, int i0, int gi) {
  constexpr int NP = (NC + 1) / 2;
  constexpr int hd = 16 * NC;
  constexpr int ncols = 8 * NC;  // BF16 pairs of head_dim
  constexpr int hint = P == Products::fp32 ? _MM_HINT_T1 : _MM_HINT_T0;
  __m512 acc[VS][G][2];
#pragma GCC unroll 4
  for (int v = 0; v < VS; ++v) {
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) acc[v][g][0] = acc[v][g][1] = _mm512_setzero_ps();
  }
  const float* q =
      P == Products::fp32 ? b.q + static_cast<size_t>(i0) * hd : b.qhl + static_cast<size_t>(i0) * (32 * NP);
  const float* kt = kts.base + static_cast<size_t>(gi) * kts.group_cols * 16;
  // The prefetch cursor in registers: through b.pf_next GCC reloads and stores it (and the
  // block's fields) on every column.
  const int pf_lines = b.pf_lines, pf_end = 2 * pf_lines;
  const char* const pf_k = b.pf_k;
  const char* const pf_v = b.pf_v;
  auto line = [&](int l) { return l < pf_lines ? pf_k + 64 * l : pf_v + 64 * (l - pf_lines); };
  int pf = *b.pf_next;
  const __m512i odd_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int c = 0; c < ncols; ++c) {
    if (pf < pf_end) {
      _mm_prefetch(line(pf), static_cast<_mm_hint>(hint));
      if (pf + 1 < pf_end) _mm_prefetch(line(pf + 1), static_cast<_mm_hint>(hint));
      pf += 2;
    }
    __m512i k[G];
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) k[g] = _mm512_loadu_si512(kt + (static_cast<size_t>(g) * kts.group_cols + c) * 16);
    if constexpr (P == Products::fp32) {
      __m512 k_even[G], k_odd[G];
#pragma GCC unroll 2
      for (int g = 0; g < G; ++g) {
        k_even[g] = _mm512_castsi512_ps(_mm512_slli_epi32(k[g], 16));
        k_odd[g] = _mm512_castsi512_ps(_mm512_and_si512(k[g], odd_mask));
      }
#pragma GCC unroll 4
      for (int v = 0; v < VS; ++v) {
        const __m512 q_even = _mm512_set1_ps(q[static_cast<size_t>(v) * hd + 2 * c]);
        const __m512 q_odd = _mm512_set1_ps(q[static_cast<size_t>(v) * hd + 2 * c + 1]);
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          acc[v][g][0] = _mm512_fmadd_ps(q_even, k_even[g], acc[v][g][0]);
          acc[v][g][1] = _mm512_fmadd_ps(q_odd, k_odd[g], acc[v][g][1]);
        }
      }
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < VS; ++v) {
        const float* qv = q + static_cast<size_t>(v) * (32 * NP);
        const __m512bh qh = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(qv + c)));
        const __m512bh ql = (__m512bh)_mm512_set1_epi32(static_cast<int>(load_u32(qv + 16 * NP + c)));
#pragma GCC unroll 2
        for (int g = 0; g < G; ++g) {
          acc[v][g][0] = _mm512_dpbf16_ps(acc[v][g][0], qh, (__m512bh)k[g]);
          acc[v][g][1] = _mm512_dpbf16_ps(acc[v][g][1], ql, (__m512bh)k[g]);
        }
      }
    }
  }
  *b.pf_next = std::min(pf, pf_end);
  const __m512 neg_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
#pragma GCC unroll 4
  for (int v = 0; v < VS; ++v) {
    const int lo = b.lo[i0 + v], hi = b.hi[i0 + v];
    float* s = b.s + static_cast<size_t>(i0 + v) * static_cast<size_t>(b.lds);
#pragma GCC unroll 2
    for (int g = 0; g < G; ++g) {
      const int t = 16 * (gi + g);
      const __m512 sv = _mm512_add_ps(acc[v][g][0], acc[v][g][1]);
      _mm512_storeu_ps(s + t, _mm512_mask_blend_ps(range_mask(t, lo, hi), neg_inf, sv));
    }
  }
}

template <int NC, int VS, Products P>
SLAB_ATTN_AVX512 void scores(const AttnBlock& b, KTiles kts, int i0) {
  int lo = 1 << 30, hi = -1;
  for (int v = 0; v < VS; ++v) {
    if (b.lo[i0 + v] >= b.hi[i0 + v]) continue;
    lo = std::min(lo, b.lo[i0 + v]);
    hi = std::max(hi, b.hi[i0 + v]);
  }
  int gi = lo / 16;
  for (; 16 * (gi + 1) < hi; gi += 2) score_groups<NC, VS, 2, P>(b, kts, i0, gi);
  if (16 * gi < hi) score_groups<NC, VS, 1, P>(b, kts, i0, gi);
}

// P of a vector's tokens [lo, hi) rounded to BF16 in place (to nearest even, as split_bf16
// rounds it for vdpbf16ps).
SLAB_ATTN_AVX512 inline void round_p_row(float* s, int lo, int hi) {
  for (int t = lo & ~15; t < hi; t += 16) {
    const __m256i h = (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(s + t));
    _mm512_storeu_ps(s + t, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
  }
}

// pv's update in FP32: each V row widened once for the VB vectors, VB·NC accumulator chains.
template <int NC, int VB>
SLAB_ATTN_AVX512 void pv_fp32(const AttnBlock& b, int i, int lo, int hi, const float* alphas) {
  constexpr int hd = 16 * NC;
  __m512 acc[VB][NC];
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    const __m512 va = _mm512_set1_ps(alphas[i + j]);
    const float* op = b.o + static_cast<size_t>(i + j) * hd;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) acc[j][c] = _mm512_mul_ps(va, _mm512_loadu_ps(op + 16 * c));
  }
  const auto lds = static_cast<size_t>(b.lds);
  const float* p = b.s + static_cast<size_t>(i) * lds;
  for (int t = lo; t < hi; ++t) {
    const bf16_t* vt = b.vraw + static_cast<size_t>(t) * hd;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) {
      const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(vt + 16 * c));
      const __m512 v = _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(raw), 16));
#pragma GCC unroll 4
      for (int j = 0; j < VB; ++j) acc[j][c] = _mm512_fmadd_ps(_mm512_set1_ps(p[j * lds + t]), v, acc[j][c]);
    }
  }
#pragma GCC unroll 4
  for (int j = 0; j < VB; ++j) {
    float* op = b.o + static_cast<size_t>(i + j) * hd;
#pragma GCC unroll 16
    for (int c = 0; c < NC; ++c) _mm512_storeu_ps(op + 16 * c, acc[j][c]);
  }
}

template <int NC, int VB, Products P>
SLAB_ATTN_AVX512 void pv_any(const AttnBlock& b, int i, int lo, int hi, const float* alphas) {
  if constexpr (P == Products::fp32) {
    pv_fp32<NC, VB>(b, i, lo, hi, alphas);
  } else {
    pv<NC, VB, P == Products::dot_split>(b, i, lo, hi, alphas);
  }
}

template <int NC, Products P>
SLAB_ATTN_AVX512 void block_impl(const AttnBlock& b) {
  constexpr int VB = NC <= 4 ? 4 : NC <= 8 ? 2 : 1;  // P·V: VB·NC accumulators
  float alphas[kAttnMaxVectors];

  const auto [t_lo, t_hi] = visible_tokens(b);
  if (t_hi < 0) return;
  const KTiles kts = block_k_tiles<NC>(b, t_lo, t_hi);
  for (int i = 0; i < b.m; i += 4) {
    switch (std::min(4, b.m - i)) {
      case 1: scores<NC, 1, P>(b, kts, i); break;
      case 2: scores<NC, 2, P>(b, kts, i); break;
      case 3: scores<NC, 3, P>(b, kts, i); break;
      default: scores<NC, 4, P>(b, kts, i); break;
    }
  }
  // Whatever is left of the prefetch (blocks of few vectors or tokens) goes out after the scores.
  // Sent before the last chunk's scores instead, half a decode block's lines went out at once,
  // and one Zen 5 thread ran 1.09-1.25x slower (2026-11-27-epyc-zen5-2c-avx2-attention-prefetch).
  *b.pf_next = P == Products::fp32 ? prefetch_stream<2>(b, *b.pf_next, 2 * b.pf_lines)
                                   : prefetch_stream(b, *b.pf_next, 2 * b.pf_lines);

  for (int i = 0; i < b.m; i += 16) softmax16<false>(b, i, std::min(16, b.m - i), alphas);
  if (P == Products::fp32 && b.round_p_to_bf16) {
    for (int i = 0; i < b.m; ++i) {
      if (b.lo[i] < b.hi[i]) round_p_row(b.s + static_cast<size_t>(i) * static_cast<size_t>(b.lds), b.lo[i], b.hi[i]);
    }
  }

  // P·V, VB vectors with the same token range at a time: each V row is loaded once for all of
  // them and VB·NC independent accumulator chains hide the FMA latency.
  for (int i = 0; i < b.m;) {
    const int lo = b.lo[i], hi = b.hi[i];
    int n = 1;
    while (n < VB && i + n < b.m && b.lo[i + n] == lo && b.hi[i + n] == hi) ++n;
    if (lo < hi) {
      if (n == VB) {
        pv_any<NC, VB, P>(b, i, lo, hi, alphas);
      } else {
        for (int j = 0; j < n; ++j) pv_any<NC, 1, P>(b, i + j, lo, hi, alphas);
      }
    }
    i += n;
  }
}

template <Products P>
void block_for_head_dim(const AttnBlock& b) {
  switch (b.hd / 16) {
    case 1: return block_impl<1, P>(b);
    case 2: return block_impl<2, P>(b);
    case 3: return block_impl<3, P>(b);
    case 4: return block_impl<4, P>(b);
    case 5: return block_impl<5, P>(b);
    case 6: return block_impl<6, P>(b);
    case 7: return block_impl<7, P>(b);
    case 8: return block_impl<8, P>(b);
    case 9: return block_impl<9, P>(b);
    case 10: return block_impl<10, P>(b);
    case 11: return block_impl<11, P>(b);
    case 12: return block_impl<12, P>(b);
    case 13: return block_impl<13, P>(b);
    case 14: return block_impl<14, P>(b);
    case 15: return block_impl<15, P>(b);
    case 16: return block_impl<16, P>(b);
    default: return attn_block_scalar(b);
  }
}

}  // namespace

void attn_block_avx512(const AttnBlock& b) {
  if (b.fp32_products) return block_for_head_dim<Products::fp32>(b);
  if (b.round_p_to_bf16) return block_for_head_dim<Products::dot>(b);
  block_for_head_dim<Products::dot_split>(b);
}

SLAB_ATTN_AVX512 void stage_q_hilo_avx512(float* dst, const float* q, int m, int hd) {
  const int nc = hd / 16, np = (nc + 1) / 2;
  for (int v = 0; v < m; ++v) {
    const float* qv = q + static_cast<size_t>(v) * hd;
    float* d = dst + static_cast<size_t>(v) * 32 * np;
    for (int c = 0; c < np; ++c) {
      const __m512 f0 = _mm512_loadu_ps(qv + 32 * c);
      const __m512 f1 = 2 * c + 1 < nc ? _mm512_loadu_ps(qv + 32 * c + 16) : _mm512_setzero_ps();
      const BF16Parts parts = split_bf16(f0, f1, true);
      _mm512_storeu_si512(d + 16 * c, parts.hi);
      _mm512_storeu_si512(d + 16 * (np + c), parts.lo);
    }
  }
}

}  // namespace slab::kern::detail
