// AVX-512 tiles of the quantized linear: decode (weight-only: codes expanded to BF16 in
// registers, vdpbf16ps) and batched (INT8 activations, vpdpbusd), and the INT8 activation rows.
// Target attributes per function, as in linear_bf16_avx512.cpp; only called after cpuid said
// avx512 bf16 + vnni (CpuFeatures::has_avx512_quant_kernels()).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_avx512_ops.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
namespace {

// ---- W8 decode: weight-only, vdpbf16ps ----
//
// A step's codes become two BF16 vectors of 16 lanes, each lane one column's pair of
// consecutive k ("phase" 0 and 1 of the four k a lane's x broadcast covers): codes -> FP32
// (vpmovzxbd, vcvtdq2ps) -> BF16 (vcvtne2ps2bf16), exact for 0..255; vector 0 holds columns
// 0..7, vector 1 columns 8..15. Lanes 2c' and 2c'+1 of a vector belong to one column, so the
// FP32 group sums are scaled per lane and the two phases added at the end. (W4 decode runs the
// batched tiles below on INT8 activations: linear_quant.h.)

// Column of each lane of vector 0 and vector 1.
constexpr int decode_lane_column(int vec, int lane) { return 8 * vec + lane / 2; }

SLAB_AVX512_QUANT inline __m512i lane_columns(int vec) {
  alignas(64) int32_t idx[16];
  for (int l = 0; l < 16; ++l) idx[l] = decode_lane_column(vec, l);
  return _mm512_load_si512(idx);
}

// Natural column c <- the even lane (phase 0 + phase 1 sum) holding it, in vector 0 (lanes
// 0..15) or vector 1 (lanes 16..31) of a permutex2var.
SLAB_AVX512_QUANT inline __m512i column_lanes() {
  alignas(64) int32_t idx[16];
  for (int c = 0; c < 16; ++c) {
    for (int vec = 0; vec < 2; ++vec) {
      for (int l = 0; l < 16; l += 2) {
        if (decode_lane_column(vec, l) == c) idx[c] = 16 * vec + l;
      }
    }
  }
  return _mm512_load_si512(idx);
}

// Software prefetch distance of the streaming tiles, per panel stream. A 64-byte step of one
// panel takes several cycles of work and latency, so the out-of-order window alone keeps only
// ~2 KB of loads in flight (the BF16 kernel's 256-byte steps keep ~10 KB). Measured
// single-threaded from DRAM (64 MB of W4 g128, M = 1, CPU time, shared machine, the former
// weight-only W4 tile): no prefetch 14-15 GB/s, 1 KB 21.6, 2 KB 23-24, 4 KB 25.6, 8 KB 22-23;
// 1, 2, 8 or 12 KB against 4 for the INT8 W4 tile: no clear difference.
constexpr int kDecodePrefetchBytes = 4096;

template <int MR, int NP>
SLAB_AVX512_QUANT void decode_tile(const QuantTile& t) {
  // All 8 rows in one pass expand the codes once: from L2, one core, M = 8 went from 12.9 GB/s
  // (two passes of 4 rows) to 22.8. From 5 rows the registers no longer hold the running totals
  // as well as the group sums, so those stay in L1 (one load and store per group).
  constexpr bool kTotalsInL1 = MR >= 5;
  __m512 total[kTotalsInL1 ? 1 : MR][NP][2], acc[MR][NP][2];
  alignas(64) float total_l1[kTotalsInL1 ? MR : 1][NP][2][16];
  if constexpr (kTotalsInL1) {
    std::memset(total_l1, 0, sizeof(total_l1));
  } else {
    for (int r = 0; r < MR; ++r) {
      for (int q = 0; q < NP; ++q) total[r][q][0] = total[r][q][1] = _mm512_setzero_ps();
    }
  }
  const __m512i lanes0 = lane_columns(0), lanes1 = lane_columns(1);
  const __m512 implied = _mm512_set1_ps(static_cast<float>(implied_zero(8)));
  constexpr int kStepK = 4;
  for (int g = 0; g < t.groups; ++g) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) acc[r][q][0] = acc[r][q][1] = _mm512_setzero_ps();
    }
    const int s0 = g * t.group_steps, s1 = s0 + t.group_steps;
    for (int s = s0; s < s1; ++s) {
      const bf16_t* xk = t.x + static_cast<size_t>(s) * kStepK;
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) {
        const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride + 64 * static_cast<size_t>(s);
        _mm_prefetch(reinterpret_cast<const char*>(codes) + kDecodePrefetchBytes, _MM_HINT_T0);
        __m512 f[4];
#pragma GCC unroll 8
        for (int i = 0; i < 4; ++i) {
          f[i] = _mm512_cvtepi32_ps(
              _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + 16 * i))));
        }
        const __m512bh w0 = _mm512_cvtne2ps_pbh(f[1], f[0]);
        const __m512bh w1 = _mm512_cvtne2ps_pbh(f[3], f[2]);
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const __m512bh xv =
              (__m512bh)_mm512_set1_epi64(static_cast<long long>(load_u64(xk + static_cast<size_t>(r) * t.ldx)));
          acc[r][q][0] = _mm512_dpbf16_ps(acc[r][q][0], w0, xv);
          acc[r][q][1] = _mm512_dpbf16_ps(acc[r][q][1], w1, xv);
        }
      }
    }
    // total += scale · acc − scale · zero · Σx, the second term on phase 0 only.
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      const __m512 scale = load_bf16x16(tile_scales(t, q, g));
      const __m512 zero = t.zero_point ? load_bf16x16(tile_zeros(t, q, g)) : implied;
      const __m512 offset = _mm512_mul_ps(scale, zero);
      const __m512 s0v = _mm512_permutexvar_ps(lanes0, scale), s1v = _mm512_permutexvar_ps(lanes1, scale);
      const __m512 o0 = _mm512_maskz_permutexvar_ps(0x5555, lanes0, offset);
      const __m512 o1 = _mm512_maskz_permutexvar_ps(0x5555, lanes1, offset);
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const __m512 xs = _mm512_set1_ps(t.xsum[static_cast<size_t>(r) * t.groups + g]);
        if constexpr (kTotalsInL1) {
          float* t0 = total_l1[r][q][0];
          float* t1 = total_l1[r][q][1];
          _mm512_store_ps(t0, _mm512_fnmadd_ps(o0, xs, _mm512_fmadd_ps(s0v, acc[r][q][0], _mm512_load_ps(t0))));
          _mm512_store_ps(t1, _mm512_fnmadd_ps(o1, xs, _mm512_fmadd_ps(s1v, acc[r][q][1], _mm512_load_ps(t1))));
        } else {
          total[r][q][0] = _mm512_fnmadd_ps(o0, xs, _mm512_fmadd_ps(s0v, acc[r][q][0], total[r][q][0]));
          total[r][q][1] = _mm512_fnmadd_ps(o1, xs, _mm512_fmadd_ps(s1v, acc[r][q][1], total[r][q][1]));
        }
      }
    }
  }
  const __m512i cols = column_lanes();
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q) {
      // Even lanes: phase 0 + phase 1 of a column.
      const __m512 sum0 = kTotalsInL1 ? _mm512_load_ps(total_l1[r][q][0]) : total[kTotalsInL1 ? 0 : r][q][0];
      const __m512 sum1 = kTotalsInL1 ? _mm512_load_ps(total_l1[r][q][1]) : total[kTotalsInL1 ? 0 : r][q][1];
      const __m512 v0 = _mm512_add_ps(sum0, _mm512_permute_ps(sum0, 0xb1));
      const __m512 v1 = _mm512_add_ps(sum1, _mm512_permute_ps(sum1, 0xb1));
      _mm512_storeu_ps(t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q, _mm512_permutex2var_ps(v0, cols, v1));
    }
  }
}

