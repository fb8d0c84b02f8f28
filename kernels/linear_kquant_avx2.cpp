// AVX2 tile of the K-quant formats (linear_quant.h), for x86-64 CPUs without AVX-512: one panel
// at a time as two ymm of 8 columns (one row: both panels side by side), vpmaddubsw + vpmaddwd as
// in linear_quant_avx2.cpp. Codes are
// at most 63 and activations at most 127 in magnitude, so a step's low- and high-nibble pair sums
// (4 · 63 · 127 = 32004) add in 16 bits before widening. The FP32 epilogue is the scalar tile's
// (linear_kquant.cpp), operation for operation: bit-identical results.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_tile.h"

#define SLAB_AVX2_KQUANT __attribute__((target("avx2,fma,f16c")))

namespace slab::kern::detail {
namespace {

constexpr size_t kStreamAheadBytes = 8192;  // decode's software prefetch distance (see kquant_panel)

SLAB_AVX2_KQUANT inline __m256 load_u8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
SLAB_AVX2_KQUANT inline __m256 load_i8x8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// *p in every lane as FP32, exact (|*p| < 2^24): a broadcast load and one vcvtdq2ps, where
// _mm256_set1_ps(float(*p)) took a scalar vcvtsi2ss and a shuffle.
SLAB_AVX2_KQUANT inline __m256 broadcast_i32_as_f32(const int32_t* p) {
  return _mm256_cvtepi32_ps(_mm256_broadcastd_epi32(_mm_cvtsi32_si128(*p)));
}

// Lane bytes 32h .. 32h + 31 of a Q5_K step's low (n = 0) or high (n = 1) nibble codes: their
// fifth bits as 0x10 (linear_quant.h: lane byte L's is bit 4n + L / 16 of byte L % 16), from
// step_bits: the step's 16 bytes in the lower 128-bit half and the same shifted right by one bit
// in the upper (fifth_step_bits), so that one immediate shift moves both halves' bits to bit 4.
// Against 64-bit masks in lane order (broadcast, vpshufb, and, compare, and per 32 lane bytes):
// Q5_K at M = 1 1.16-1.18x from cache and ~1.10x from memory, Q5_K_M decode 1.07-1.09x on one Zen
// 2 core. A vpsllvd / vpsrlvd with each half's count, as the AVX-512 tile does, ran no faster than
// the masks there (bench/results/2026-11-30-epyc-zen2-2c-q5k-fifth-bits).
SLAB_AVX2_KQUANT inline __m256i fifth_bits(__m256i step_bits, int n, int h) {
  const int b = 4 * n + 2 * h;  // the bit of the lower half's lane bytes (the upper half's b + 1)
  const __m256i bit4 = _mm256_set1_epi8(0x10);
  if (b < 4) return _mm256_and_si256(_mm256_slli_epi16(step_bits, 4 - b), bit4);
  return _mm256_and_si256(_mm256_srli_epi16(step_bits, b - 4), bit4);
}
SLAB_AVX2_KQUANT inline __m256i fifth_step_bits(const uint8_t* p) {
  const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 1), 1);
}

