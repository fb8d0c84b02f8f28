// AVX-512 BF16 tile of the linear kernel (vdpbf16ps) and the FP32 -> BF16 row conversion.
// Every function here carries the target attribute instead of the file being compiled with
// -mavx512*: the rest of the binary stays baseline x86-64 and nothing from a shared header is
// compiled for AVX-512 by accident. Only called after cpuid said avx512_bf16 (see bf16.h Isa).
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/linear_bf16_tile.h"

// GCC 12 reports the _mm512_undefined_epi32() pass-through operand of the shift and widening
// intrinsics as "(may be) used uninitialized" once inlined into the FP32-product tile: a false
// positive (attention_avx512_ops.h has the same).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

namespace slab::kern::detail {
namespace {

inline uint32_t load_u32(const bf16_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

SLAB_AVX512_BF16 inline __mmask16 cols_mask(int valid) {
  if (valid >= 16) return 0xffff;
  if (valid <= 0) return 0;
  return static_cast<__mmask16>((1u << valid) - 1u);
}

// The tile's sums out: to the scratch c (more K blocks follow), or the epilogue: + bias,
// + residual, FP32 or BF16 out, columns past n_valid masked. acc[r][j] holds row r, columns
// 16j..16j+15 of the tile.
template <int MR, int NJ>
SLAB_AVX512_BF16 inline void store_or_finish(const Tile& t, const __m512 (&acc)[MR][NJ]) {
  if (!t.epilogue) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) {
        _mm512_storeu_ps(t.c + static_cast<size_t>(r) * t.ldc + 16 * j, acc[r][j]);
      }
    }
    return;
  }
  __mmask16 mask[NJ];
  __m512 bias[NJ];
#pragma GCC unroll 4
  for (int j = 0; j < NJ; ++j) {
    mask[j] = cols_mask(t.n_valid - 16 * j);
    bias[j] = t.bias ? _mm512_maskz_loadu_ps(mask[j], t.bias + 16 * j) : _mm512_setzero_ps();
  }
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) {
      if (mask[j] == 0) continue;
      const size_t col = 16 * static_cast<size_t>(j);
      __m512 v = t.bias ? _mm512_add_ps(acc[r][j], bias[j]) : acc[r][j];
      if (t.residual) {
        v = _mm512_add_ps(v, _mm512_maskz_loadu_ps(mask[j], t.residual + static_cast<size_t>(r) * t.ldr + col));
      }
      if (t.out_f32) {
        _mm512_mask_storeu_ps(t.out_f32 + static_cast<size_t>(r) * t.ldo + col, mask[j], v);
      } else {
        const __m256i h = (__m256i)_mm512_cvtneps_pbh(v);
        _mm256_mask_storeu_epi16(t.out_bf16 + static_cast<size_t>(r) * t.ldo + col, mask[j], h);
      }
    }
  }
}

// MR rows x (NP * 32) columns, accumulators in registers over the tile's pairs.
template <int MR, int NP>
SLAB_AVX512_BF16 void tile_impl(const Tile& t) {
  constexpr int NJ = 2 * NP;  // zmm per row
  __m512 acc[MR][NJ];
#pragma GCC unroll 8
  for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) {
      acc[r][j] = t.load_c ? _mm512_loadu_ps(t.c + static_cast<size_t>(r) * t.ldc + 16 * j) : _mm512_setzero_ps();
    }
  }
  const bf16_t* b0 = t.b;
  const bf16_t* b1 = t.b + (NP > 1 ? t.panel_stride : 0);
  const bf16_t* a = t.a;
  const size_t lda = t.lda;
  const int n = t.n_pairs;
  const char* pf0 = reinterpret_cast<const char*>(t.pf);
  const size_t pf1 = (NP > 1 ? t.panel_stride : 0) * sizeof(bf16_t);
  for (int p = 0; p < n; ++p) {
    for (int l = p * t.pf_per_pair, e = std::min(l + t.pf_per_pair, t.pf_lines); l < e; ++l) {
      _mm_prefetch(pf0 + 64 * static_cast<size_t>(l), _MM_HINT_T1);  // to L2: L1 keeps this block
      if constexpr (NP > 1) _mm_prefetch(pf0 + pf1 + 64 * static_cast<size_t>(l), _MM_HINT_T1);
    }
    __m512bh w[NJ];
    w[0] = (__m512bh)_mm512_loadu_si512(b0 + 64 * static_cast<size_t>(p));
    w[1] = (__m512bh)_mm512_loadu_si512(b0 + 64 * static_cast<size_t>(p) + 32);
    if constexpr (NP > 1) {
      w[2] = (__m512bh)_mm512_loadu_si512(b1 + 64 * static_cast<size_t>(p));
      w[3] = (__m512bh)_mm512_loadu_si512(b1 + 64 * static_cast<size_t>(p) + 32);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const __m512bh x = (__m512bh)_mm512_set1_epi32(
          static_cast<int>(load_u32(a + static_cast<size_t>(r) * lda + 2 * static_cast<size_t>(p))));
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], x, w[j]);
    }
  }
  if (t.half_pair) {  // last pair of an odd K: x's high half is zero (padded W is zero too)
    __m512bh w[NJ];
    w[0] = (__m512bh)_mm512_loadu_si512(b0 + 64 * static_cast<size_t>(n));
    w[1] = (__m512bh)_mm512_loadu_si512(b0 + 64 * static_cast<size_t>(n) + 32);
    if constexpr (NP > 1) {
      w[2] = (__m512bh)_mm512_loadu_si512(b1 + 64 * static_cast<size_t>(n));
      w[3] = (__m512bh)_mm512_loadu_si512(b1 + 64 * static_cast<size_t>(n) + 32);
    }
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
      const uint32_t lo = a[static_cast<size_t>(r) * lda + 2 * static_cast<size_t>(n)];
      const __m512bh x = (__m512bh)_mm512_set1_epi32(static_cast<int>(lo));
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], x, w[j]);
    }
  }
  store_or_finish<MR, NJ>(t, acc);
}

