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
// W8 decode (weight-only, BF16 activations): per group, Σ code·x in FP32 lanes (column, k mod 4)
// and Σx, then scale · (Σ code·x − zero · Σx) into the totals; the four lanes of a column are
// added at the end. Rows go two at a time, sharing each widened code vector (decode_rows2_panel;
// the panel comes from cache for the later rows). W4 decode runs the batched tiles on INT8
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

// 4 BF16 values of x as FP32 in both 128-bit halves.
SLAB_AVX2 inline __m256 broadcast_x4(const bf16_t* p) {
  uint64_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  const __m128i w = _mm_cvtepu16_epi32(_mm_cvtsi64_si128(static_cast<long long>(bits)));
  const __m128 f = _mm_castsi128_ps(_mm_slli_epi32(w, 16));
  return _mm256_set_m128(f, f);
}

// One activation row × one panel, weight-only (W8 decode): per group, Σ code·x in FP32 lanes
// (codes are exact in FP32) and Σx, then scale · (Σ code·x − zero · Σx) folded into the totals,
// as the AVX-512 decode tile does. Expanding every code to a weight first (fma(code, scale,
// −scale·zero), from per-lane scale tables rebuilt per group) cost twice the instructions: W8
// decode ran at a third of the read bandwidth on AVX2.
SLAB_AVX2 void decode_row_panel(const QuantTile& t, int r, int q, float* out16) {
  const bf16_t* x = t.x + static_cast<size_t>(r) * t.ldx;
  const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride;
  constexpr int kStepK = 4;
  // Lanes 0..3 of pair i: column 2i at k ≡ 0..3 (mod 4); lanes 4..7: column 2i + 1.
  alignas(32) float total[8][8] = {};
  for (int g = 0; g < t.groups; ++g) {
    __m256 acc[8];
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) acc[i] = _mm256_setzero_ps();
    __m256 xsum = _mm256_setzero_ps();
    for (int s = g * t.group_steps; s < (g + 1) * t.group_steps; ++s) {
      const uint8_t* step = codes + 64 * static_cast<size_t>(s);
      // As in the AVX-512 decode tile: a few KB ahead; later rows read the panel from cache.
      if (r == 0) _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T0);
      const __m256 xv = broadcast_x4(x + static_cast<size_t>(s) * kStepK);
      xsum = _mm256_add_ps(xsum, xv);
#pragma GCC unroll 8
      for (int i = 0; i < 8; ++i) {  // columns 2i, 2i + 1
        const __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(step + 8 * i)));
        acc[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), xv, acc[i]);
      }
    }
    const bf16_t* scales = tile_scales(t, q, g);
    const bf16_t* zeros = t.zero_point ? tile_zeros(t, q, g) : nullptr;
#pragma GCC unroll 8
    for (int i = 0; i < 8; ++i) {
      const float z0 = zeros ? bf16_to_f32(zeros[2 * i]) : static_cast<float>(implied_zero(8));
      const float z1 = zeros ? bf16_to_f32(zeros[2 * i + 1]) : static_cast<float>(implied_zero(8));
      const __m256 scale =
          _mm256_set_m128(_mm_set1_ps(bf16_to_f32(scales[2 * i + 1])), _mm_set1_ps(bf16_to_f32(scales[2 * i])));
      const __m256 zero = _mm256_set_m128(_mm_set1_ps(z1), _mm_set1_ps(z0));
      const __m256 d = _mm256_fnmadd_ps(zero, xsum, acc[i]);
      _mm256_store_ps(total[i], _mm256_fmadd_ps(scale, d, _mm256_load_ps(total[i])));
    }
  }
  for (int i = 0; i < 8; ++i) {
    const float* lanes = total[i];
    out16[2 * i] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
    out16[2 * i + 1] = (lanes[4] + lanes[5]) + (lanes[6] + lanes[7]);
  }
}