// Block lb's sub-scales of a record's 16 columns, half h, times the super-scale d: 4/5-bit the
// block's scale, 6-bit its first 16's. The tiles load them after the block's steps, where they
// are used, so that they take no registers while the steps run.
template <int BITS>
SLAB_AVX2_KQUANT inline __m256 first_scale(const float* d, const uint8_t* rec, const KQuantLayout& l, int lb, int h) {
  const __m256 dv = _mm256_load_ps(d + 8 * h);
  if constexpr (kquant_has_mins(BITS)) return _mm256_mul_ps(dv, load_u8x8(rec + l.scales + 16 * lb + 8 * h));
  return _mm256_mul_ps(dv, load_i8x8(rec + l.scales + 32 * lb + 8 * h));
}
// The second factor: 4/5-bit dmin · the block's min, 6-bit d · its second 16's scale.
template <int BITS>
SLAB_AVX2_KQUANT inline __m256 second_scale(const float* d, const float* dmin, const uint8_t* rec,
                                            const KQuantLayout& l, int lb, int h) {
  if constexpr (kquant_has_mins(BITS)) {
    return _mm256_mul_ps(_mm256_load_ps(dmin + 8 * h), load_u8x8(rec + l.mins + 16 * lb + 8 * h));
  }
  return _mm256_mul_ps(_mm256_load_ps(d + 8 * h), load_i8x8(rec + l.scales + 32 * lb + 16 + 8 * h));
}
// The super-scales of a record's 16 columns as FP32 (F16C: Isa::avx2 implies it,
// CpuFeatures::has_avx2_kernels()).
SLAB_AVX2_KQUANT inline void super_scales(float* d, float* dmin, const uint8_t* rec, const KQuantLayout& l, bool mins) {
  for (int h = 0; h < 2; ++h) {
    _mm256_store_ps(d + 8 * h, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + l.d + 16 * h))));
    if (mins) {
      _mm256_store_ps(dmin + 8 * h,
                      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + l.dmin + 16 * h))));
    }
  }
}
// Where block lb's factors of half h start in a panel's scale table (kquant_scale_table_avx2;
// the workspace is not always 32-byte aligned: unaligned loads and stores).
inline size_t table_at(int sb, int lb, int h) {
  return static_cast<size_t>(sb) * kKQuantTableFloats + static_cast<size_t>(2 * lb + h) * 16;
}

// Where a panel tile's block results go: FP32 totals [MR][16 · NP], the super-scales as FP32
// (d, dmin: unless the panels' scale tables hold the products) and, for a tile that reads each
// record's tail after its codes (kquant_panel), every block's INT32 sums [block][half].
template <int MR, int NP>
struct KQuantTotals {
  float (*total)[16 * NP];
  const float* d;
  const float* dmin;
  int32_t (*sums)[2][MR][2 * NP][8];
};

// The FP32 epilogue of one block, lb of super-block sb, for the NP panels' records recs, from its
// INT32 sums acc: 6-bit its first half (fold_first_half) and its second (fold_block), 4/5-bit the
// whole block (fold_block). Plain values, made once a block (kquant_fold): read through the
// QuantTile they were reloaded after every store of the totals (vector stores may alias).
template <int MR, int BITS, int NP>
struct KQuantFold {
  const uint8_t* const* recs;
  int lb;
  const float* table;    // panel 0's factors of the block in the panels' scale tables, or null
  size_t table_panel;    // floats from one panel's table to the next
  const float* xscale;   // the block's activation scales, [MR]
  const int32_t* xqsum;  // and Σxq
  const KQuantTotals<MR, NP>* out;

  static constexpr int kU = 2 * NP;
  // Unit u's factors of this block in its panel's scale table.
  const float* table_of(int u) const { return table + static_cast<size_t>(u / 2) * table_panel + (u % 2) * 16; }

  SLAB_AVX2_KQUANT void fold_first_half(const __m256i (&acc)[MR][kU]) const {
    const KQuantLayout l = kquant_layout(BITS);
    for (int u = 0; u < kU; ++u) {
      const __m256 s0 =
          table ? _mm256_loadu_ps(table_of(u)) : first_scale<BITS>(out->d + 16 * (u / 2), recs[u / 2], l, lb, u % 2);
      for (int r = 0; r < MR; ++r) {
        const __m256 xs = _mm256_set1_ps(xscale[r]);
        _mm256_store_ps(out->total[r] + 8 * u, _mm256_fmadd_ps(_mm256_mul_ps(xs, s0), _mm256_cvtepi32_ps(acc[r][u]),
                                                               _mm256_load_ps(out->total[r] + 8 * u)));
      }
    }
  }