// ---- batched: INT8 activations, vpdpbusd (codes unsigned, activations signed) ----

// PER_CHANNEL: one weight group, its scale applied once at the end; else each block's sums are
// scaled by weight scale · activation scale (one more multiply per block).
//
// Loops: groups, then the group's activation blocks, then the block's 64-byte steps (a constant
// count, fully unrolled). Written with the group outside so that the compiler keeps the group's
// scales and zeros in registers and sees the step count: folded into one block loop with an
// in-group counter, GCC 12 kept them on the stack and unrolled the steps behind a jump table,
// and a W4 row of 1 ran at ~20 GB/s from L3 on one Zen 5 core against ~55 for the bare steps.
template <int MR, int NP, int BITS, bool PER_CHANNEL>
SLAB_AVX512_QUANT void batch_tile(const QuantTile& t) {
  // W4 in 1-2 rows (decode): the high nibbles get chains of their own, so that a block's eight
  // vpdpbusd per accumulator are not one dependent chain; integer adds join them exactly.
  constexpr bool kSplitHigh = BITS == 4 && MR <= 2;
  constexpr int kStepK = BITS == 8 ? 4 : 8;
  // An activation block is 1 or 4 chunks of 32 elements (quant_act_block), each chunk's steps
  // unrolled.
  constexpr int kChunkSteps = kQuantActBlock / kStepK;
  const int chunks = t.act_block / kQuantActBlock;
  __m512 total[MR][NP], wscale[NP], zero[NP];
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q) total[r][q] = _mm512_setzero_ps();
  }
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const int per_group = blocks_per_group(t);
  const int groups = PER_CHANNEL ? 1 : t.groups;
  const uint8_t* panel[NP];
  for (int q = 0; q < NP; ++q) panel[q] = t.panel + static_cast<size_t>(q) * t.panel_stride;
  for (int g = 0; g < groups; ++g) {
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      wscale[q] = load_bf16x16(tile_scales(t, q, g));
      if (t.zero_point) zero[q] = load_bf16x16(tile_zeros(t, q, g));
      if (t.stream) {
        // The scales (and zeros) are a second stream per panel, after its codes: a tile ahead
        // (the same panel of the next tile), they wait in L1/L2; without this, the first groups'
        // lines of every panel were misses that the steps waited on.
        const char* meta = reinterpret_cast<const char*>(tile_scales(t, q, g)) + t.next_tile_bytes;
        if (reinterpret_cast<const uint8_t*>(meta) < t.stream_end) {
          _mm_prefetch(meta, _MM_HINT_T0);
          if (t.zero_point) _mm_prefetch(meta + static_cast<size_t>(t.groups) * 32, _MM_HINT_T0);
        }
      }
    }
    const int b_end = PER_CHANNEL ? t.blocks : (g + 1) * per_group;
    for (int b = PER_CHANNEL ? 0 : g * per_group; b < b_end; ++b) {
      const int32_t* xqsum = t.xqsum + static_cast<size_t>(b) * t.ldxs;
      const float* xscales = t.xscale + static_cast<size_t>(b) * t.ldxs;
      // Symmetric formats: the sums start at −zero · Σxq (one scalar product per row), so that
      // they end as d. With zero points they start at 0 and the epilogue subtracts zero · Σxq in
      // FP32.
      __m512i acc[MR][NP], acc_high[kSplitHigh ? MR : 1][NP];
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        const __m512i start = _mm512_set1_epi32(t.zero_point ? 0 : -implied_zero(BITS) * xqsum[r]);
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) acc[r][q] = start;
      }
      for (auto& row : acc_high) {
        for (auto& a : row) a = _mm512_setzero_si512();
      }
      for (int chunk = 0; chunk < chunks; ++chunk) {
        const size_t s0 = (static_cast<size_t>(b) * chunks + static_cast<size_t>(chunk)) * kChunkSteps;
        if (t.stream) {
          // A chunk's steps, one cache line each per panel, the prefetch distance ahead; past the
          // end of a panel's codes that is the same panel of the next tile, which the stream
          // reaches next (its first lines were misses the steps waited on). Into L2 (T1): against
          // T0, the Q4_0 file's decode step ran 10-14 % faster on Zen 4 (bench_model, four
          // alternating rounds, bench/results/2026-11-26-epyc-zen4-2c-kquant-serving/raw).
          const size_t ahead = 64 * s0 + kDecodePrefetchBytes;
          const size_t skip = ahead < t.code_bytes ? 0 : t.next_tile_bytes - t.code_bytes;
#pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            const uint8_t* line = panel[q] + ahead + skip;
#pragma GCC unroll 8
            for (int i = 0; i < kChunkSteps; ++i) {
              if (line + 64 * i < t.stream_end) _mm_prefetch(reinterpret_cast<const char*>(line + 64 * i), _MM_HINT_T1);
            }
          }
        }
