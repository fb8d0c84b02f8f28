// AVX2+FMA tiles of the quantized linear for x86-64 CPUs without AVX-512 (same packed layout).
//
// Batched: vpmaddubsw (u8 × s8 -> saturating s16 pairs) + vpmaddwd by ones. W4 codes (<= 15)
// times INT8 activations cannot saturate. W8 codes (<= 255) could (2·255·127 > 32767), so they
// are recentred to q = code − 128 and multiplied as |q| × (x with q's sign) (vpabsb, vpsignb):
// at most 2·128·127 = 32512. The block sum d = Σ xq·code − zero·Σxq is then the same value as
// the scalar tile's (exact, or for a fractional zero the one rounding of the exact value, taken
// as fma(−(zero − 128), Σxq, Σ xq·(code − 128)) whose terms are exact), and the FP32 epilogue
// does the same operations: results are bit-identical to the scalar path.
//
// W8 decode: INT16 activations (quant_int16_activations; quantize_row_int16_avx2 below), the codes
// widened to 16 bits (vpmovzxbw) and multiplied with vpmaddwd into INT32 sums per activation
// block, then one FP32 epilogue per block. Rows go two at a time, sharing each widened code vector
// (decode_rows2_panel; the panel comes from cache for the later rows). The form it replaced kept
// BF16 activations and FP32 FMAs (codes widened to FP32: three operations per 8 codes against
// three per 16 here): Q8_0 at M = 1 ran at about 20 GB/s a core and trailed llama.cpp, whose AVX2
// path takes INT8 activations (bench/results/2026-11-27-epyc-zen5-2c-avx2-w8-int16).
// W4 decode runs the batched tiles on INT8
// activations (linear_quant.h): a form that dequantized W4 codes to FP32 weights reached 35-44 % of the read bandwidth at M = 1 and 5 % at M = 8 on 2 Zen 5
// cores, the INT8 one 71-83 % and 31-36 %. Compiled per function for avx2/fma; only called
// after cpuid said so.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_tile.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// 8 BF16 values as FP32.
SLAB_AVX2 inline __m256 load_bf16x8(const bf16_t* p) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// The W8 decode tiles. A step's 64 code bytes are four quarters of 4 columns × 4 k; a quarter
// widened to 16 bits and multiplied (vpmaddwd) with x's 4 values of the step gives INT32 lanes
// [c k01, c k23, c+1 k01, c+1 k23 | c+2 .., c+3 ..] for its first column c. The sums stay exact
// over a block: |x16| <= 32640 and codes <= 255, so 128 elements stay below 1.07e9 < 2^31.
struct DecodeRow {
  const int16_t* x;     // INT16 row, padded K
  const float* xscale;  // per block
  const int32_t* xsum;  // per block
  __m256 total[2];      // FP32 totals, columns 0..7 and 8..15
};

SLAB_AVX2 inline DecodeRow decode_row(const QuantTile& t, int r) {
  return {t.x16 + static_cast<size_t>(r) * t.ldx16,
          t.x16scale + static_cast<size_t>(r) * t.ldx16s,
          t.x16sum + static_cast<size_t>(r) * t.ldx16s,
          {_mm256_setzero_ps(), _mm256_setzero_ps()}};
}

// x's 4 INT16 values of step s in every 64-bit lane.
SLAB_AVX2 inline __m256i step_x(const DecodeRow& row, int s) {
  return _mm256_set1_epi64x(static_cast<long long>(load_u64(row.x + 4 * static_cast<size_t>(s))));
}