  SLAB_AVX2_KQUANT void fold_block(const __m256i (&acc)[MR][kU]) const {
    constexpr bool kMins = kquant_has_mins(BITS);
    const KQuantLayout l = kquant_layout(BITS);
    for (int u = 0; u < kU; ++u) {
      const uint8_t* rec = recs[u / 2];
      const int h = u % 2;
      // 4/5-bit: s0 and the min's factor o; 6-bit: the second 16's scale s1.
      __m256 s0 = _mm256_setzero_ps(), second;
      if (table) {
        if constexpr (kMins) s0 = _mm256_loadu_ps(table_of(u));
        second = _mm256_loadu_ps(table_of(u) + 8);
      } else {
        if constexpr (kMins) s0 = first_scale<BITS>(out->d + 16 * (u / 2), rec, l, lb, h);
        second = second_scale<BITS>(out->d + 16 * (u / 2), out->dmin + 16 * (u / 2), rec, l, lb, h);
      }
      const __m256 o = second, s1 = second;
      for (int r = 0; r < MR; ++r) {
        const __m256 xs = _mm256_set1_ps(xscale[r]);
        const __m256 sum = _mm256_cvtepi32_ps(acc[r][u]);
        __m256 v = _mm256_load_ps(out->total[r] + 8 * u);
        if constexpr (kMins) {
          const __m256 inner = _mm256_fnmadd_ps(o, broadcast_i32_as_f32(xqsum + r), _mm256_mul_ps(s0, sum));
          v = _mm256_fmadd_ps(xs, inner, v);
        } else {
          v = _mm256_fmadd_ps(_mm256_mul_ps(xs, s1), sum, v);
        }
        _mm256_store_ps(out->total[r] + 8 * u, v);
      }
    }
  }

  // A half's sums kept for later (TAIL_LAST), or folded in now.
  template <bool TAIL_LAST>
  SLAB_AVX2_KQUANT void half_done(int half, const __m256i (&acc)[MR][kU]) const {
    if constexpr (TAIL_LAST) {
      for (int r = 0; r < MR; ++r) {
        for (int u = 0; u < kU; ++u)
          _mm256_store_si256(reinterpret_cast<__m256i*>(out->sums[lb][half][r][u]), acc[r][u]);
      }
    } else if (BITS == 6 && half == 0) {
      fold_first_half(acc);
    } else {
      fold_block(acc);
    }
  }
  // The kept sums of the block, folded in as half_done<false> would have.
  SLAB_AVX2_KQUANT void fold_kept() const {
    __m256i acc[MR][kU];
    for (int half = 0; half < (BITS == 6 ? 2 : 1); ++half) {
      for (int r = 0; r < MR; ++r) {
        for (int u = 0; u < kU; ++u)
          acc[r][u] = _mm256_load_si256(reinterpret_cast<const __m256i*>(out->sums[lb][half][r][u]));
      }
      half_done<false>(BITS == 6 ? half : 1, acc);
    }
  }
};

template <int MR, int BITS, int NP>
SLAB_AVX2_KQUANT inline KQuantFold<MR, BITS, NP> kquant_fold(const QuantTile& t, int q, const uint8_t* const* recs,
                                                             int sb, int lb, const KQuantTotals<MR, NP>& out) {
  const size_t b = static_cast<size_t>(sb * (kKQuantSuperK / kQuantActBlock) + lb);
  const size_t table_panel = static_cast<size_t>(t.super_blocks) * kKQuantTableFloats;
  const float* table = t.kq_table ? t.kq_table + static_cast<size_t>(q) * table_panel + table_at(sb, lb, 0) : nullptr;
  return {recs, lb, table, table_panel, t.xscale + b * t.ldxs, t.xqsum + b * t.ldxs, &out};
}

