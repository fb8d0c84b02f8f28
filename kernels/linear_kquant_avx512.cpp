// AVX-512 VNNI tile of the K-quant formats (linear_quant.h): a super-block record at a time,
// nibbles (and the top bits of 5- and 6-bit codes) to u8 codes in registers, vpdpbusd against
// INT8 activations, the scalar tile's FP32 epilogue (linear_kquant.cpp) in the same order. Only
// called after cpuid said avx512 bf16 + vnni (CpuFeatures::has_avx512_quant_kernels()).
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_avx512_ops.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
namespace {

// Prefetch distance of the streaming (first row tile) pass, as the other quantized tiles.
constexpr size_t kPrefetchBytes = 4096;

template <int MR, int NP, int BITS>
SLAB_AVX512_QUANT void kquant_tile(const QuantTile& t) {
  constexpr bool kSplitHigh = MR <= 2;  // 1-2 rows: two chains per accumulator (linear_quant_avx512)
  constexpr int kBlocks = kKQuantSuperK / kQuantActBlock;
  constexpr bool kMins = kquant_has_mins(BITS);
  const KQuantLayout l = kquant_layout(BITS);
  // Bytes of the record each block's pass walks, for the prefetches: the record read evenly.
  const size_t block_bytes = l.record / kBlocks;
  __m512 total[MR][NP];
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q) total[r][q] = _mm512_setzero_ps();
  }
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03), next2 = _mm512_set1_epi8(0x0c);
  for (int sb = 0; sb < t.super_blocks; ++sb) {
    const uint8_t* rec[NP];
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      rec[q] = t.panel + static_cast<size_t>(q) * t.panel_stride + static_cast<size_t>(sb) * l.record;
    }
    for (int lb = 0; lb < kBlocks; ++lb) {
      const int b = sb * kBlocks + lb;
      if (t.stream) {
        // The lines of the record a prefetch distance ahead that this block's share of the record
        // reaches, each once; past the panel's end, the same panel of the next tile, which this
        // thread streams next. Into L2 (T1): prefetching every line of a block window into L1
        // (T0, overlapping windows) ran the M = 1 tiles ~30 % slower on Zen 4 (bench_linear_quant
        // --kinds q4k,q6k, four alternating rounds) and the Q4_K_M decode step ~10 %.
        const size_t pos = static_cast<size_t>(sb) * l.record + kPrefetchBytes;
        const size_t from = (pos + static_cast<size_t>(lb) * block_bytes) & ~size_t{63};
        const size_t to =
            lb == kBlocks - 1 ? pos + l.record : (pos + static_cast<size_t>(lb + 1) * block_bytes) & ~size_t{63};
        for (size_t off = from; off < to; off += 64) {
          const size_t skip = off < t.panel_bytes ? 0 : t.next_tile_bytes - t.panel_bytes;
#pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            const uint8_t* line = t.panel + static_cast<size_t>(q) * t.panel_stride + off + skip;
            if (line < t.stream_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
          }
        }
      }
      const int32_t* xqsum = t.xqsum + static_cast<size_t>(b) * t.ldxs;
      const float* xscales = t.xscale + static_cast<size_t>(b) * t.ldxs;
      const int32_t* xqhalf = t.xqhalf + static_cast<size_t>(b) * t.ldxs;
      // Sub-scales times the super-scales, per block (from L1: holding d and dmin in registers
      // across the blocks spilled the 4-row tiles' accumulators).
      __m512 s0[NP], s1[NP], o[NP];
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) {
        const __m512 dq = load_f16x16(rec[q] + l.d);
        if constexpr (kMins) {
          s0[q] = _mm512_mul_ps(dq, load_u8x16(rec[q] + l.scales + 16 * static_cast<size_t>(lb)));
          o[q] =
              _mm512_mul_ps(load_f16x16(rec[q] + l.dmin), load_u8x16(rec[q] + l.mins + 16 * static_cast<size_t>(lb)));
        } else {
          s0[q] = _mm512_mul_ps(dq, load_i8x16(rec[q] + l.scales + 32 * static_cast<size_t>(lb)));
          s1[q] = _mm512_mul_ps(dq, load_i8x16(rec[q] + l.scales + 32 * static_cast<size_t>(lb) + 16));
        }
      }
      __m512i acc[MR][NP], acc_high[kSplitHigh ? MR : 1][NP];
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m512i start = _mm512_set1_epi32(kMins ? 0 : -32 * xqhalf[r]);
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) acc[r][q] = start;
      }
      for (auto& row : acc_high) {
        for (auto& a : row) a = _mm512_setzero_si512();
      }
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int s = 4 * lb + i;  // step in the super-block
        const int8_t* xk = t.xq + static_cast<size_t>(sb * kKQuantSuperK + 8 * s);
        __m512i lo[NP], hi[NP];
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          const __m512i v = _mm512_loadu_si512(rec[q] + kquant_nibbles_at(l, s));
          lo[q] = _mm512_and_si512(v, nibble);
          hi[q] = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
          if constexpr (BITS == 6) {
            // Lane bytes 0..31 take their top bits from bits 0-3 of the 32 bytes, 32..63 from 4-7.
            const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec[q] + kquant_high_at(l, s)));
            const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 4), 1);
            lo[q] = _mm512_or_si512(lo[q], _mm512_slli_epi32(_mm512_and_si512(hh, low2), 4));
            hi[q] = _mm512_or_si512(hi[q], _mm512_slli_epi32(_mm512_and_si512(hh, next2), 2));
          }
          if constexpr (BITS == 5) {
            __m512i lo_bits, hi_bits;
            kquant_fifth_bits(rec[q] + kquant_high_at(l, s), &lo_bits, &hi_bits);
            lo[q] = _mm512_or_si512(lo[q], lo_bits);
            hi[q] = _mm512_or_si512(hi[q], hi_bits);
          }
        }
        nibble_step<MR, NP, kSplitHigh>(acc, acc_high, lo, hi, xk, t.ldxq);
        if constexpr (BITS == 6) {
          if (i == 1) {  // the first half's sums (16 elements) end here: fold them in
#pragma GCC unroll 4
            for (int r = 0; r < MR; ++r) {
              const __m512 xscale = _mm512_set1_ps(xscales[r]);
              const __m512i rest = _mm512_set1_epi32(-32 * (xqsum[r] - xqhalf[r]));
#pragma GCC unroll 2
              for (int q = 0; q < NP; ++q) {
                const __m512i sum = joined_sum<MR, NP, kSplitHigh>(acc, acc_high, r, q);
                if constexpr (kSplitHigh) acc_high[r][q] = _mm512_setzero_si512();
                total[r][q] = _mm512_fmadd_ps(_mm512_mul_ps(xscale, s0[q]), _mm512_cvtepi32_ps(sum), total[r][q]);
                acc[r][q] = rest;
              }
            }
          }
        }
      }
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const __m512 xscale = _mm512_set1_ps(xscales[r]);
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          const __m512i sum = joined_sum<MR, NP, kSplitHigh>(acc, acc_high, r, q);
          if constexpr (kMins) {
            const __m512 inner = _mm512_fnmadd_ps(o[q], _mm512_set1_ps(static_cast<float>(xqsum[r])),
                                                  _mm512_mul_ps(s0[q], _mm512_cvtepi32_ps(sum)));
            total[r][q] = _mm512_fmadd_ps(xscale, inner, total[r][q]);
          } else {
            total[r][q] = _mm512_fmadd_ps(_mm512_mul_ps(xscale, s1[q]), _mm512_cvtepi32_ps(sum), total[r][q]);
          }
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int q = 0; q < NP; ++q)
      _mm512_storeu_ps(t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q, total[r][q]);
  }
}

using TileFn = void (*)(const QuantTile&);
// [bits - 4][np - 1][mr - 1]
#define SLAB_KQ_ROWS(NP, BITS) \
  { kquant_tile<1, NP, BITS>, kquant_tile<2, NP, BITS>, kquant_tile<3, NP, BITS>, kquant_tile<4, NP, BITS> }
constexpr TileFn kTiles[3][2][4] = {{SLAB_KQ_ROWS(1, 4), SLAB_KQ_ROWS(2, 4)},
                                    {SLAB_KQ_ROWS(1, 5), SLAB_KQ_ROWS(2, 5)},
                                    {SLAB_KQ_ROWS(1, 6), SLAB_KQ_ROWS(2, 6)}};
#undef SLAB_KQ_ROWS

}  // namespace

void kquant_tile_avx512(const QuantTile& t) { kTiles[t.bits - 4][t.np - 1][t.mr - 1](t); }

}  // namespace slab::kern::detail