// Block b (of group g) of one row: acc's sums to columns in order, the zero taken off
// (Σ code·x16 − zero·Σx16: in INT32, exact, for the implied zero; in FP32 for stored ones, as the
// batched tiles do), then total += (scale · xscale) · d. The one- and two-row tiles both end their
// blocks here, so a row's result does not depend on the row beside it.
SLAB_AVX2 inline void decode_block_end(const QuantTile& t, int q, int g, int b, const __m256i (&acc)[4],
                                       DecodeRow& row) {
  const __m256i to_natural = _mm256_setr_epi32(0, 1, 4, 5, 2, 3, 6, 7);
  const int32_t xsum = row.xsum[b];
  const __m256 xscale = _mm256_set1_ps(row.xscale[b]);
#pragma GCC unroll 2
  for (int h = 0; h < 2; ++h) {  // columns 8h .. 8h + 7
    // hadd leaves columns 0 1 4 5 | 2 3 6 7 of the half.
    const __m256i sums = _mm256_permutevar8x32_epi32(_mm256_hadd_epi32(acc[2 * h], acc[2 * h + 1]), to_natural);
    __m256 d;
    if (t.zero_point) {
      d = _mm256_fnmadd_ps(load_bf16x8(tile_zeros(t, q, g) + 8 * h), _mm256_set1_ps(static_cast<float>(xsum)),
                           _mm256_cvtepi32_ps(sums));
    } else {
      d = _mm256_cvtepi32_ps(_mm256_sub_epi32(sums, _mm256_set1_epi32(implied_zero(8) * xsum)));
    }
    const __m256 scale = _mm256_mul_ps(load_bf16x8(tile_scales(t, q, g) + 8 * h), xscale);
    row.total[h] = _mm256_fmadd_ps(scale, d, row.total[h]);
  }
}

SLAB_AVX2 inline void store_totals(const DecodeRow& row, float* out16) {
  _mm256_storeu_ps(out16, row.total[0]);
  _mm256_storeu_ps(out16 + 8, row.total[1]);
}

// One activation row × one panel. Stream: this row reads the panel first and prefetches it a few
// KB ahead, as the AVX-512 decode tile does; later rows read it from cache.
template <bool Stream>
SLAB_AVX2 void decode_row_panel(const QuantTile& t, int r, int q, float* out16) {
  const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride;
  const int block_steps = t.x16_block / 4;
  const int blocks = t.groups * t.group_steps / block_steps, blocks_per_group = t.group_steps / block_steps;
  DecodeRow row = decode_row(t, r);
  for (int b = 0; b < blocks; ++b) {
    __m256i acc[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) acc[j] = _mm256_setzero_si256();
    for (int s = b * block_steps; s < (b + 1) * block_steps; ++s) {
      const uint8_t* step = codes + 64 * static_cast<size_t>(s);
      if (Stream) _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T0);
      const __m256i xv = step_x(row, s);
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) {
        const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(step + 16 * j)));
        acc[j] = _mm256_add_epi32(acc[j], _mm256_madd_epi16(w, xv));
      }
    }
    decode_block_end(t, q, b / blocks_per_group, b, acc, row);
  }
  store_totals(row, out16);
}

// One activation row × the tile's two or four panels (M = 1: a plain linear's next panels, or
// SwiGLU's gate and up of one or two units): decode_row_panel's sums for each panel, x broadcast
// once a step and the panels' block epilogues independent of each other. Four panels are read
// as four streams, a block of two panels then the same block of the other two: one Zen 2 core
// reads ~22 GB/s from two streams and ~25 from four.
SLAB_AVX2 void decode_row_panels(const QuantTile& t, float* out) {
  const int block_steps = t.x16_block / 4;
  const int blocks = t.groups * t.group_steps / block_steps, blocks_per_group = t.group_steps / block_steps;
  DecodeRow row[4] = {decode_row(t, 0), decode_row(t, 0), decode_row(t, 0), decode_row(t, 0)};
  for (int b = 0; b < blocks; ++b) {
    for (int q0 = 0; q0 < t.np; q0 += 2) {
      const uint8_t* codes[2] = {tile_panel(t, q0), tile_panel(t, q0 + 1)};
      __m256i acc[2][4];
#pragma GCC unroll 4
      for (int j = 0; j < 4; ++j) acc[0][j] = acc[1][j] = _mm256_setzero_si256();
      for (int s = b * block_steps; s < (b + 1) * block_steps; ++s) {
        const __m256i xv = step_x(row[0], s);
#pragma GCC unroll 2
        for (int q = 0; q < 2; ++q) {
          const uint8_t* step = codes[q] + 64 * static_cast<size_t>(s);
          _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T0);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) {
            const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(step + 16 * j)));
            acc[q][j] = _mm256_add_epi32(acc[q][j], _mm256_madd_epi16(w, xv));
          }
        }
      }
      decode_block_end(t, q0, b / blocks_per_group, b, acc[0], row[q0]);
      decode_block_end(t, q0 + 1, b / blocks_per_group, b, acc[1], row[q0 + 1]);
    }
  }
  for (int q = 0; q < t.np; ++q) store_totals(row[q], out + 16 * q);
}