// Unit h (lane bytes 32h .. 32h + 31) of step s of a record: its low- and high-nibble codes as
// bytes, with their top bits (hb: the step's high bits as the tile loaded them).
template <int BITS>
SLAB_AVX2_KQUANT inline void unpack_unit(const uint8_t* rec, const KQuantLayout& l, int s, int h, __m256i hb,
                                         __m256i* lo, __m256i* hi) {
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kquant_nibbles_at(l, s) + 32 * h));
  *lo = _mm256_and_si256(v, nibble);
  *hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
  if constexpr (BITS == 6) {
    // Lane bytes 0..31 (h = 0) keep their top bits in bits 0-1 (low nibble's) and 2-3 (high
    // nibble's) of hb, 32..63 in bits 4-5 and 6-7: each moved to bits 4-5 by one 16-bit shift
    // (none for bits 4-5) and kept by one mask, whatever crossed from the neighbouring byte.
    const __m256i bits45 = _mm256_set1_epi8(0x30);
    const __m256i lo_top = h == 0 ? _mm256_slli_epi16(hb, 4) : hb;
    const __m256i hi_top = h == 0 ? _mm256_slli_epi16(hb, 2) : _mm256_srli_epi16(hb, 2);
    *lo = _mm256_or_si256(*lo, _mm256_and_si256(lo_top, bits45));
    *hi = _mm256_or_si256(*hi, _mm256_and_si256(hi_top, bits45));
  }
  if constexpr (BITS == 5) {
    *lo = _mm256_or_si256(*lo, fifth_bits(hb, 0, h));
    *hi = _mm256_or_si256(*hi, fifth_bits(hb, 1, h));
  }
}

// The step's high bits for unpack_unit (none for 4-bit codes).
template <int BITS>
SLAB_AVX2_KQUANT inline __m256i step_high_bits(const uint8_t* rec, const KQuantLayout& l, int s) {
  if constexpr (BITS == 6) return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kquant_high_at(l, s)));
  if constexpr (BITS == 5) return fifth_step_bits(rec + kquant_high_at(l, s));
  return _mm256_setzero_si256();
}

// Step i of a block for one unit and one row: the pair sums of its codes and x, added in 16 bits
// for kSteps16 steps and then widened into acc.
template <int kSteps16>
SLAB_AVX2_KQUANT inline void unit_step(int i, __m256i lo, __m256i hi, __m256i x_lo, __m256i x_hi, __m256i& pairs16,
                                       __m256i& acc) {
  const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
  pairs16 = i % kSteps16 == 0 ? pairs : _mm256_add_epi16(pairs16, pairs);
  // Keeps the running sum a register here: GCC otherwise reassociates the block's 16-bit adds
  // into a tree, which holds every step's products at once and spills them.
  __asm__("" : "+x"(pairs16));
  if ((i + 1) % kSteps16 == 0) acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pairs16, _mm256_set1_epi16(1)));
}

