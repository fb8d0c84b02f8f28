// AVX2+FMA tile of the BF16 linear kernel for x86-64 CPUs without AVX-512 BF16 (same packed
// layout). A 32-bit lane of a packed k-pair holds (w[k], w[k+1]) of one column: shifting left by
// 16 gives w[k] as FP32, masking the low half gives w[k+1]; two FMAs per 8 columns. Compiled per
// function for avx2/fma; only called after cpuid said so.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/linear_bf16_tile.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// Decode (M <= 8, no FP32 block): R rows (1 or 2) × 32 columns of one panel over the chunk's
// pairs [0, pairs), x already FP32 in xf (ldxf floats a row, 0 past K) from M = 3 on. M = 1 and
// 2 read their BF16 activations directly: with them widened into xf first they ran 8-10 %
// slower at ~58 GB/s on Zen 4 (memory-bound there; the widening pass stalls the stream). Per pair the 2R
// activations stay in registers and each 8-column weight vector is widened right before its
// FMAs, so 8 accumulators, 4 activations and 2 temporaries fit the 16 registers. Widening all
// four vectors first and broadcasting each activation from BF16 (a scalar shift per element)
// spilled to the stack and ran M = 4..8 at 38-40 % of the FMA peak. acc_io holds the tile's sums,
// ldacc floats a row. pf_lines 64-byte lines from pf are prefetched into L2 over the pairs, a few
// every 8 pairs (decode_widened gives each pass its share of the next chunk).
template <int R>
SLAB_AVX2 void rows_panel(const Tile& t, const float* xf, size_t ldxf, int row0, int panel, int pair0, int pairs,
                          float* acc_io, size_t ldacc, const char* pf = nullptr, int pf_lines = 0) {
  __m256 acc[R][4];
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[r][j] = _mm256_loadu_ps(acc_io + r * ldacc + panel * 32 + 8 * j);
  }
  const bf16_t* b = t.b + static_cast<size_t>(panel) * t.panel_stride + 64 * static_cast<size_t>(pair0);
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const float* x = xf ? xf + static_cast<size_t>(row0) * ldxf : nullptr;
  const int pf_per_8 = pf_lines > 0 ? (8 * pf_lines + pairs - 1) / pairs : 0;
  int pf_next = 0;
  for (int p = 0; p < pairs; ++p) {
    if ((p & 7) == 0) {
      for (const int e = std::min(pf_lines, pf_next + pf_per_8); pf_next < e; ++pf_next) {
        _mm_prefetch(pf + 64 * static_cast<size_t>(pf_next), _MM_HINT_T1);
      }
    }
    __m256 x0[R], x1[R];
#pragma GCC unroll 2
    for (int r = 0; r < R; ++r) {
      if (!xf) {
        const bf16_t* xr = t.a + static_cast<size_t>(row0 + r) * t.lda + 2 * static_cast<size_t>(pair0 + p);
        x0[r] = _mm256_set1_ps(bf16_to_f32(xr[0]));
        x1[r] = _mm256_set1_ps(pair0 + p < t.n_pairs ? bf16_to_f32(xr[1]) : 0.0f);
      } else {
        x0[r] = _mm256_broadcast_ss(x + static_cast<size_t>(r) * ldxf + 2 * p);
        x1[r] = _mm256_broadcast_ss(x + static_cast<size_t>(r) * ldxf + 2 * p + 1);
      }
    }
    if constexpr (R == 1) {
      // One row: registers to spare, so all four vectors are loaded and widened first.
      __m256 even[4], odd[4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i w =
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * static_cast<size_t>(p) + 16 * j));
        even[j] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
        odd[j] = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
      }
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        acc[0][j] = _mm256_fmadd_ps(x0[0], even[j], acc[0][j]);
        acc[0][j] = _mm256_fmadd_ps(x1[0], odd[j], acc[0][j]);
      }
      continue;
    }
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * static_cast<size_t>(p) + 16 * j));
      const __m256 even = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(x0[r], even, acc[r][j]);
      const __m256 odd = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
#pragma GCC unroll 2
      for (int r = 0; r < R; ++r) acc[r][j] = _mm256_fmadd_ps(x1[r], odd, acc[r][j]);
    }
  }
