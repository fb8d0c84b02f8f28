// AVX-512 tiles of the quantized linear: decode (weight-only: INT16 activations, codes widened
// to 16 bits, vpdpwssd) and batched (INT8 activations, vpdpbusd), and the INT8 activation rows.
// Target attributes per function, as in linear_bf16_avx512.cpp; only called after cpuid said
// avx512 bf16 + vnni (CpuFeatures::has_avx512_quant_kernels()).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_avx512_ops.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
namespace {

// ---- W8 decode: weight-only, INT16 activations, vpdpwssd ----
//
// A step's 64 code bytes widen (vpmovzxbw) to two vectors of 32 INT16: vector 0 holds columns
// 0..7, vector 1 columns 8..15, each column's four k in lanes 2c', 2c' + 1 of the INT32 result
// of vpdpwssd against x's four INT16 values of the step (lane 2c': k0·x0 + k1·x1, lane 2c' + 1:
// k2·x2 + k3·x3). The sums are exact INT32 over an activation block; at its end the two lanes
// of each column are added (exact) and the block's FP32 epilogue is the scalar tile's, in its
// order, so every ISA gives the same bits. (W4 decode runs the batched tiles below on INT8
// activations: linear_quant.h.)

// Natural column c <- lane 2c' (+ 1 for the odd ones) of vector 0 (lanes 0..15) or vector 1
// (16..31) of a permutex2var.
SLAB_AVX512_QUANT inline __m512i column_lanes(int odd) {
  alignas(64) int32_t idx[16];
  for (int c = 0; c < 16; ++c) idx[c] = 16 * (c / 8) + 2 * (c % 8) + odd;
  return _mm512_load_si512(idx);
}

// Software prefetch distance of the streaming tiles, per panel stream. A 64-byte step of one
// panel takes several cycles of work and latency, so the out-of-order window alone keeps only
// ~2 KB of loads in flight (the BF16 kernel's 256-byte steps keep ~10 KB). Measured
// single-threaded from DRAM (64 MB of W4 g128, M = 1, CPU time, shared machine, the former
// weight-only W4 tile): no prefetch 14-15 GB/s, 1 KB 21.6, 2 KB 23-24, 4 KB 25.6, 8 KB 22-23;
// 1, 2, 8 or 12 KB against 4 for the INT8 W4 tile: no clear difference.
constexpr int kDecodePrefetchBytes = 4096;

// acc + the INT16 pair products of a and b, in place. As inline assembly: with the intrinsic GCC 12
// copied every accumulator to another register and back on each step of decode_tile.
SLAB_AVX512_QUANT inline void dpwssd(__m512i& acc, __m512i a, __m512i b) {
  __asm__("vpdpwssd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(b));
}

template <int MR, int NP>
SLAB_AVX512_QUANT void decode_tile(const QuantTile& t) {
  // All 8 rows in one pass widen the codes once. The running totals stay in L1 (a load and a
  // store per block), the block sums in registers (2 · MR · NP <= 16).
  alignas(64) float total[MR][NP][16] = {};
  __m512i acc[MR][NP][2];
  const __m512i even = column_lanes(0), odd = column_lanes(1);
  const __m512 implied = _mm512_set1_ps(static_cast<float>(implied_zero(8)));
  constexpr int kStepK = 4;
  const int block_steps = t.x16_block / kStepK;
  const int blocks = t.groups * t.group_steps / block_steps, blocks_per_group = t.group_steps / block_steps;
  for (int b = 0; b < blocks; ++b) {
#pragma GCC unroll 8
    for (int r = 0; r < MR; ++r) {
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) acc[r][q][0] = acc[r][q][1] = _mm512_setzero_si512();
    }
    for (int s = b * block_steps; s < (b + 1) * block_steps; ++s) {
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) {
        const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride + 64 * static_cast<size_t>(s);
        _mm_prefetch(reinterpret_cast<const char*>(codes) + kDecodePrefetchBytes, _MM_HINT_T0);
        const __m512i w0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
        const __m512i w1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes + 32)));
#pragma GCC unroll 8
        for (int r = 0; r < MR; ++r) {
          const __m512i xv = _mm512_set1_epi64(static_cast<long long>(
              load_u64(t.x16 + static_cast<size_t>(r) * t.ldx16 + kStepK * static_cast<size_t>(s))));
          dpwssd(acc[r][q][0], w0, xv);
          dpwssd(acc[r][q][1], w1, xv);
        }
      }
    }
    // The scalar tile's epilogue: d = Σ code·x16 − zero·Σx16 (INT32 for the implied zero, one FP32
    // rounding for stored ones), total = fma(scale · xscale, d, total).
    const int g = b / blocks_per_group;
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      const __m512 scale = load_bf16x16(tile_scales(t, q, g));
      const __m512 zero = t.zero_point ? load_bf16x16(tile_zeros(t, q, g)) : implied;
#pragma GCC unroll 8
      for (int r = 0; r < MR; ++r) {
        const size_t bi = static_cast<size_t>(r) * t.ldx16s + static_cast<size_t>(b);
        const int32_t xsum = t.x16sum[bi];
        const __m512i sums = _mm512_add_epi32(_mm512_permutex2var_epi32(acc[r][q][0], even, acc[r][q][1]),
                                              _mm512_permutex2var_epi32(acc[r][q][0], odd, acc[r][q][1]));
        const __m512 d =
            t.zero_point ? _mm512_fnmadd_ps(zero, _mm512_set1_ps(static_cast<float>(xsum)), _mm512_cvtepi32_ps(sums))
                         : _mm512_cvtepi32_ps(_mm512_sub_epi32(sums, _mm512_set1_epi32(implied_zero(8) * xsum)));
        float* to = total[r][q];
        _mm512_store_ps(to,
                        _mm512_fmadd_ps(_mm512_mul_ps(scale, _mm512_set1_ps(t.x16scale[bi])), d, _mm512_load_ps(to)));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q) {
      std::memcpy(t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q, total[r][q], sizeof(total[r][q]));
    }
  }
}

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