#pragma GCC unroll 8
        for (int i = 0; i < kChunkSteps; ++i) {
          const size_t s = s0 + static_cast<size_t>(i);
          const int8_t* xk = t.xq + s * kStepK;
          if constexpr (BITS == 8) {
            __m512i w[NP];
#pragma GCC unroll 2
            for (int q = 0; q < NP; ++q) w[q] = _mm512_loadu_si512(panel[q] + 64 * s);
#pragma GCC unroll 6
            for (int r = 0; r < MR; ++r) {
              const __m512i xv = _mm512_set1_epi32(static_cast<int>(load_u32(xk + static_cast<size_t>(r) * t.ldxq)));
#pragma GCC unroll 2
              for (int q = 0; q < NP; ++q) acc[r][q] = dpbusd(acc[r][q], w[q], xv);
            }
          } else {
            __m512i lo[NP], hi[NP];
#pragma GCC unroll 2
            for (int q = 0; q < NP; ++q) {
              const __m512i v = _mm512_loadu_si512(panel[q] + 64 * s);
              lo[q] = _mm512_and_si512(v, nibble);
              hi[q] = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
            }
            nibble_step<MR, NP, kSplitHigh>(acc, acc_high, lo, hi, xk, t.ldxq);
          }
        }
      }
      // total = fma(scale, d, total): the scalar tile's order.