#pragma GCC unroll 2
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(acc_io + r * ldacc + panel * 32 + 8 * j, acc[r][j]);
  }
}

// Decode of one row over two panels at once (panel, panel + 1), pairs [pair0, pair0 + pairs):
// the two streams advance together, a pair of each per step (decode_streams says why). x is
// read as BF16 (one row: no widened copy); 8 accumulators, 2 activations and the widened vector.
SLAB_AVX2 void row_panel_pair(const Tile& t, int panel, int pair0, int pairs, float* acc_io) {
  __m256 acc[2][4];
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[q][j] = _mm256_loadu_ps(acc_io + (panel + q) * 32 + 8 * j);
  }
  const bf16_t* b0 = t.b + static_cast<size_t>(panel) * t.panel_stride + 64 * static_cast<size_t>(pair0);
  const bf16_t* b1 = b0 + t.panel_stride;
  const bf16_t* x = t.a + 2 * static_cast<size_t>(pair0);
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int p = 0; p < pairs; ++p) {
    const __m256 x0 = _mm256_set1_ps(bf16_to_f32(x[2 * p]));
    const __m256 x1 = _mm256_set1_ps(pair0 + p < t.n_pairs ? bf16_to_f32(x[2 * p + 1]) : 0.0f);
#pragma GCC unroll 2
    for (int q = 0; q < 2; ++q) {
      const bf16_t* b = (q == 0 ? b0 : b1) + 64 * static_cast<size_t>(p);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 16 * j));
        acc[q][j] = _mm256_fmadd_ps(x0, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)), acc[q][j]);
        acc[q][j] = _mm256_fmadd_ps(x1, _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask)), acc[q][j]);
      }
    }
  }
#pragma GCC unroll 2
  for (int q = 0; q < 2; ++q) {
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(acc_io + (panel + q) * 32 + 8 * j, acc[q][j]);
  }
}

// The large-M form: the tile's rows are converted to FP32 once (xf) and the K block's weights
// are read as FP32 (wf, shared by every row tile of the group), so the inner loop is plain FP32:
// per k, 2 weight loads and R broadcasts for 2R FMAs over 16 columns, no shifts or masks (those
// took a third of the issue slots of rows_panel, whose conversion served 2 rows).
//
// Fill: this row block is the group's first and writes wf as it goes, converting each k-pair of
// the BF16 panels in registers, so the conversion's loads and stores overlap the FMAs. A separate
// conversion pass over the block, before any tile, cost 22 % of M = 16's time on Zen 4 (its 128 KB
// of stores and its weight reads ran alone); 9 % at M = 64.
//
// The tile's prefetch lines (the next K block) are issued a few per 8 k. Only the first row block
// issues them (pf_lines 0 for the rest).
template <int R, bool Fill>
SLAB_AVX2 void block_rows(const Tile& t, const float* xf, size_t ldxf, int row0, int kk, int pf_lines) {
  const int cols = t.np * 32;
  const size_t ldw = static_cast<size_t>(cols);
  constexpr int kPfStep = 8;
  const char* pf0 = reinterpret_cast<const char*>(t.pf);
  const size_t pf1 = (t.np > 1 ? t.panel_stride : 0) * sizeof(bf16_t);
  const int slots = (cols / 16) * ((kk + kPfStep - 1) / kPfStep);
  const int pf_per_slot = pf_lines > 0 ? (pf_lines + slots - 1) / slots : 0;
  int pf_next = 0;
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  for (int c0 = 0; c0 < cols; c0 += 16) {
    // Every loop over acc is unrolled so that GCC keeps the array in registers (indexed by a
    // variable it stored all 12 accumulators to the stack on every k: 31 % of the FMA peak).
    __m256 acc[R][2];
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
#pragma GCC unroll 2
      for (int j = 0; j < 2; ++j) {
        acc[r][j] =
            t.load_c ? _mm256_loadu_ps(t.c + static_cast<size_t>(row0 + r) * t.ldc + c0 + 8 * j) : _mm256_setzero_ps();
      }
    }
    // Fill: the strip's 8-column pair vectors in the BF16 panel (a k-pair of 32 columns is 64
    // elements; the strip starts 2·(c0 mod 32) elements in).
    const bf16_t* src = t.b + static_cast<size_t>(c0 / 32) * t.panel_stride + 2 * (c0 % 32);
    float* fill = t.wf_fill + c0;
    const float* w = t.wf + c0;
    const float* x = xf + static_cast<size_t>(row0) * ldxf;
    for (int k0 = 0; k0 < kk; k0 += kPfStep) {
      for (const int e = std::min(pf_next + pf_per_slot, pf_lines); pf_next < e; ++pf_next) {
        _mm_prefetch(pf0 + 64 * static_cast<size_t>(pf_next), _MM_HINT_T1);
        if (pf1) _mm_prefetch(pf0 + pf1 + 64 * static_cast<size_t>(pf_next), _MM_HINT_T1);
      }
      for (int k = k0, k1 = std::min(kk, k0 + kPfStep); k < k1; ++k) {
        __m256 w0, w1;
        if constexpr (Fill) {
          // k even: the pair's low halves shifted up; k odd: the high halves masked.
          const bf16_t* pair = src + 32 * static_cast<size_t>(k & ~1);
          const __m256i r0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair));
          const __m256i r1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pair + 16));
          w0 = _mm256_castsi256_ps((k & 1) ? _mm256_and_si256(r0, hi_mask) : _mm256_slli_epi32(r0, 16));
          w1 = _mm256_castsi256_ps((k & 1) ? _mm256_and_si256(r1, hi_mask) : _mm256_slli_epi32(r1, 16));
          _mm256_storeu_ps(fill + static_cast<size_t>(k) * ldw, w0);
          _mm256_storeu_ps(fill + static_cast<size_t>(k) * ldw + 8, w1);
        } else {
          w0 = _mm256_loadu_ps(w + static_cast<size_t>(k) * ldw);
          w1 = _mm256_loadu_ps(w + static_cast<size_t>(k) * ldw + 8);
        }