// The FP32-product form (LinearBlocking::fp32_products; t.wf set): R rows × NJ·16 columns.
// x's rows are widened to FP32 once per tile (xf), the K block's weights are read as FP32 from
// wf (k-major, NJ·16 floats a k), shared by every row tile of the group; per k, NJ weight loads
// and R broadcasts for R·NJ FMAs. Fill (the group's first row tile, wf_fill): the weights are
// widened from the BF16 pairs in registers as the tile computes and stored to wf, so the
// conversion overlaps the FMAs (the AVX2 block_rows says why not a separate pass). The tile
// issues its share of the next block's prefetch lines as the dot-product tile does. A pair's odd
// element is added first: that is vdpbf16ps's order (two FMAs, odd then even, each rounded;
// checked bit for bit on a Xeon; it flushes subnormals, which FMAs do not), so a row gets the
// decode tiles' bits whatever the M.
template <int R, int NJ, bool Fill>
SLAB_AVX512_BF16 void fma_rows(const Tile& t, const float* xf, size_t ldxf) {
  constexpr size_t ldw = 16 * NJ;
  __m512 acc[R][NJ];
#pragma GCC unroll 6
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < NJ; ++j) {
      acc[r][j] = t.load_c ? _mm512_loadu_ps(t.c + static_cast<size_t>(r) * t.ldc + 16 * j) : _mm512_setzero_ps();
    }
  }
  const int pairs = t.n_pairs + (t.half_pair ? 1 : 0);
  const char* pf0 = reinterpret_cast<const char*>(t.pf);
  const size_t pf1 = (NJ > 2 ? t.panel_stride : 0) * sizeof(bf16_t);
  const __m512i hi_mask = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  for (int p = 0; p < pairs; ++p) {
    for (int l = p * t.pf_per_pair, e = std::min(l + t.pf_per_pair, t.pf_lines); l < e; ++l) {
      _mm_prefetch(pf0 + 64 * static_cast<size_t>(l), _MM_HINT_T1);
      if constexpr (NJ > 2) _mm_prefetch(pf0 + pf1 + 64 * static_cast<size_t>(l), _MM_HINT_T1);
    }
#pragma GCC unroll 1
    for (int h = 1; h >= 0; --h) {  // k = 2p + h: odd, then even
      const size_t k = 2 * static_cast<size_t>(p) + h;
      __m512 w[NJ];
#pragma GCC unroll 4
      for (int j = 0; j < NJ; ++j) {
        if constexpr (Fill) {
          // Column vector j: panel j / 2, the pair's 32-bit lanes of columns 16 (j % 2) + 0..15.
          const bf16_t* src =
              t.b + static_cast<size_t>(j / 2) * t.panel_stride + 64 * static_cast<size_t>(p) + 32 * (j % 2);
          const __m512i raw = _mm512_loadu_si512(src);
          w[j] = _mm512_castsi512_ps(h ? _mm512_and_si512(raw, hi_mask) : _mm512_slli_epi32(raw, 16));
          _mm512_store_ps(t.wf_fill + k * ldw + 16 * j, w[j]);
        } else {
          w[j] = _mm512_load_ps(t.wf + k * ldw + 16 * j);
        }
      }
#pragma GCC unroll 6
      for (int r = 0; r < R; ++r) {
        const __m512 xv = _mm512_set1_ps(xf[static_cast<size_t>(r) * ldxf + k]);
#pragma GCC unroll 4
        for (int j = 0; j < NJ; ++j) acc[r][j] = _mm512_fmadd_ps(xv, w[j], acc[r][j]);
      }
    }
  }
  store_or_finish<R, NJ>(t, acc);
}