// Column pairs 4·half .. 4·half + 3 of a group of two rows: Σ code·x per lane into acc and Σx into
// xsum, from x widened to FP32 (xf rows of ldxf floats, at the group's first k).
SLAB_AVX2 inline void rows2_steps(const uint8_t* codes, int s0, int n, int half, bool prefetch, const float* xf,
                                  size_t ldxf, __m256 (&acc)[2][4], __m256 (&xsum)[2]) {
  for (int s = 0; s < n; ++s) {
    const uint8_t* step = codes + 64 * static_cast<size_t>(s0 + s) + 32 * static_cast<size_t>(half);
    if (prefetch) _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T0);
    const __m256 xv0 = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(xf + 4 * s));
    const __m256 xv1 = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(xf + ldxf + 4 * s));
    xsum[0] = _mm256_add_ps(xsum[0], xv0);
    xsum[1] = _mm256_add_ps(xsum[1], xv1);
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {  // columns 2i, 2i + 1 with i = 4·half + j
      const __m256 w =
          _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(step + 8 * j))));
      acc[0][j] = _mm256_fmadd_ps(w, xv0, acc[0][j]);
      acc[1][j] = _mm256_fmadd_ps(w, xv1, acc[1][j]);
    }
  }
}

// total[row][i] += scale · (sums[row][i] − zero · xsum[row]) for column pair i of group g: the
// group epilogue of decode_row_panel.
SLAB_AVX2 inline void rows2_group_end(const QuantTile& t, int q, int g, int i, const __m256 (&sum)[2],
                                      const __m256 (&xsum)[2], float (&total)[2][8][8]) {
  const bf16_t* scales = tile_scales(t, q, g);
  const bf16_t* zeros = t.zero_point ? tile_zeros(t, q, g) : nullptr;
  const float z0 = zeros ? bf16_to_f32(zeros[2 * i]) : static_cast<float>(implied_zero(8));
  const float z1 = zeros ? bf16_to_f32(zeros[2 * i + 1]) : static_cast<float>(implied_zero(8));
  const __m256 scale =
      _mm256_set_m128(_mm_set1_ps(bf16_to_f32(scales[2 * i + 1])), _mm_set1_ps(bf16_to_f32(scales[2 * i])));
  const __m256 zero = _mm256_set_m128(_mm_set1_ps(z1), _mm_set1_ps(z0));
  for (int row = 0; row < 2; ++row) {
    const __m256 d = _mm256_fnmadd_ps(zero, xsum[row], sum[row]);
    _mm256_store_ps(total[row][i], _mm256_fmadd_ps(scale, d, _mm256_load_ps(total[row][i])));
  }
}