#pragma GCC unroll 6
        for (int r = 0; r < R; ++r) {
          const __m256 xv = _mm256_broadcast_ss(x + static_cast<size_t>(r) * ldxf + k);
          acc[r][0] = _mm256_fmadd_ps(xv, w0, acc[r][0]);
          acc[r][1] = _mm256_fmadd_ps(xv, w1, acc[r][1]);
        }
      }
    }
#pragma GCC unroll 6
    for (int r = 0; r < R; ++r) {
      const int row = row0 + r;
      if (!t.epilogue) {
        _mm256_storeu_ps(t.c + static_cast<size_t>(row) * t.ldc + c0, acc[r][0]);
        _mm256_storeu_ps(t.c + static_cast<size_t>(row) * t.ldc + c0 + 8, acc[r][1]);
        continue;
      }
      const int n_valid = std::min(16, t.n_valid - c0);
      if (n_valid <= 0) continue;
      alignas(32) float sums[16];
      _mm256_store_ps(sums, acc[r][0]);
      _mm256_store_ps(sums + 8, acc[r][1]);
      const size_t o = static_cast<size_t>(row) * t.ldo + c0;
      finish_row(sums, n_valid, t.bias ? t.bias + c0 : nullptr,
                 t.residual ? t.residual + static_cast<size_t>(row) * t.ldr + c0 : nullptr,
                 t.out_f32 ? t.out_f32 + o : nullptr, t.out_bf16 ? t.out_bf16 + o : nullptr);
    }
  }
}

// Rows [row, row + R) of the tile: the first row block fills wf when the tile is asked to.
template <int R>
SLAB_AVX2 void run_block(const Tile& t, const float* xf, size_t ldxf, int row, int kk) {
  if (row == 0 && t.wf_fill) {
    block_rows<R, true>(t, xf, ldxf, row, kk, t.pf_lines);
  } else {
    block_rows<R, false>(t, xf, ldxf, row, kk, row == 0 ? t.pf_lines : 0);
  }
}

