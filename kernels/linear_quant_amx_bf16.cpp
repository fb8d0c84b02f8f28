// Quantized prefill on the AMX-BF16 tiles: a panel pair (2 × 16 columns) dequantized once to a
// BF16 panel in linear_bf16's packed layout, then every 32-row tile of the BF16 activations
// multiplies on it with TDPBF16PS (linear_bf16_amx.cpp's pass) into FP32 sums.
//
// Why not the INT8 tiles: their products are exact, but each activation block of 32 (or 128)
// needs its own FP32 epilogue (convert, scale, accumulate: ~10 vector instructions per 16 sums
// and block, after a tile store and reload), and that epilogue, not TDPBSUD, bounds them: on a
// 2-core Xeon the INT8 AMX path ran W8/W4/Q4_K linears at 300-340 GOP/s a core where the BF16
// tiles run 850-1000 GFLOP/s. Dequantizing costs a pass over the pair's codes per call
// (~2 vector instructions per weight), shared by every row tile.
//
// The numbers differ from the INT8 paths' (which all agree bit for bit): each weight is its
// FP32 value fma(scale, code, offset) rounded to BF16 (relative error ≤ 2^-9), and the
// activations keep their BF16 values instead of INT8 per block (relative error up to 2^-8 of
// the block's largest). linear_quant.h says where the driver takes this path.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_avx512_ops.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
namespace {

// Per column of a 16-column panel: weight = scale · code + offset over the K range of one group.
struct ColumnAffine {
  __m512 scale, offset;
};

// W8 / W4 (codes 0..255 / 0..15): (code − zero) · scale of group g.
SLAB_AVX512_QUANT ColumnAffine plain_affine(const QuantTile& w, int q, int g) {
  const __m512 scale = load_bf16x16(tile_scales(w, q, g));
  const __m512 zero =
      w.zero_point ? load_bf16x16(tile_zeros(w, q, g)) : _mm512_set1_ps(static_cast<float>(implied_zero(w.bits)));
  return {scale, _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), zero), scale)};
}

// K-quant group gi (of 32 elements with mins, of 16 for 6 bits) of super-block record `rec`:
// d·sc · code − dmin·m, or 6-bit d·sc · (code − 32).
SLAB_AVX512_QUANT ColumnAffine kquant_affine(const uint8_t* rec, const KQuantLayout& l, int bits, int gi) {
  const __m512 d = load_f16x16(rec + l.d);
  if (kquant_has_mins(bits)) {
    const __m512 scale = _mm512_mul_ps(d, load_u8x16(rec + l.scales + 16 * static_cast<size_t>(gi)));
    const __m512 min =
        _mm512_mul_ps(load_f16x16(rec + l.dmin), load_u8x16(rec + l.mins + 16 * static_cast<size_t>(gi)));
    return {scale, _mm512_sub_ps(_mm512_setzero_ps(), min)};
  }
  const __m512 scale = _mm512_mul_ps(d, load_i8x16(rec + l.scales + 16 * static_cast<size_t>(gi)));
  return {scale, _mm512_mul_ps(_mm512_set1_ps(-32.0f), scale)};
}

// Steps [s0, s1) of byte codes (step s: k = 4s .. 4s + 3, 4 bytes per column lane) to BF16
// pairs 2s and 2s + 1 of the panel's columns 16q .. 16q + 15.
SLAB_AVX512_QUANT void dequantize_steps(bf16_t* panel, int q, const uint8_t* bytes, int s0, int s1,
                                        const ColumnAffine& f) {
  const __m512i low_byte = _mm512_set1_epi32(0xff);
  for (int s = s0; s < s1; ++s) {
    const __m512i v = _mm512_loadu_si512(bytes + 64 * static_cast<size_t>(s));
    __m512i bits[4];
    for (int i = 0; i < 4; ++i) {
      const __m512i code = _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), low_byte);
      const __m512 value = _mm512_fmadd_ps(f.scale, _mm512_cvtepi32_ps(code), f.offset);
      bits[i] = _mm512_cvtepu16_epi32((__m256i)_mm512_cvtneps_pbh(value));
    }
    for (int pair = 0; pair < 2; ++pair) {
      // Column c's two k of the pair side by side: the low k in the low half of lane c.
      const __m512i both = _mm512_or_si512(bits[2 * pair], _mm512_slli_epi32(bits[2 * pair + 1], 16));
      _mm512_storeu_si512(panel + (2 * static_cast<size_t>(s) + pair) * 64 + 32 * q, both);
    }
  }
}

}  // namespace

SLAB_AVX512_QUANT void dequantize_pair_bf16(bf16_t* panel, const QuantTile& w, const uint8_t* const bytes[2], int k) {
  const int steps = k / 4;
  for (int q = 0; q < w.np; ++q) {
    if (w.k_quant) {
      const KQuantLayout l = kquant_layout(w.bits);
      const int group_k = kquant_has_mins(w.bits) ? 32 : 16;
      for (int k0 = 0; k0 < k; k0 += group_k) {
        const uint8_t* rec = tile_panel(w, q) + static_cast<size_t>(k0 / kKQuantSuperK) * l.record;
        const ColumnAffine f = kquant_affine(rec, l, w.bits, (k0 % kKQuantSuperK) / group_k);
        dequantize_steps(panel, q, bytes[q], k0 / 4, (k0 + group_k) / 4, f);
      }
      continue;
    }
    // Plain formats: group_steps 64-byte steps of the packed codes per group, 4 k per byte step.
    const int group_k = w.group_steps * quant_step_k(w.bits);
    for (int g = 0, s = 0; s < steps; ++g) {
      const int end = w.groups == 1 ? steps : std::min(steps, (g + 1) * group_k / 4);
      dequantize_steps(panel, q, bytes[q], s, end, plain_affine(w, q, g));
      s = end;
    }
  }
  if (w.np == 1) {  // columns 16..31 stay zero: their sums are never stored
    for (int p = 0; p < k / 2; ++p) std::memset(panel + static_cast<size_t>(p) * 64 + 32, 0, 32 * sizeof(bf16_t));
  }
}

}  // namespace slab::kern::detail
