// AVX2 tile of the K-quant formats (linear_quant.h), for x86-64 CPUs without AVX-512: one panel
// at a time as two ymm of 8 columns, vpmaddubsw + vpmaddwd as in linear_quant_avx2.cpp. Codes are
// at most 63 and activations at most 127 in magnitude, so a step's low- and high-nibble pair sums
// (4 · 63 · 127 = 32004) add in 16 bits before widening. The FP32 epilogue is the scalar tile's
// (linear_kquant.cpp), operation for operation: bit-identical results.
#include <immintrin.h>

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

// Byte i of the result is 0x10 where bit i of `bits` is set.
SLAB_AVX2_KQUANT inline __m256i spread_bits(uint32_t bits) {
  // Byte i takes byte i / 8 of `bits` (vpshufb works within 128-bit halves: the upper half's
  // bytes 16..31 need bytes 2 and 3), then keeps its own bit.
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(bits)),
      _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i select = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ull));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, select), select);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
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

// MR rows × panel q; FP32 totals in `total` [MR][16] (L1) across the activation blocks.
template <int MR, int BITS>
SLAB_AVX2_KQUANT void kquant_panel(const QuantTile& t, int q, float* out) {
  constexpr int kBlocks = kKQuantSuperK / kQuantActBlock;
  constexpr bool kMins = kquant_has_mins(BITS);
  // Steps whose pair sums still add in 16 bits before vpmaddwd widens them: a step's four
  // products are at most 4 · (2^BITS - 1) · 128 (7680, 15872, 32256), so four 4-bit steps, two
  // 5-bit ones, one 6-bit one. Fewer vpmaddwd: the multiplies are this tile's bottleneck port.
  constexpr int kSteps16 = BITS == 4 ? 4 : BITS == 5 ? 2 : 1;
  const KQuantLayout l = kquant_layout(BITS);
  const uint8_t* panel = t.panel + static_cast<size_t>(q) * t.panel_stride;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i low2 = _mm256_set1_epi8(0x03), next2 = _mm256_set1_epi8(0x0c);
  alignas(32) float total[MR][16] = {};
  for (int sb = 0; sb < t.super_blocks; ++sb) {
    const uint8_t* rec = panel + static_cast<size_t>(sb) * l.record;
    // The super-scales as FP32 (F16C: Isa::avx2 implies it, CpuFeatures::has_avx2_kernels()).
    alignas(32) float d[16], dmin[16];
    for (int h = 0; h < 2; ++h) {
      _mm256_store_ps(d + 8 * h,
                      _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + l.d + 16 * h))));
      if constexpr (kMins) {
        _mm256_store_ps(dmin + 8 * h,
                        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(rec + l.dmin + 16 * h))));
      }
    }
    for (int lb = 0; lb < kBlocks; ++lb) {
      const size_t b = static_cast<size_t>(sb * kBlocks + lb);
      if (t.stream) {
        // As the AVX-512 tile, each line of the record once, into L2, but 8 KB ahead: against
        // 4 KB, Q4_K_M decode at --kernels avx2 went from 41-42 to 46-57 tok/s on Zen 4 (three
        // alternating rounds; the AVX-512 tile and the W8/W4 AVX2 tiles were 3-8 % slower at
        // 8 KB). Past the panel's end the stream goes on where this tile reads next: it runs its
        // panels one after another (the AVX-512 tile reads them side by side), so the tile's next
        // panel, and after the last one the next tile's first.
        const uint8_t* after =
            q + 1 < t.np ? t.panel + static_cast<size_t>(q + 1) * t.panel_stride : t.panel + t.next_tile_bytes;
        const size_t pos = static_cast<size_t>(sb) * l.record + kStreamAheadBytes, share = l.record / kBlocks;
        const size_t from = (pos + static_cast<size_t>(lb) * share) & ~size_t{63};
        const size_t to =
            lb == kBlocks - 1 ? pos + l.record : (pos + static_cast<size_t>(lb + 1) * share) & ~size_t{63};
        for (size_t off = from; off < to; off += 64) {
          const uint8_t* line = off < t.panel_bytes ? panel + off : after + (off - t.panel_bytes);
          if (line < t.stream_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
        }
      }
      __m256i acc[MR][2];
      for (int r = 0; r < MR; ++r) {
        const __m256i start = _mm256_set1_epi32(kMins ? 0 : -32 * t.xqhalf[b * t.ldxs + r]);
        acc[r][0] = acc[r][1] = start;
      }
      __m256i pairs16[MR][2];
#pragma GCC unroll 4
      for (int i = 0; i < 4; ++i) {
        const int s = 4 * lb + i;
        // Both halves' codes first, then each row's x once for both: 8 sums, 4 code vectors and 2
        // x vectors stay in registers at 4 rows (unpacking per half inside the row loop kept
        // every row's x live across the halves and spilled).
        __m256i lo[2], hi[2];
        __m256i hb = _mm256_setzero_si256();
        if constexpr (BITS == 6) hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + l.high + 32 * s));
        for (int h = 0; h < 2; ++h) {
          const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + 64 * s + 32 * h));
          lo[h] = _mm256_and_si256(v, nibble);
          hi[h] = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
          if constexpr (BITS == 6) {
            // Lane bytes 0..31 (h = 0) keep their top bits in bits 0-3 of hb, 32..63 in bits 4-7.
            const __m256i top = h == 0 ? hb : _mm256_srli_epi16(hb, 4);
            lo[h] = _mm256_or_si256(lo[h], _mm256_slli_epi16(_mm256_and_si256(top, low2), 4));
            hi[h] = _mm256_or_si256(hi[h], _mm256_slli_epi16(_mm256_and_si256(top, next2), 2));
          }
          if constexpr (BITS == 5) {  // lane bytes 32h..32h+31: bits 32h.. of the step's two masks
            const uint8_t* fifth = rec + l.high + 16 * static_cast<size_t>(s) + 4 * h;
            lo[h] = _mm256_or_si256(lo[h], spread_bits(load_u32(fifth)));
            hi[h] = _mm256_or_si256(hi[h], spread_bits(load_u32(fifth + 8)));
          }
        }
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          const int8_t* xr = t.xq + static_cast<size_t>(r) * t.ldxq + static_cast<size_t>(sb * kKQuantSuperK + 8 * s);
          const __m256i x_lo = _mm256_set1_epi32(static_cast<int>(load_u32(xr)));
          const __m256i x_hi = _mm256_set1_epi32(static_cast<int>(load_u32(xr + 4)));
          for (int h = 0; h < 2; ++h) {
            const __m256i pairs =
                _mm256_add_epi16(_mm256_maddubs_epi16(lo[h], x_lo), _mm256_maddubs_epi16(hi[h], x_hi));
            pairs16[r][h] = i % kSteps16 == 0 ? pairs : _mm256_add_epi16(pairs16[r][h], pairs);
            // Keeps the running sum a register here: GCC otherwise reassociates the block's
            // 16-bit adds into a tree, which holds every step's products at once and spills them.
            __asm__("" : "+x"(pairs16[r][h]));
            if ((i + 1) % kSteps16 == 0)
              acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(pairs16[r][h], ones));
          }
        }
        if constexpr (BITS == 6) {
          if (i == 1) {  // the block's first half ends: fold it in
            const __m256 s0[2] = {first_scale<BITS>(d, rec, l, lb, 0), first_scale<BITS>(d, rec, l, lb, 1)};
            for (int r = 0; r < MR; ++r) {
              const size_t rb = b * t.ldxs + static_cast<size_t>(r);
              const __m256 xscale = _mm256_set1_ps(t.xscale[rb]);
              const __m256i rest = _mm256_set1_epi32(-32 * (t.xqsum[rb] - t.xqhalf[rb]));
              for (int h = 0; h < 2; ++h) {
                _mm256_store_ps(total[r] + 8 * h,
                                _mm256_fmadd_ps(_mm256_mul_ps(xscale, s0[h]), _mm256_cvtepi32_ps(acc[r][h]),
                                                _mm256_load_ps(total[r] + 8 * h)));
                acc[r][h] = rest;
              }
            }
          }
        }
      }
      __m256 s0[2], s1[2], o[2];
      for (int h = 0; h < 2; ++h) {
        if constexpr (kMins) {
          s0[h] = first_scale<BITS>(d, rec, l, lb, h);
          o[h] = _mm256_mul_ps(_mm256_load_ps(dmin + 8 * h), load_u8x8(rec + l.mins + 16 * lb + 8 * h));
        } else {
          s1[h] = _mm256_mul_ps(_mm256_load_ps(d + 8 * h), load_i8x8(rec + l.scales + 32 * lb + 16 + 8 * h));
        }
      }
      for (int r = 0; r < MR; ++r) {
        const size_t rb = b * t.ldxs + static_cast<size_t>(r);
        const __m256 xscale = _mm256_set1_ps(t.xscale[rb]);
        for (int h = 0; h < 2; ++h) {
          const __m256 sum = _mm256_cvtepi32_ps(acc[r][h]);
          __m256 v = _mm256_load_ps(total[r] + 8 * h);
          if constexpr (kMins) {
            const __m256 inner =
                _mm256_fnmadd_ps(o[h], _mm256_set1_ps(static_cast<float>(t.xqsum[rb])), _mm256_mul_ps(s0[h], sum));
            v = _mm256_fmadd_ps(xscale, inner, v);
          } else {
            v = _mm256_fmadd_ps(_mm256_mul_ps(xscale, s1[h]), sum, v);
          }
          _mm256_store_ps(total[r] + 8 * h, v);
        }
      }
    }
  }
  for (int r = 0; r < MR; ++r) std::memcpy(out + static_cast<size_t>(r) * kQuantTileCols, total[r], sizeof(total[r]));
}

using PanelFn = void (*)(const QuantTile&, int, float*);
// [bits - 4][mr - 1]
constexpr PanelFn kPanels[3][4] = {{kquant_panel<1, 4>, kquant_panel<2, 4>, kquant_panel<3, 4>, kquant_panel<4, 4>},
                                   {kquant_panel<1, 5>, kquant_panel<2, 5>, kquant_panel<3, 5>, kquant_panel<4, 5>},
                                   {kquant_panel<1, 6>, kquant_panel<2, 6>, kquant_panel<3, 6>, kquant_panel<4, 6>}};

}  // namespace

void kquant_tile_avx2(const QuantTile& t) {
  for (int q = 0; q < t.np; ++q) kPanels[t.bits - 4][t.mr - 1](t, q, t.out + 16 * q);
}

}  // namespace slab::kern::detail