// x rows of the tile to FP32 for pairs [pair0, pair0 + pairs), k-major per row from xf[0]; the
// high element of a half pair (past K) is 0.
SLAB_AVX2 void convert_rows(const Tile& t, int pair0, int pairs, float* xf, size_t ldxf) {
  const bool half = t.half_pair && pair0 + pairs == t.n_pairs + 1;
  const int n = 2 * (pairs - (half ? 1 : 0));
  for (int r = 0; r < t.mr; ++r) {
    const bf16_t* src = t.a + static_cast<size_t>(r) * t.lda + 2 * static_cast<size_t>(pair0);
    float* dst = xf + static_cast<size_t>(r) * ldxf;
    int k = 0;
    for (; k + 8 <= n; k += 8) {
      const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + k));
      _mm256_storeu_ps(dst + k, _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16)));
    }
    for (; k < n; ++k) dst[k] = bf16_to_f32(src[k]);
    if (half) {
      dst[n] = bf16_to_f32(src[n]);
      dst[n + 1] = 0.0f;
    }
  }
}

void tile_block_avx2(const Tile& t) {
  constexpr int kMaxPairs = kFp32MaxBlockPairs;  // the driver's K block is at most this
  alignas(32) float xf[8 * 2 * kMaxPairs];
  const size_t ldxf = 2 * kMaxPairs;
  const int kk = 2 * (t.n_pairs + (t.half_pair ? 1 : 0));
  convert_rows(t, 0, kk / 2, xf, ldxf);
  int row = 0;
  for (; row + 6 <= t.mr; row += 6) run_block<6>(t, xf, ldxf, row, kk);
  switch (t.mr - row) {
    case 5: run_block<5>(t, xf, ldxf, row, kk); break;
    case 4: run_block<4>(t, xf, ldxf, row, kk); break;
    case 3: run_block<3>(t, xf, ldxf, row, kk); break;
    case 2: run_block<2>(t, xf, ldxf, row, kk); break;
    case 1: run_block<1>(t, xf, ldxf, row, kk); break;
    default: break;
  }
}

// Decode of 1 or 2 rows over the tile's np panels (up to 4, linear_bf16.cpp's
// decode_tile_panels) as that many streams from memory: chunks of kStreamChunkPairs pairs, panel
// after panel (one row takes two panels in one loop), the sums carried in acc between chunks. One
// sequential stream does not reach a Zen 2 core's read bandwidth (17 GB/s, where four read 24-25).
// There one panel at a time over the whole of K ran M = 1 at 52-61 % of the bandwidth on one core
// and 57-74 % on two, prefetching 4 to 32 KB ahead or not; two panels in one loop 73-83 % on one
// core; four streams in chunks of 4 to 16 pairs 85-91 % and 87-97 %, batch-1 decode 1.50-1.57x /
// 1.14-1.36x
// (bench/results/2026-11-29-epyc-zen2-2c-avx2-decode-streams). Each column still sums its pairs
// in order: the same bits as one panel at a time.
constexpr int kStreamChunkPairs = 8;

SLAB_AVX2 void decode_streams(const Tile& t, float* acc, size_t ldacc) {
  const int pairs = t.n_pairs + (t.half_pair ? 1 : 0);
  for (int p0 = 0; p0 < pairs; p0 += kStreamChunkPairs) {
    const int pc = std::min(kStreamChunkPairs, pairs - p0);
    if (t.mr == 2) {
      for (int panel = 0; panel < t.np; ++panel) rows_panel<2>(t, nullptr, 0, 0, panel, p0, pc, acc, ldacc);
      continue;
    }
    int panel = 0;
    for (; panel + 2 <= t.np; panel += 2) row_panel_pair(t, panel, p0, pc, acc);
    if (panel < t.np) rows_panel<1>(t, nullptr, 0, 0, panel, p0, pc, acc, ldacc);
  }
}