// Two activation rows × one panel (W8 decode, M >= 2): decode_row_panel's operations in its order
// for each row, but every widened code vector serves both rows. 8 column pairs × 2 rows of sums
// would fill all 16 registers, so each stretch of K is walked twice, 4 column pairs at a time,
// over x widened to FP32 once per chunk of 64 steps (Σx is summed again on the second walk: the
// same operations, the same values). Groups of up to 64 steps (Q8_0's 32 elements) keep their
// sums in registers; longer ones park them in L1 between chunks. One row at a time, every code
// was widened once per row: on 2 Zen 5 cores M = 8 read 13-15 % of the bandwidth, slower than
// BF16 weights of twice the bytes (bench/results/2026-11-27-epyc-zen5-2c-avx2-w8-decode).
SLAB_AVX2 void decode_rows2_panel(const QuantTile& t, int r, int q, float* out0, float* out1) {
  const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride;
  constexpr int kChunkSteps = 64;
  alignas(32) float xf[2][4 * kChunkSteps];
  alignas(32) float total[2][8][8] = {};
  const bool stream = r == 0;
  auto widen_x = [&](int s0, int n) SLAB_AVX2 {
    for (int row = 0; row < 2; ++row) {
      const bf16_t* x = t.x + static_cast<size_t>(r + row) * t.ldx + 4 * static_cast<size_t>(s0);
      for (int k = 0; k < 4 * n; k += 8) _mm256_store_ps(xf[row] + k, load_bf16x8(x + k));
    }
  };
  const int gs = t.group_steps;
  if (gs <= kChunkSteps && kChunkSteps % gs == 0) {
    // Small groups (Q8_0's 32): a chunk holds whole groups, each group's sums stay in registers.
    const int chunk_groups = kChunkSteps / gs;
    for (int g0 = 0; g0 < t.groups; g0 += chunk_groups) {
      const int g1 = g0 + chunk_groups < t.groups ? g0 + chunk_groups : t.groups;
      widen_x(g0 * gs, (g1 - g0) * gs);
      for (int half = 0; half < 2; ++half) {
        for (int g = g0; g < g1; ++g) {
          __m256 acc[2][4], xsum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
#pragma GCC unroll 2
          for (auto& row : acc) {
            for (auto& a : row) a = _mm256_setzero_ps();
          }
          const size_t at = 4 * static_cast<size_t>((g - g0) * gs);
          rows2_steps(codes, g * gs, gs, half, stream && half == 0, xf[0] + at, xf[1] - xf[0], acc, xsum);
#pragma GCC unroll 4
          for (int j = 0; j < 4; ++j) rows2_group_end(t, q, g, 4 * half + j, {acc[0][j], acc[1][j]}, xsum, total);
        }
      }
    }
  } else {
    // Large groups (per channel, 128): the group is walked in chunks, its sums parked in L1.
    alignas(32) float sums[2][8][8];
    alignas(32) float xsums[2][2][8];
    for (int g = 0; g < t.groups; ++g) {
      std::memset(sums, 0, sizeof(sums));
      std::memset(xsums, 0, sizeof(xsums));
      for (int s0 = g * gs; s0 < (g + 1) * gs; s0 += kChunkSteps) {
        const int n = (g + 1) * gs - s0 < kChunkSteps ? (g + 1) * gs - s0 : kChunkSteps;
        widen_x(s0, n);
        for (int half = 0; half < 2; ++half) {
          __m256 acc[2][4], xsum[2];
#pragma GCC unroll 2
          for (int row = 0; row < 2; ++row) {
            xsum[row] = _mm256_load_ps(xsums[half][row]);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) acc[row][j] = _mm256_load_ps(sums[row][4 * half + j]);
          }
          rows2_steps(codes, s0, n, half, stream && half == 0, xf[0], xf[1] - xf[0], acc, xsum);
#pragma GCC unroll 2
          for (int row = 0; row < 2; ++row) {
            _mm256_store_ps(xsums[half][row], xsum[row]);
#pragma GCC unroll 4
            for (int j = 0; j < 4; ++j) _mm256_store_ps(sums[row][4 * half + j], acc[row][j]);
          }
        }
      }
      for (int i = 0; i < 8; ++i) {
        const __m256 sum[2] = {_mm256_load_ps(sums[0][i]), _mm256_load_ps(sums[1][i])};
        const __m256 xsum[2] = {_mm256_load_ps(xsums[0][0]), _mm256_load_ps(xsums[0][1])};
        rows2_group_end(t, q, g, i, sum, xsum, total);
      }
    }
  }
  float* outs[2] = {out0, out1};
  for (int row = 0; row < 2; ++row) {
    for (int i = 0; i < 8; ++i) {
      const float* lanes = total[row][i];
      outs[row][2 * i] = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
      outs[row][2 * i + 1] = (lanes[4] + lanes[5]) + (lanes[6] + lanes[7]);
    }
  }
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