// Block b (of group g) of two activation rows × panel q: decode_row_panel's sums for each row,
// every widened code vector serving both (8 INT32 sums, 2 x vectors and the codes: 11 of the 16
// registers).
template <bool Stream>
SLAB_AVX2 inline void rows2_block(const QuantTile& t, int q, int g, int b, int block_steps, DecodeRow& row0,
                                  DecodeRow& row1) {
  const uint8_t* codes = tile_panel(t, q);
  __m256i acc0[4], acc1[4];
#pragma GCC unroll 4
  for (int j = 0; j < 4; ++j) acc0[j] = acc1[j] = _mm256_setzero_si256();
  for (int s = b * block_steps; s < (b + 1) * block_steps; ++s) {
    const uint8_t* step = codes + 64 * static_cast<size_t>(s);
    if (Stream) _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T0);
    const __m256i xv0 = step_x(row0, s), xv1 = step_x(row1, s);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(step + 16 * j)));
      acc0[j] = _mm256_add_epi32(acc0[j], _mm256_madd_epi16(w, xv0));
      acc1[j] = _mm256_add_epi32(acc1[j], _mm256_madd_epi16(w, xv1));
    }
  }
  decode_block_end(t, q, g, b, acc0, row0);
  decode_block_end(t, q, g, b, acc1, row1);
}

// Two activation rows × one panel.
template <bool Stream>
SLAB_AVX2 void decode_rows2_panel(const QuantTile& t, int r, int q, float* out0, float* out1) {
  const int block_steps = t.x16_block / 4;
  const int blocks = t.groups * t.group_steps / block_steps, blocks_per_group = t.group_steps / block_steps;
  DecodeRow row0 = decode_row(t, r), row1 = decode_row(t, r + 1);
  for (int b = 0; b < blocks; ++b) rows2_block<Stream>(t, q, b / blocks_per_group, b, block_steps, row0, row1);
  store_totals(row0, out0);
  store_totals(row1, out1);
}

// u8 × s8 products of a 32-byte step half, summed per 32-bit lane (4 products).
template <int BITS>
SLAB_AVX2 inline __m256i lane_dot(__m256i codes, __m256i x, __m256i ones) {
  if constexpr (BITS == 8) {
    const __m256i q = _mm256_xor_si256(codes, _mm256_set1_epi8(static_cast<char>(0x80)));  // code − 128
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(x, q)), ones);
  } else {
    return _mm256_madd_epi16(_mm256_maddubs_epi16(codes, x), ones);
  }
}

// W4: a step's s16 pair sums (both halves) are at most 4·15·128 = 7680, so four steps add in 16
// bits before one vpmaddwd widens them (the multiplies are the batched tile's busiest port).
// Blocks of 32 and 128 are 4 and 16 steps.
template <int BITS>
constexpr int kSteps16Of = BITS == 8 ? 1 : 4;