// Block lb of super-block sb over the NP panels' records recs, MR rows: the INT32 sums of each
// 8-column unit (6-bit: of each half), handed to fold.half_done as each half ends.
template <int MR, int BITS, int NP, bool TAIL_LAST>
SLAB_AVX2_KQUANT inline void kquant_block(const QuantTile& t, const uint8_t* const* recs, int sb, int lb,
                                          const KQuantFold<MR, BITS, NP>& fold) {
  constexpr bool kMins = kquant_has_mins(BITS);
  constexpr int kU = 2 * NP;
  // Steps whose pair sums still add in 16 bits before vpmaddwd widens them: a step's four
  // products are at most 4 · (2^BITS - 1) · 128 (7680, 15872, 32256), so four 4-bit steps, two
  // 5-bit ones, one 6-bit one. Fewer vpmaddwd: the multiplies are this tile's bottleneck port.
  constexpr int kSteps16 = BITS == 4 ? 4 : BITS == 5 ? 2 : 1;
  const KQuantLayout l = kquant_layout(BITS);
  const size_t b = static_cast<size_t>(sb * (kKQuantSuperK / kQuantActBlock) + lb);
  __m256i acc[MR][kU];
  for (int r = 0; r < MR; ++r) {
    const __m256i start = _mm256_set1_epi32(kMins ? 0 : -32 * t.xqhalf[b * t.ldxs + r]);
    for (int u = 0; u < kU; ++u) acc[r][u] = start;
  }
  __m256i pairs16[MR][kU];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    const int s = 4 * lb + i;
    if constexpr (MR == 1) {
      // One row: each unit's codes go to the multiplies as soon as they are unpacked, so that
      // only one unit's codes are live (all four at once spilled the one-row tiles).
      const int8_t* xr = t.xq + static_cast<size_t>(sb * kKQuantSuperK + 8 * s);
      const __m256i x_lo = _mm256_set1_epi32(static_cast<int>(load_u32(xr)));
      const __m256i x_hi = _mm256_set1_epi32(static_cast<int>(load_u32(xr + 4)));
      for (int p = 0; p < NP; ++p) {
        const __m256i hb = step_high_bits<BITS>(recs[p], l, s);
        for (int h = 0; h < 2; ++h) {
          __m256i lo, hi;
          unpack_unit<BITS>(recs[p], l, s, h, hb, &lo, &hi);
          unit_step<kSteps16>(i, lo, hi, x_lo, x_hi, pairs16[0][2 * p + h], acc[0][2 * p + h]);
        }
      }
    } else {
      // Both halves' codes first, then each row's x once for both: 8 sums, 4 code vectors and 2
      // x vectors stay in registers at 4 rows (unpacking per half inside the row loop kept
      // every row's x live across the halves and spilled).
      __m256i lo[kU], hi[kU];
      for (int p = 0; p < NP; ++p) {
        const __m256i hb = step_high_bits<BITS>(recs[p], l, s);
        for (int h = 0; h < 2; ++h) unpack_unit<BITS>(recs[p], l, s, h, hb, &lo[2 * p + h], &hi[2 * p + h]);
      }
#pragma GCC unroll 4
      for (int r = 0; r < MR; ++r) {
        const int8_t* xr = t.xq + static_cast<size_t>(r) * t.ldxq + static_cast<size_t>(sb * kKQuantSuperK + 8 * s);
        const __m256i x_lo = _mm256_set1_epi32(static_cast<int>(load_u32(xr)));
        const __m256i x_hi = _mm256_set1_epi32(static_cast<int>(load_u32(xr + 4)));
        for (int u = 0; u < kU; ++u) unit_step<kSteps16>(i, lo[u], hi[u], x_lo, x_hi, pairs16[r][u], acc[r][u]);
      }
    }
    if constexpr (BITS == 6) {
      if (i == 1) {  // the block's first half ends
        fold.template half_done<TAIL_LAST>(0, acc);
        for (int r = 0; r < MR; ++r) {
          const size_t rb = b * t.ldxs + static_cast<size_t>(r);
          for (int u = 0; u < kU; ++u) acc[r][u] = _mm256_set1_epi32(-32 * (t.xqsum[rb] - t.xqhalf[rb]));
        }
      }
    }
  }
  fold.template half_done<TAIL_LAST>(BITS == 6 ? 1 : 0, acc);
}