// Decode of 3..8 rows: K in chunks whose x (FP32) and weights (both panels: 32 KB) stay in L1/L2
// while every pair of rows passes over them; sums carried in acc between chunks. Each pass (a
// pair of rows over one panel) prefetches its share of that panel's next chunk into L2, so that
// the next chunk's first pass finds it there. Prefetching 8 KB ahead of the first pass only (its
// form until 2026-11-29) left the later passes, three quarters of the work at M = 8, with no
// memory traffic beside them: on one Zen 2 core M = 3, 4 and 8 ran at 30-32, 38-40 and 49-51
// GFLOP/s, now 39-44, 49-57 and 62-66; on two, 55-59 / 66-76 / 89-99 against 64-75 / 79-99 /
// 114-128; batch-4 and batch-8 decode 1.28-1.31x on two cores
// (bench/results/2026-11-29-epyc-zen2-2c-avx2-batched-decode).
SLAB_AVX2 void decode_widened(const Tile& t, float* acc, size_t ldacc) {
  constexpr int kChunkPairs = 128;
  alignas(32) float xf[8 * 2 * kChunkPairs];
  constexpr size_t ldxf = 2 * kChunkPairs;
  const int pairs = t.n_pairs + (t.half_pair ? 1 : 0);
  const int passes = (t.mr + 1) / 2;  // per panel
  for (int p0 = 0; p0 < pairs; p0 += kChunkPairs) {
    const int pc = std::min(kChunkPairs, pairs - p0);
    convert_rows(t, p0, pc, xf, ldxf);
    const int next_lines = 2 * std::min(kChunkPairs, pairs - p0 - pc);  // a pair of a panel: 2 lines
    const int share = (next_lines + passes - 1) / passes;
    for (int row = 0; row < t.mr; row += 2) {
      const int from = std::min(next_lines, row / 2 * share);
      const int lines = std::min(share, next_lines - from);
      for (int panel = 0; panel < t.np; ++panel) {
        const char* pf = reinterpret_cast<const char*>(t.b + static_cast<size_t>(panel) * t.panel_stride +
                                                       64 * static_cast<size_t>(p0 + pc)) +
                         64 * static_cast<size_t>(from);
        if (t.mr - row >= 2) {
          rows_panel<2>(t, xf, ldxf, row, panel, p0, pc, acc + row * ldacc, ldacc, pf, lines);
        } else {
          rows_panel<1>(t, xf, ldxf, row, panel, p0, pc, acc + row * ldacc, ldacc, pf, lines);
        }
      }
    }
  }
}

// Round to nearest even, 8 floats to 8 BF16 lanes (the low 16 bits of each 32-bit lane): the
// bits of f32_to_bf16, NaNs quieted, denormals kept.
SLAB_AVX2 inline __m256i f32_to_bf16_lanes(__m256 v) {
  const __m256i bits = _mm256_castps_si256(v);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(bits, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_add_epi32(bits, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7fff)));
  const __m256i nan =
      _mm256_cmpgt_epi32(_mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
  const __m256i quiet = _mm256_or_si256(bits, _mm256_set1_epi32(0x400000));
  return _mm256_srli_epi32(_mm256_blendv_epi8(rounded, quiet, nan), 16);
}

}  // namespace

SLAB_AVX2 void convert_f32_to_bf16_avx2(bf16_t* dst, const float* src, size_t n) {
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i lo = f32_to_bf16_lanes(_mm256_loadu_ps(src + i));
    const __m256i hi = f32_to_bf16_lanes(_mm256_loadu_ps(src + i + 8));
    // packus works within 128-bit halves: lo0-3 hi0-3 lo4-7 hi4-7, put back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(lo, hi), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(dst + i), packed);
  }
  for (; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void tile_avx2(const Tile& t) {
  if (t.wf) {
    tile_block_avx2(t);
    return;
  }
  const int cols = t.np * 32;  // 1..4 panels for 1 or 2 rows, 1..2 for more
  const auto ldacc = static_cast<size_t>(cols);
  float acc[8 * 64];
  for (int r = 0; r < t.mr; ++r) {
    for (int c = 0; c < cols; ++c) acc[r * ldacc + c] = t.load_c ? t.c[static_cast<size_t>(r) * t.ldc + c] : 0.0f;
  }
  if (t.mr <= 2) {
    decode_streams(t, acc, ldacc);
  } else {
    decode_widened(t, acc, ldacc);
  }
  for (int r = 0; r < t.mr; ++r) {
    const float* sums = acc + r * ldacc;
    if (!t.epilogue) {
      std::copy(sums, sums + cols, t.c + static_cast<size_t>(r) * t.ldc);
      continue;
    }
    const size_t o = static_cast<size_t>(r) * t.ldo;
    finish_row(sums, t.n_valid, t.bias, t.residual ? t.residual + static_cast<size_t>(r) * t.ldr : nullptr,
               t.out_f32 ? t.out_f32 + o : nullptr, t.out_bf16 ? t.out_bf16 + o : nullptr);
  }
}

}  // namespace slab::kern::detail
