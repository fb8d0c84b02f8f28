// Quantized prefill on the AMX-BF16 tiles: a panel pair (2 × 16 columns) dequantized once to a
// BF16 panel in linear_bf16's packed layout, then every 32-row tile of the BF16 activations
// multiplies on it with TDPBF16PS (linear_bf16_amx.cpp's pass) into FP32 sums.
//
// Why not the INT8 tiles: their products are exact, but each activation block of 32 (or 128)
// needs its own FP32 epilogue (convert, scale, accumulate: ~10 vector instructions per 16 sums
// and block, after a tile store and reload), and that epilogue, not TDPBSUD, bounds them: on a
// 2-core Xeon the INT8 AMX path ran W8/W4/Q4_K linears at 300-340 GOP/s a core where the BF16
// tiles run 850-1000 GFLOP/s. Dequantizing costs a pass over the pair's codes per call (under
// half a vector instruction per weight), shared by every row tile: about half the path's time
// at M = 64, ~15 % at 512.
//
// The numbers differ from the INT8 paths' (which all agree bit for bit): each weight is its
// FP32 value fma(scale, code, offset) rounded to BF16 (to nearest, ties away from zero:
// relative error ≤ 2^-9), and the
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

// One 64-byte step of codes (16 column lanes × 4 k, code i of lane c at bits 8i of it, masked by
// kMask) to BF16 pairs 2s and 2s + 1 of the panel's columns 16q .. 16q + 15. Rounded to nearest,
// ties away from zero, in the integer unit: + 0x8000 on the FP32 bits, whose top halves are then
// the BF16 values, merged into the pairs by one shift and one select per pair. vcvtneps2bf16
// (ties to even) and the widening shuffle the pairs then need took three uops per 16 weights,
// two on the shuffle port.
template <int kMask>
SLAB_AVX512_QUANT inline void dequantize_step(bf16_t* panel, int q, __m512i v, int s, const ColumnAffine& f) {
  const __m512i mask = _mm512_set1_epi32(kMask);
  const __m512i half_ulp = _mm512_set1_epi32(0x8000);
  const __m512i high_half = _mm512_set1_epi32(static_cast<int>(0xffff0000u));
  __m512i rounded[4];
  for (int i = 0; i < 4; ++i) {
    const __m512i code = _mm512_and_si512(_mm512_srli_epi32(v, 8 * i), mask);
    const __m512 value = _mm512_fmadd_ps(f.scale, _mm512_cvtepi32_ps(code), f.offset);
    rounded[i] = _mm512_add_epi32(_mm512_castps_si512(value), half_ulp);
  }
  for (int pair = 0; pair < 2; ++pair) {
    // Column c's two k of the pair side by side: the low k in the low half of lane c (0xe4:
    // the high half from the odd k, the low half from the even k shifted down).
    const __m512i even = _mm512_srli_epi32(rounded[2 * pair], 16);
    const __m512i both = _mm512_ternarylogic_epi32(rounded[2 * pair + 1], even, high_half, 0xe4);
    _mm512_storeu_si512(panel + (2 * static_cast<size_t>(s) + pair) * 64 + 32 * q, both);
  }
}

// Byte steps [s0, s1) (step s: k = 4s .. 4s + 3): W8 codes, or those unpack_*_codes made.
SLAB_AVX512_QUANT void dequantize_byte_steps(bf16_t* panel, int q, const uint8_t* bytes, int s0, int s1,
                                             const ColumnAffine& f) {
  for (int s = s0; s < s1; ++s) {
    dequantize_step<0xff>(panel, q, _mm512_loadu_si512(bytes + 64 * static_cast<size_t>(s)), s, f);
  }
}

// n nibble steps of 4-bit codes read in place from `nibbles`, the panel's steps t0 .. t0 + n − 1
// (step t: low nibbles k = 8t + j, high nibbles 8t + 4 + j per lane, j = 0..3: the byte steps
// 2t and 2t + 1 that unpack_w4_codes would write), so W4 and Q4_K skip the unpacking pass and
// its round trip through memory.
SLAB_AVX512_QUANT void dequantize_nibble_steps(bf16_t* panel, int q, const uint8_t* nibbles, int t0, int n,
                                               const ColumnAffine& f) {
  for (int i = 0; i < n; ++i) {
    const __m512i v = _mm512_loadu_si512(nibbles + 64 * static_cast<size_t>(i));
    dequantize_step<0x0f>(panel, q, v, 2 * (t0 + i), f);
    dequantize_step<0x0f>(panel, q, _mm512_srli_epi32(v, 4), 2 * (t0 + i) + 1, f);
  }
}

}  // namespace

SLAB_AVX512_QUANT void dequantize_pair_bf16(bf16_t* panel, const QuantTile& w, const uint8_t* const bytes[2], int k) {
  const bool nibbles = dequantizes_nibbles(w);
  for (int q = 0; q < w.np; ++q) {
    if (w.k_quant) {
      const KQuantLayout l = kquant_layout(w.bits);
      const int group_k = kquant_has_mins(w.bits) ? 32 : 16;
      for (int k0 = 0; k0 < k; k0 += group_k) {
        const uint8_t* rec = tile_panel(w, q) + static_cast<size_t>(k0 / kKQuantSuperK) * l.record;
        const int gi = (k0 % kKQuantSuperK) / group_k;
        const ColumnAffine f = kquant_affine(rec, l, w.bits, gi);
        if (nibbles) {  // Q4_K: group gi's 32 k, 4 nibble steps from kquant_nibbles_at(l, 4 gi) on
          dequantize_nibble_steps(panel, q, rec + kquant_nibbles_at(l, 4 * gi), k0 / 8, 4, f);
        } else {
          dequantize_byte_steps(panel, q, bytes[q], k0 / 4, (k0 + group_k) / 4, f);
        }
      }
      continue;
    }
    // Plain formats: group_steps 64-byte steps of the packed codes per group (4 k a step for
    // W8, 8 for W4).
    const int step_k = nibbles ? 8 : 4;
    const int steps = k / step_k;
    const int group_steps = w.group_steps * quant_step_k(w.bits) / step_k;
    for (int g = 0, s = 0; s < steps; ++g) {
      const int end = w.groups == 1 ? steps : std::min(steps, (g + 1) * group_steps);
      if (nibbles) {
        dequantize_nibble_steps(panel, q, tile_panel(w, q) + 64 * static_cast<size_t>(s), s, end - s,
                                plain_affine(w, q, g));
      } else {
        dequantize_byte_steps(panel, q, bytes[q], s, end, plain_affine(w, q, g));
      }
      s = end;
    }
  }
  if (w.np == 1) {  // columns 16..31 stay zero: their sums are never stored
    for (int p = 0; p < k / 2; ++p) std::memset(panel + static_cast<size_t>(p) * 64 + 32, 0, 32 * sizeof(bf16_t));
  }
}

}  // namespace slab::kern::detail