// MR rows × NP panels from panel q, side by side (NP = 2 for one row: its two streams advance
// together, see kquant_tile_avx2); FP32 totals in `total` [MR][16 · NP] (L1) across the
// activation blocks, out [r][16 · (q + p)]. G = 2 (one row over a four-panel tile, see
// kquant_tile_avx2): two such pairs, tile panels 0-1 and 2-3, a block of each in turn; out
// [0][16 · panel].
template <int MR, int BITS, int NP, int G = 1>
SLAB_AVX2_KQUANT void kquant_panel(const QuantTile& t, int q, float* out) {
  constexpr int kBlocks = kKQuantSuperK / kQuantActBlock;
  constexpr bool kMins = kquant_has_mins(BITS);
  constexpr int kU = 2 * NP;  // 8-column units: panel p's halves h are units 2p + h
  // One row over two panels (decode) reads each record's tail (super-scales, sub-scales, mins)
  // after all its codes, every block's INT32 sums kept in L1 until then: the FP32 epilogue's loads
  // leave the loop over the codes, and a record is read strictly forward (Zen 2's hardware
  // prefetcher does not follow the tail reads between the blocks' codes). On one Zen 2 core Q6_K
  // at M = 1 read 1.10-1.13x faster from memory, Q5_K 1.05-1.06x, the fused Q4_K gate/up 1.06-1.10x.
  // More rows (batched) fold each block at once: keeping the sums cost them 2-6 %. The same FP32
  // operations in the same order either way: the same bits.
  constexpr bool kTailLast = MR == 1 && NP == 2;
  static_assert(G == 1 || kTailLast, "pairs of pairs are one-row tiles");
  const KQuantLayout l = kquant_layout(BITS);
  // Each panel's stream, and where it goes on past the panel's end (the prefetches run into
  // it): one panel at a time, the tile's next panel, and after the last one the next tile's
  // first; side by side, the next tile's panel in the same place.
  const uint8_t* panels[G][NP];
  const uint8_t* afters[G][NP];
  for (int g = 0; g < G; ++g) {
    for (int p = 0; p < NP; ++p) {
      panels[g][p] = G == 2 ? tile_panel(t, 2 * g + p) : t.panel + static_cast<size_t>(q + p) * t.panel_stride;
      afters[g][p] = NP == 2        ? panels[g][p] + t.next_tile_bytes
                     : q + 1 < t.np ? t.panel + static_cast<size_t>(q + 1) * t.panel_stride
                                    : t.panel + t.next_tile_bytes;
    }
  }
  alignas(32) float total[G][MR][16 * NP] = {};
  alignas(32) float d[G][8 * kU], dmin[G][8 * kU];
  alignas(32) int32_t sums[G][kTailLast ? kBlocks : 1][2][MR][kU][8];
  KQuantTotals<MR, NP> totals[G];
  for (int g = 0; g < G; ++g) totals[g] = {total[g], d[g], dmin[g], sums[g]};
  for (int sb = 0; sb < t.super_blocks; ++sb) {
    const uint8_t* recs[G][NP];
    for (int g = 0; g < G; ++g) {
      for (int p = 0; p < NP; ++p) recs[g][p] = panels[g][p] + static_cast<size_t>(sb) * l.record;
    }
    const bool super_scales_needed = !t.kq_table;
    if (super_scales_needed && !kTailLast) {
      for (int p = 0; p < NP; ++p) super_scales(d[0] + 16 * p, dmin[0] + 16 * p, recs[0][p], l, kMins);
    }
    for (int lb = 0; lb < kBlocks; ++lb) {
      if (t.stream) {
        // As the AVX-512 tile, each line of the record once, into L2, but 8 KB ahead: against
        // 4 KB, Q4_K_M decode at --kernels avx2 went from 41-42 to 46-57 tok/s on Zen 4 (three
        // alternating rounds; the AVX-512 tile and the W8/W4 AVX2 tiles were 3-8 % slower at
        // 8 KB).
        const size_t pos = static_cast<size_t>(sb) * l.record + kStreamAheadBytes, share = l.record / kBlocks;
        const size_t from = (pos + static_cast<size_t>(lb) * share) & ~size_t{63};
        const size_t to =
            lb == kBlocks - 1 ? pos + l.record : (pos + static_cast<size_t>(lb + 1) * share) & ~size_t{63};
        for (int g = 0; g < G; ++g) {
          for (int p = 0; p < NP; ++p) {
            for (size_t off = from; off < to; off += 64) {
              const uint8_t* line = off < t.panel_bytes ? panels[g][p] + off : afters[g][p] + (off - t.panel_bytes);
              if (line < t.stream_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
            }
          }
        }
      }
      for (int g = 0; g < G; ++g) {
        kquant_block<MR, BITS, NP, kTailLast>(t, recs[g], sb, lb,
                                              kquant_fold<MR, BITS, NP>(t, q, recs[g], sb, lb, totals[g]));
      }
    }
    if constexpr (kTailLast) {
      for (int g = 0; g < G; ++g) {
        if (super_scales_needed) {
          for (int p = 0; p < NP; ++p) super_scales(d[g] + 16 * p, dmin[g] + 16 * p, recs[g][p], l, kMins);
        }
        for (int lb = 0; lb < kBlocks; ++lb) kquant_fold<MR, BITS, NP>(t, q, recs[g], sb, lb, totals[g]).fold_kept();
      }
    }
  }
  for (int g = 0; g < G; ++g) {
    for (int r = 0; r < MR; ++r) {
      std::memcpy(out + static_cast<size_t>(r) * kQuantTileCols + static_cast<size_t>(g) * 16 * NP, total[g][r],
                  sizeof(total[g][r]));
    }
  }
}

using PanelFn = void (*)(const QuantTile&, int, float*);
// [bits - 4][mr - 1]
constexpr PanelFn kPanels[3][4] = {
    {kquant_panel<1, 4, 1>, kquant_panel<2, 4, 1>, kquant_panel<3, 4, 1>, kquant_panel<4, 4, 1>},
    {kquant_panel<1, 5, 1>, kquant_panel<2, 5, 1>, kquant_panel<3, 5, 1>, kquant_panel<4, 5, 1>},
    {kquant_panel<1, 6, 1>, kquant_panel<2, 6, 1>, kquant_panel<3, 6, 1>, kquant_panel<4, 6, 1>}};
// [bits - 4]: one row over both panels side by side; over a four-panel tile's two pairs.
constexpr PanelFn kRowPanelPairs[3] = {kquant_panel<1, 4, 2>, kquant_panel<1, 5, 2>, kquant_panel<1, 6, 2>};
constexpr PanelFn kRowPanelQuads[3] = {kquant_panel<1, 4, 2, 2>, kquant_panel<1, 5, 2, 2>, kquant_panel<1, 6, 2, 2>};

// A record's tail (super-scales, sub-scales, mins) into L1: the scale table reads only these
// 5 lines of each 37-line record (Q4_K), so the hardware prefetcher does not follow them.
inline void prefetch_tail(const uint8_t* rec, const KQuantLayout& l) {
  for (size_t off = l.d & ~size_t{63}; off < l.record; off += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(rec + off), _MM_HINT_T0);
  }
}

}  // namespace