// Steps s0 .. s0 + kSteps16Of − 1 of MR rows × NP panels (batch_panel) into the INT32 sums acc,
// set (FIRST) or added to: W8 one step's lane sums; W4 four steps' 16-bit pair sums, each running
// sum held in a register by an empty asm (GCC otherwise reassociates the adds into a tree that
// holds every product at once, as in the K-quant tile), then widened once.
template <int MR, int BITS, int NP, bool FIRST>
SLAB_AVX2 inline void step_group(const QuantTile& t, const uint8_t* const (&codes)[NP], int s0,
                                 __m256i (&acc)[MR][2 * NP]) {
  constexpr int kStepK = BITS == 8 ? 4 : 8;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256i pairs16[MR][2 * NP];
#pragma GCC unroll 4
  for (int j = 0; j < kSteps16Of<BITS>; ++j) {
    const int s = s0 + j;
    for (int p = 0; p < NP; ++p) {
      const uint8_t* step = codes[p] + 64 * static_cast<size_t>(s);
      // Into L2 (T1), as the AVX-512 tiles: the Q4_0 file at --kernels avx2 decoded 39-40 ->
      // 45 tok/s on Zen 4 against T0 (three alternating rounds, same bandwidth). One panel
      // at a time, the stream runs on into the next panel; side by side, each panel's runs
      // on into the next tile's panel in its place.
      if (t.stream) {
        const size_t off = 64 * static_cast<size_t>(s) + 4096;
        const uint8_t* line =
            NP == 1 || off < t.panel_bytes ? codes[p] + off : codes[p] + t.next_tile_bytes + (off - t.panel_bytes);
        if (NP == 1 || line < t.stream_end) _mm_prefetch(reinterpret_cast<const char*>(line), _MM_HINT_T1);
      }
      for (int h = 0; h < 2; ++h) {
        const int u = 2 * p + h;
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + 32 * h));
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          const int8_t* xr = t.xq + static_cast<size_t>(r) * t.ldxq + static_cast<size_t>(s) * kStepK;
          const __m256i x_lo = _mm256_set1_epi32(static_cast<int>(load_u32(xr)));
          if constexpr (BITS == 8) {
            const __m256i d = lane_dot<8>(v, x_lo, ones);
            acc[r][u] = FIRST ? d : _mm256_add_epi32(acc[r][u], d);
          } else {
            const __m256i x_hi = _mm256_set1_epi32(static_cast<int>(load_u32(xr + 4)));
            const __m256i lo = _mm256_and_si256(v, nibble);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
            const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
            pairs16[r][u] = j == 0 ? pairs : _mm256_add_epi16(pairs16[r][u], pairs);
            __asm__("" : "+x"(pairs16[r][u]));
          }
        }
      }
    }
  }
  if constexpr (BITS == 4) {
    for (int r = 0; r < MR; ++r) {
      for (int u = 0; u < 2 * NP; ++u) {
        const __m256i d = _mm256_madd_epi16(pairs16[r][u], ones);
        acc[r][u] = FIRST ? d : _mm256_add_epi32(acc[r][u], d);
      }
    }
  }
}