// MR rows × one panel (two ymm of 8 columns); FP32 totals in `total` [MR][16] across the
// activation blocks, in the scalar tile's order (see linear_quant.h).
template <int MR, int BITS>
SLAB_AVX2 void batch_panel(const QuantTile& t, int q, float* out) {
  const uint8_t* codes = t.panel + static_cast<size_t>(q) * t.panel_stride;
  const __m256i ones = _mm256_set1_epi16(1);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  constexpr int kStepK = BITS == 8 ? 4 : 8;
  const int block_steps = t.act_block / kStepK;
  // W8's lane_dot already subtracted 128 · Σxq.
  const int code_shift = BITS == 8 ? 128 : 0;
  const bool per_channel = t.groups == 1;
  const int per_group = blocks_per_group(t);
  alignas(32) float total[MR][16] = {};
  __m256 wscale[2] = {};
  __m256 zero_left[2] = {};
  for (int b = 0, g = 0, in_group = 0; b < t.blocks; ++b, ++in_group) {
    if (in_group == per_group) {
      in_group = 0;
      ++g;
    }
    if (in_group == 0) {
      for (int h = 0; h < 2; ++h) {
        wscale[h] = load_bf16x8(tile_scales(t, q, g) + 8 * h);
        const __m256 zero = t.zero_point ? load_bf16x8(tile_zeros(t, q, g) + 8 * h)
                                         : _mm256_set1_ps(static_cast<float>(implied_zero(BITS)));
        zero_left[h] = _mm256_sub_ps(zero, _mm256_set1_ps(static_cast<float>(code_shift)));  // exact
      }
    }
    __m256i acc[MR][2];
    for (int r = 0; r < MR; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
    for (int s = b * block_steps; s < (b + 1) * block_steps; ++s) {
      const uint8_t* step = codes + 64 * static_cast<size_t>(s);
      // Into L2 (T1), as the AVX-512 tiles: the Q4_0 file at --kernels avx2 decoded 39-40 ->
      // 45 tok/s on Zen 4 against T0 (three alternating rounds, same bandwidth).
      if (t.stream) _mm_prefetch(reinterpret_cast<const char*>(step) + 4096, _MM_HINT_T1);
      for (int h = 0; h < 2; ++h) {
        const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(step + 32 * h));
#pragma GCC unroll 4
        for (int r = 0; r < MR; ++r) {
          const int8_t* xr = t.xq + static_cast<size_t>(r) * t.ldxq + static_cast<size_t>(s) * kStepK;
          const __m256i x_lo = _mm256_set1_epi32(static_cast<int>(load_u32(xr)));
          if constexpr (BITS == 8) {
            acc[r][h] = _mm256_add_epi32(acc[r][h], lane_dot<8>(v, x_lo, ones));
          } else {
            const __m256i x_hi = _mm256_set1_epi32(static_cast<int>(load_u32(xr + 4)));
            const __m256i lo = _mm256_and_si256(v, nibble);
            const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(v, 4), nibble);
            // Both halves' s16 pair sums stay <= 4·15·127: add before widening.
            const __m256i pairs = _mm256_add_epi16(_mm256_maddubs_epi16(lo, x_lo), _mm256_maddubs_epi16(hi, x_hi));
            acc[r][h] = _mm256_add_epi32(acc[r][h], _mm256_madd_epi16(pairs, ones));
          }
        }
      }
    }
    for (int r = 0; r < MR; ++r) {
      const size_t rb = static_cast<size_t>(b) * t.ldxs + r;
      const __m256 xscale = _mm256_set1_ps(t.xscale[rb]);
      const __m256 xs = _mm256_set1_ps(static_cast<float>(t.xqsum[rb]));
      for (int h = 0; h < 2; ++h) {
        const __m256 d = _mm256_fnmadd_ps(zero_left[h], xs, _mm256_cvtepi32_ps(acc[r][h]));
        const __m256 scale = per_channel ? xscale : _mm256_mul_ps(wscale[h], xscale);
        _mm256_store_ps(total[r] + 8 * h, _mm256_fmadd_ps(scale, d, _mm256_load_ps(total[r] + 8 * h)));
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    for (int h = 0; h < 2; ++h) {
      const __m256 v = _mm256_load_ps(total[r] + 8 * h);
      _mm256_storeu_ps(out + static_cast<size_t>(r) * kQuantTileCols + 8 * h,
                       per_channel ? _mm256_mul_ps(v, wscale[h]) : v);
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

void quant_decode_tile_avx2(const QuantTile& t) {
  for (int r = 0; r < t.mr; r += 2) {
    for (int q = 0; q < t.np; ++q) {
      float* out = t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q;
      if (r + 1 < t.mr) {
        decode_rows2_panel(t, r, q, out, out + kQuantTileCols);
      } else {
        decode_row_panel(t, r, q, out);
      }
    }
  }
}

void quant_batch_tile_avx2(const QuantTile& t) {
  // 16 ymm hold 4 rows: taller tiles go 4 rows at a time.
  for (int row = 0; row < t.mr; row += 4) {
    QuantTile part = t;
    part.mr = t.mr - row < 4 ? t.mr - row : 4;
    part.xq = t.xq + static_cast<size_t>(row) * t.ldxq;
    part.xscale = t.xscale + row;
    part.xqsum = t.xqsum + row;
    part.xqhalf = t.xqhalf + row;
    for (int q = 0; q < t.np; ++q) {
      kBatchPanels[t.bits == 4][part.mr - 1](part, q, t.out + static_cast<size_t>(row) * kQuantTileCols + 16 * q);
    }
  }
}

}  // namespace slab::kern::detail