SLAB_AVX2_KQUANT void kquant_scale_table_avx2(float* table, const uint8_t* panel, int bits, int super_blocks) {
  const KQuantLayout l = kquant_layout(bits);
  const bool mins = kquant_has_mins(bits);
  constexpr int kTailsAhead = 4;
  for (int sb = 0; sb < std::min(kTailsAhead, super_blocks); ++sb) prefetch_tail(panel + sb * l.record, l);
  for (int sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* rec = panel + static_cast<size_t>(sb) * l.record;
    if (sb + kTailsAhead < super_blocks) prefetch_tail(rec + kTailsAhead * l.record, l);
    alignas(32) float d[16], dmin[16] = {};  // 6-bit: no dmin
    super_scales(d, dmin, rec, l, mins);
    for (int lb = 0; lb < kKQuantSuperK / kQuantActBlock; ++lb) {
      for (int h = 0; h < 2; ++h) {
        float* at = table + table_at(sb, lb, h);
        if (mins) {
          _mm256_storeu_ps(at, first_scale<4>(d, rec, l, lb, h));
          _mm256_storeu_ps(at + 8, second_scale<4>(d, dmin, rec, l, lb, h));
        } else {
          _mm256_storeu_ps(at, first_scale<6>(d, rec, l, lb, h));
          _mm256_storeu_ps(at + 8, second_scale<6>(d, dmin, rec, l, lb, h));
        }
      }
    }
  }
}

// One row over two panels reads them side by side, a step of each in turn (16 sums, 4 code and 2
// x vectors: the 16 registers), their prefetches issued together: on a Zen 2 core the tile
// streamed Q4_K at 14-15 GB/s from memory against 11-12 one panel after the other, and Q4_K_M
// decode ran 1.08-1.12x (bench/results/2026-11-29-epyc-zen2-2c-avx2-kquant-side-by-side). More
// rows keep one panel at a time: two rows over two panels would need 26 registers. One row over
// four panels (Q4_K decode, kquant_quad in linear_quant.cpp) runs two such pairs, a block of each
// in turn, its panels from four places in the weights (QuantTile::pair_stride).
void kquant_tile_avx2(const QuantTile& t) {
  if (t.mr == 1 && t.np == 4) {
    kRowPanelQuads[t.bits - 4](t, 0, t.out);
    return;
  }
  if (t.mr == 1 && t.np == 2) {
    kRowPanelPairs[t.bits - 4](t, 0, t.out);
    return;
  }
  for (int q = 0; q < t.np; ++q) kPanels[t.bits - 4][t.mr - 1](t, q, t.out + 16 * q);
}

}  // namespace slab::kern::detail