// MR rows × NP panels from panel q (two ymm of 8 columns each; NP = 2, one W4 row only: side
// by side, see quant_batch_tile_avx2); FP32 totals in `total` [MR][16 · NP] across the
// activation blocks, in the scalar tile's order (see linear_quant.h); out [r][16 · (q + p)].
template <int MR, int BITS, int NP = 1>
SLAB_AVX2 void batch_panel(const QuantTile& t, int q, float* out) {
  constexpr int kU = 2 * NP;  // 8-column units: panel p's halves h are units 2p + h
  const uint8_t* codes[NP];
  for (int p = 0; p < NP; ++p) codes[p] = t.panel + static_cast<size_t>(q + p) * t.panel_stride;
  constexpr int kSteps16 = kSteps16Of<BITS>;
  const int block_steps = t.act_block / (BITS == 8 ? 4 : 8);
  // W8's lane_dot already subtracted 128 · Σxq.
  const int code_shift = BITS == 8 ? 128 : 0;
  const bool per_channel = t.groups == 1;
  const int per_group = blocks_per_group(t);
  alignas(32) float total[MR][16 * NP] = {};
  __m256 wscale[kU] = {};
  __m256 zero_left[kU] = {};
  for (int b = 0, g = 0, in_group = 0; b < t.blocks; ++b, ++in_group) {
    if (in_group == per_group) {
      in_group = 0;
      ++g;
    }
    if (in_group == 0) {
      for (int u = 0; u < kU; ++u) {
        const int p = u / 2, h = u % 2;
        wscale[u] = load_bf16x8(tile_scales(t, q + p, g) + 8 * h);
        const __m256 zero = t.zero_point ? load_bf16x8(tile_zeros(t, q + p, g) + 8 * h)
                                         : _mm256_set1_ps(static_cast<float>(implied_zero(BITS)));
        zero_left[u] = _mm256_sub_ps(zero, _mm256_set1_ps(static_cast<float>(code_shift)));  // exact
      }
    }
    // The block's first steps set the sums, so that they take no registers while those run
    // (a block of 32 is one group of W4 steps: the 4-row tile kept its sums on the stack).
    __m256i acc[MR][kU];
    step_group<MR, BITS, NP, true>(t, codes, b * block_steps, acc);
    for (int s0 = b * block_steps + kSteps16; s0 < (b + 1) * block_steps; s0 += kSteps16) {
      step_group<MR, BITS, NP, false>(t, codes, s0, acc);
    }
    for (int r = 0; r < MR; ++r) {
      const size_t rb = static_cast<size_t>(b) * t.ldxs + r;
      const __m256 xscale = _mm256_set1_ps(t.xscale[rb]);
      const __m256 xs = _mm256_set1_ps(static_cast<float>(t.xqsum[rb]));
      for (int u = 0; u < kU; ++u) {
        const __m256 d = _mm256_fnmadd_ps(zero_left[u], xs, _mm256_cvtepi32_ps(acc[r][u]));
        const __m256 scale = per_channel ? xscale : _mm256_mul_ps(wscale[u], xscale);
        _mm256_store_ps(total[r] + 8 * u, _mm256_fmadd_ps(scale, d, _mm256_load_ps(total[r] + 8 * u)));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int u = 0; u < kU; ++u) {
      const __m256 v = _mm256_load_ps(total[r] + 8 * u);
      _mm256_storeu_ps(out + static_cast<size_t>(r) * kQuantTileCols + 8 * u,
                       per_channel ? _mm256_mul_ps(v, wscale[u]) : v);
    }
  }
}

using PanelFn = void (*)(const QuantTile&, int, float*);
// [bits == 4][mr - 1]
constexpr PanelFn kBatchPanels[2][4] = {{batch_panel<1, 8>, batch_panel<2, 8>, batch_panel<3, 8>, batch_panel<4, 8>},
                                        {batch_panel<1, 4>, batch_panel<2, 4>, batch_panel<3, 4>, batch_panel<4, 4>}};

SLAB_AVX2 inline int32_t reduce_add(__m256i v) {
  __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
  s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
  return _mm_cvtsi128_si32(s4);
}

// 8 FP32 values of x[i..i+8), zeros past k.
SLAB_AVX2 inline __m256 load_x8(const bf16_t* x, int i, int k) {
  if (i + 8 <= k) return load_bf16x8(x + i);
  alignas(16) bf16_t part[8] = {};
  for (int j = 0; i + j < k && j < 8; ++j) part[j] = x[i + j];
  return load_bf16x8(part);
}

// Same operations as quantize_row_scalar (see quantize_row_avx512): bit-identical. BLOCK: 32 or 128.
template <int BLOCK>
SLAB_AVX2 void quantize_row_blocks(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride,
                                   const bf16_t* x, int k, int kp) {
  constexpr int kVecs = BLOCK / 8;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i lo = _mm256_set1_epi32(-127), hi = _mm256_set1_epi32(127);
  // After two saturating packs, 4-byte run d holds half d / 4 of vector d % 4: this puts each
  // vector's two halves back together, in order.
  const __m256i unshuffle = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (int i = 0; i < kp; i += BLOCK) {
    const size_t b = static_cast<size_t>(i / BLOCK) * stride;
    __m256 amax = _mm256_setzero_ps();
    for (int j = 0; j < kVecs; ++j) amax = _mm256_max_ps(amax, _mm256_and_ps(load_x8(x, i + 8 * j, k), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float m = _mm_cvtss_f32(m4);
    const __m256 vinv = _mm256_set1_ps(m > 0.0f ? 127.0f / m : 0.0f);
    scales[b] = m / 127.0f;
    __m256i sum = _mm256_setzero_si256();
    for (int j = 0; j < kVecs; j += 4) {  // 32 elements at a time (x is read again: from L1)
      __m256i q[4];
      for (int v = 0; v < 4; ++v) {
        const __m256 xv = load_x8(x, i + 8 * (j + v), k);
        q[v] = _mm256_min_epi32(_mm256_max_epi32(_mm256_cvtps_epi32(_mm256_mul_ps(xv, vinv)), lo), hi);
        sum = _mm256_add_epi32(sum, q[v]);
        if (j == 0 && v == 1) halves[b] = reduce_add(sum);
      }
      const __m256i bytes =
          _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));  // in range: exact
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(xq + i + 8 * j), _mm256_permutevar8x32_epi32(bytes, unshuffle));
    }
    sums[b] = reduce_add(sum);
  }
}

}  // namespace

void quantize_row_avx2(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x, int k,
                       int kp, int block) {
  if (block == kQuantWideActBlock) {
    quantize_row_blocks<kQuantWideActBlock>(xq, scales, sums, halves, stride, x, k, kp);
  } else {
    quantize_row_blocks<kQuantActBlock>(xq, scales, sums, halves, stride, x, k, kp);
  }
}