// x rows of the tile to FP32, k-major per row from xf[0]; the high element of a half pair (past
// K) is 0, as the padded weights are.
SLAB_AVX512_BF16 void widen_rows(const Tile& t, float* xf, size_t ldxf) {
  const int n = 2 * t.n_pairs + (t.half_pair ? 1 : 0);
  for (int r = 0; r < t.mr; ++r) {
    const bf16_t* src = t.a + static_cast<size_t>(r) * t.lda;
    float* dst = xf + static_cast<size_t>(r) * ldxf;
    for (int k = 0; k < n; k += 16) {
      const __mmask16 m = cols_mask(n - k);
      const __m256i h = _mm256_maskz_loadu_epi16(m, src + k);
      _mm512_storeu_ps(dst + k, _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)));
    }
    if (t.half_pair) dst[n] = 0.0f;
  }
}

template <int R, int NJ>
SLAB_AVX512_BF16 void fma_tile(const Tile& t, const float* xf, size_t ldxf) {
  if (t.wf_fill) {
    fma_rows<R, NJ, true>(t, xf, ldxf);
  } else {
    fma_rows<R, NJ, false>(t, xf, ldxf);
  }
}

using FmaFn = void (*)(const Tile&, const float*, size_t);
// [np - 1][mr - 1]
constexpr FmaFn kFmaTiles[2][6] = {
    {fma_tile<1, 2>, fma_tile<2, 2>, fma_tile<3, 2>, fma_tile<4, 2>, fma_tile<5, 2>, fma_tile<6, 2>},
    {fma_tile<1, 4>, fma_tile<2, 4>, fma_tile<3, 4>, fma_tile<4, 4>, fma_tile<5, 4>, fma_tile<6, 4>}};

SLAB_AVX512_BF16 void tile_fp32_products(const Tile& t) {
  constexpr size_t ldxf = 2 * kFp32MaxBlockPairs;
  alignas(64) float xf[6 * ldxf];
  widen_rows(t, xf, ldxf);
  kFmaTiles[t.np - 1][t.mr - 1](t, xf, ldxf);
}

using TileFn = void (*)(const Tile&);

// [np - 1][mr - 1]; 64-column tiles exist up to 6 rows (24 accumulators + 4 weights + 1 x).
constexpr TileFn kTiles[2][8] = {{tile_impl<1, 1>, tile_impl<2, 1>, tile_impl<3, 1>, tile_impl<4, 1>, tile_impl<5, 1>,
                                  tile_impl<6, 1>, tile_impl<7, 1>, tile_impl<8, 1>},
                                 {tile_impl<1, 2>, tile_impl<2, 2>, tile_impl<3, 2>, tile_impl<4, 2>, tile_impl<5, 2>,
                                  tile_impl<6, 2>, nullptr, nullptr}};

}  // namespace

void tile_avx512_bf16(const Tile& t) {
  if (t.wf) {  // the driver gives these tiles 6 rows at most (large_tile)
    tile_fp32_products(t);
    return;
  }
  if (t.np == 2 && t.mr > 6) {  // not produced by the driver; split rather than fail
    Tile top = t;
    top.mr = 6;
    kTiles[1][5](top);
    Tile rest = t;
    rest.mr = t.mr - 6;
    rest.a = t.a + 6 * t.lda;
    if (rest.c) rest.c = t.c + 6 * t.ldc;
    if (rest.out_f32) rest.out_f32 = t.out_f32 + 6 * t.ldo;
    if (rest.out_bf16) rest.out_bf16 = t.out_bf16 + 6 * t.ldo;
    if (rest.residual) rest.residual = t.residual + 6 * t.ldr;
    kTiles[1][rest.mr - 1](rest);
    return;
  }
  kTiles[t.np - 1][t.mr - 1](t);
}

SLAB_AVX512_BF16 void convert_f32_to_bf16_avx512(bf16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(src + i);
    const __m512 hi = _mm512_loadu_ps(src + i + 16);
    _mm512_storeu_si512(dst + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  for (; i < n; i += 16) {
    const __mmask16 m = cols_mask(static_cast<int>(n - i));
    const __m512 v = _mm512_maskz_loadu_ps(m, src + i);
    _mm256_mask_storeu_epi16(dst + i, m, (__m256i)_mm512_cvtneps_pbh(v));
  }
}

}  // namespace slab::kern::detail