#pragma GCC unroll 6
      for (int r = 0; r < MR; ++r) {
        const __m512 xscale = _mm512_set1_ps(xscales[r]);
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          const __m512i sum = joined_sum<MR, NP, kSplitHigh>(acc, acc_high, r, q);
          const __m512 scale = PER_CHANNEL ? xscale : _mm512_mul_ps(wscale[q], xscale);
          __m512 d = _mm512_cvtepi32_ps(sum);
          if (t.zero_point) d = _mm512_fnmadd_ps(zero[q], _mm512_set1_ps(static_cast<float>(xqsum[r])), d);
          total[r][q] = _mm512_fmadd_ps(scale, d, total[r][q]);
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q) {
      const __m512 v = PER_CHANNEL ? _mm512_mul_ps(total[r][q], wscale[q]) : total[r][q];
      _mm512_storeu_ps(t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q, v);
    }
  }
}

using TileFn = void (*)(const QuantTile&);

// W8 only: [np - 1][mr - 1]; two panels only for 1-2 rows (decode_panels).
constexpr TileFn kDecodeTiles[2][kQuantDecodeTileRows] = {
    {decode_tile<1, 1>, decode_tile<2, 1>, decode_tile<3, 1>, decode_tile<4, 1>, decode_tile<5, 1>, decode_tile<6, 1>,
     decode_tile<7, 1>, decode_tile<8, 1>},
    {decode_tile<1, 2>, decode_tile<2, 2>, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr}};