SLAB_AVX2 void quantize_row_int16_avx2(int16_t* x16, float* scales, int32_t* sums, const bf16_t* x, int k, int kp,
                                       int block) {
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  for (int i = 0; i < kp; i += block) {
    const size_t b = static_cast<size_t>(i / block);
    __m256 amax = _mm256_setzero_ps();
    for (int j = i; j < i + block; j += 8) amax = _mm256_max_ps(amax, _mm256_and_ps(load_x8(x, j, k), abs_mask));
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_max_ss(m4, _mm_shuffle_ps(m4, m4, 1));
    const float m = _mm_cvtss_f32(m4);
    uint32_t max_bits;
    std::memcpy(&max_bits, &m, sizeof(max_bits));
    // The biased exponent e of max|x| is E + 126: x16 = x · 2^(141 − e), scale 2^(e − 141), with e
    // raised to 15 so that both stay normal.
    const uint32_t e = max_bits >> 23 < 15 ? 15 : max_bits >> 23;
    const uint32_t mult_bits = (268 - e) << 23, scale_bits = (e - 14) << 23;
    float mult, scale;
    std::memcpy(&mult, &mult_bits, sizeof(mult));
    std::memcpy(&scale, &scale_bits, sizeof(scale));
    scales[b] = m > 0.0f ? scale : 0.0f;
    const __m256 vmult = _mm256_set1_ps(mult);
    __m256i sum = _mm256_setzero_si256();
    for (int j = i; j < i + block; j += 8) {
      const __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(load_x8(x, j, k), vmult));
      sum = _mm256_add_epi32(sum, v);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(x16 + j),
                       _mm_packs_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1)));
    }
    sums[b] = reduce_add(sum);
  }
}

void quant_decode_tile_avx2(const QuantTile& t) {
  // One row reads its panels side by side. Blocks of 32 (Q8_0): one core ran two panels together
  // 1.2-1.3x faster with the weights in L3. Blocks of 128 (per-channel and g128 W8) ran 0.9x in
  // cache but 1.2x from memory, where a model's weights are: a single prefetched stream kept too
  // few lines in flight (bench/results/2026-11-29-epyc-zen2-2c-avx2-w8-wide-side-by-side).
  if (t.mr == 1 && (t.np == 2 || t.np == 4)) return decode_row_panels(t, t.out);
  for (int r = 0; r < t.mr; r += 2) {
    for (int q = 0; q < t.np; ++q) {
      float* out = t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q;
      if (r + 1 < t.mr) {
        if (r == 0) {
          decode_rows2_panel<true>(t, r, q, out, out + kQuantTileCols);
        } else {
          decode_rows2_panel<false>(t, r, q, out, out + kQuantTileCols);
        }
      } else if (r == 0) {
        decode_row_panel<true>(t, r, q, out);
      } else {
        decode_row_panel<false>(t, r, q, out);
      }
    }
  }
}

// One W4 row over two panels reads them side by side, a step of each in turn, their prefetch
// streams together (as the K-quant tile, linear_kquant_avx2.cpp: one prefetched stream kept too
// few lines in flight for a Zen 2 core); Q4_0 decode 52-55 -> 58-64 % of the roofline on one core
// (bench/results/2026-11-29-epyc-zen2-2c-avx2-w4-side-by-side).
void quant_batch_tile_avx2(const QuantTile& t) {
  // 16 ymm hold 4 rows: taller tiles go 4 rows at a time.
  for (int row = 0; row < t.mr; row += 4) {
    QuantTile part = t;
    part.mr = t.mr - row < 4 ? t.mr - row : 4;
    part.xq = t.xq + static_cast<size_t>(row) * t.ldxq;
    part.xscale = t.xscale + row;
    part.xqsum = t.xqsum + row;
    part.xqhalf = t.xqhalf + row;
    if (t.bits == 4 && t.mr == 1 && t.np == 2) {  // W4 decode of one row: both panels side by side
      batch_panel<1, 4, 2>(part, 0, t.out);
      continue;
    }
    for (int q = 0; q < t.np; ++q) {
      kBatchPanels[t.bits == 4][part.mr - 1](part, q, t.out + static_cast<size_t>(row) * kQuantTileCols + 16 * q);
    }
  }
}

}  // namespace slab::kern::detail