// [bits == 4][per channel][np - 1][mr - 1]
#define SLAB_ROWS(NP, BITS, PC)                                                               \
  {                                                                                           \
    batch_tile<1, NP, BITS, PC>, batch_tile<2, NP, BITS, PC>, batch_tile<3, NP, BITS, PC>,    \
        batch_tile<4, NP, BITS, PC>, batch_tile<5, NP, BITS, PC>, batch_tile<6, NP, BITS, PC> \
  }
constexpr TileFn kBatchTiles[2][2][2][kQuantBatchTileRows] = {
    {{SLAB_ROWS(1, 8, false), SLAB_ROWS(2, 8, false)}, {SLAB_ROWS(1, 8, true), SLAB_ROWS(2, 8, true)}},
    {{SLAB_ROWS(1, 4, false), SLAB_ROWS(2, 4, false)}, {SLAB_ROWS(1, 4, true), SLAB_ROWS(2, 4, true)}}};
#undef SLAB_ROWS

SLAB_AVX512_QUANT inline __mmask16 first_lanes(int valid) {
  if (valid <= 0) return 0;
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

SLAB_AVX512_QUANT inline __m512 load_x(const bf16_t* x, int i, int k) {
  const __mmask16 m = first_lanes(k - i);
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x + i));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

}  // namespace

void quant_decode_tile_avx512(const QuantTile& t) { kDecodeTiles[t.np - 1][t.mr - 1](t); }
void quant_batch_tile_avx512(const QuantTile& t) { kBatchTiles[t.bits == 4][t.groups == 1][t.np - 1][t.mr - 1](t); }

// Same operations as quantize_row_scalar: max|x| of each block exactly, v = x · (127 / max),
// round to nearest even (vcvtps2dq under the default MXCSR = std::nearbyint), clamp to ±127.
// BLOCK: 32 or 128.
namespace {
template <int BLOCK>
SLAB_AVX512_QUANT void quantize_row_blocks(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride,
                                           const bf16_t* x, int k, int kp) {
  constexpr int kVecs = BLOCK / 16;
  const __m512 abs_mask = _mm512_castsi512_ps(_mm512_set1_epi32(0x7fffffff));
  const __m512i lo = _mm512_set1_epi32(-127), hi = _mm512_set1_epi32(127);
  for (int i = 0; i < kp; i += BLOCK) {
    const size_t b = static_cast<size_t>(i / BLOCK) * stride;
    __m512 xv[kVecs];
    __m512 amax = _mm512_setzero_ps();
    for (int j = 0; j < kVecs; ++j) {
      xv[j] = load_x(x, i + 16 * j, k);  // past k: zero
      amax = _mm512_max_ps(amax, _mm512_and_ps(xv[j], abs_mask));
    }
    const float m = _mm512_reduce_max_ps(amax);
    const __m512 vinv = _mm512_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
    scales[b] = m / 127.0f;
    __m512i sum = _mm512_setzero_si512();
    for (int j = 0; j < kVecs; ++j) {
      const __m512i q = _mm512_min_epi32(_mm512_max_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(xv[j], vinv)), lo), hi);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(xq + i + 16 * j), _mm512_cvtepi32_epi8(q));
      sum = _mm512_add_epi32(sum, q);
      if (j == 0) halves[b] = _mm512_reduce_add_epi32(sum);
    }
    sums[b] = _mm512_reduce_add_epi32(sum);
  }
}

}  // namespace

void quantize_row_avx512(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x,
                         int k, int kp, int block) {
  if (block == kQuantWideActBlock) {
    quantize_row_blocks<kQuantWideActBlock>(xq, scales, sums, halves, stride, x, k, kp);
  } else {
    quantize_row_blocks<kQuantActBlock>(xq, scales, sums, halves, stride, x, k, kp);
  }
}

}  // namespace slab::kern::detail
