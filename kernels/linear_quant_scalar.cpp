// Scalar tiles of the quantized linear (decode and batched) and the scalar INT8 activation rows:
// the reference every SIMD tile equals bit for bit, and the path of CPUs without AVX2.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {

void quantize_row_scalar(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x,
                         int k, int kp, int block) {
  for (int b = 0; b * block < kp; ++b) {
    const int lo = b * block, hi = lo + block;
    float amax = 0.0f;
    for (int i = lo; i < std::min(hi, k); ++i) amax = std::max(amax, std::fabs(bf16_to_f32(x[i])));
    const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
    scales[b * stride] = amax / 127.0f;
    int32_t sum = 0;
    for (int i = lo; i < hi; ++i) {
      const float v = i < k ? bf16_to_f32(x[i]) * inv : 0.0f;
      xq[i] = static_cast<int8_t>(std::clamp(static_cast<int>(std::nearbyint(v)), -127, 127));
      sum += xq[i];
      if (i == lo + 15) halves[b * stride] = sum;
    }
    sums[b * stride] = sum;
  }
}

void quantize_row_int16_scalar(int16_t* x16, float* scales, int32_t* sums, const bf16_t* x, int k, int kp, int block) {
  for (int b = 0; b * block < kp; ++b) {
    const int lo = b * block, hi = lo + block;
    float amax = 0.0f;
    for (int i = lo; i < std::min(hi, k); ++i) amax = std::max(amax, std::fabs(bf16_to_f32(x[i])));
    uint32_t max_bits;
    std::memcpy(&max_bits, &amax, sizeof(max_bits));
    // The biased exponent e of max|x| is E + 126: x16 = x · 2^(141 − e), scale 2^(e − 141), with e
    // raised to 15 so that both stay normal.
    const int e = std::max(15, static_cast<int>(max_bits >> 23));
    const float mult = std::ldexp(1.0f, 141 - e);
    scales[b] = amax > 0.0f ? std::ldexp(1.0f, e - 141) : 0.0f;
    int32_t sum = 0;
    for (int i = lo; i < hi; ++i) {
      const float v = i < k ? std::nearbyint(bf16_to_f32(x[i]) * mult) : 0.0f;
      // Finite x stays within ±32640; non-finite x becomes −32768, as vcvtps2dq and a saturating
      // pack make it (garbage either way, but no undefined conversion).
      x16[i] = v >= -32768.0f && v <= 32767.0f ? static_cast<int16_t>(v) : int16_t{-32768};
      sum += x16[i];
    }
    sums[b] = sum;
  }
}

namespace {
int tile_code(const QuantTile& t, int q, int c, int kk) {
  bool high = false;
  const uint8_t b = t.panel[static_cast<size_t>(q) * t.panel_stride + code_offset(t.bits, c, kk, &high)];
  return t.bits == 8 ? b : (high ? b >> 4 : b & 0x0f);
}
float tile_zero(const QuantTile& t, int q, int g, int c) {
  return t.zero_point ? bf16_to_f32(tile_zeros(t, q, g)[c]) : static_cast<float>(implied_zero(t.bits));
}
}  // namespace

void quant_decode_tile_scalar(const QuantTile& t) {
  const int block_steps = t.x16_block / quant_step_k(t.bits);
  const int blocks = t.groups * t.group_steps / block_steps, blocks_per_group = t.group_steps / block_steps;
  for (int r = 0; r < t.mr; ++r) {
    const int16_t* x = t.x16 + static_cast<size_t>(r) * t.ldx16;
    const float* xscale = t.x16scale + static_cast<size_t>(r) * t.ldx16s;
    const int32_t* xsum = t.x16sum + static_cast<size_t>(r) * t.ldx16s;
    for (int q = 0; q < t.np; ++q) {
      for (int c = 0; c < kQuantPanelCols; ++c) {
        float total = 0.0f;
        for (int b = 0; b < blocks; ++b) {
          const int g = b / blocks_per_group;
          int32_t dot = 0;  // exact: |x16| <= 32640, codes <= 255, at most 128 of them
          for (int kk = b * t.x16_block; kk < (b + 1) * t.x16_block; ++kk) dot += x[kk] * tile_code(t, q, c, kk);
          // Σ code·x16 − zero·Σx16: in INT32 for the implied zero (exact), the one FP32 rounding of
          // the exact value for stored ones.
          const float d = t.zero_point
                              ? std::fma(-tile_zero(t, q, g, c), static_cast<float>(xsum[b]), static_cast<float>(dot))
                              : static_cast<float>(dot - implied_zero(t.bits) * xsum[b]);
          total = std::fma(bf16_to_f32(tile_scales(t, q, g)[c]) * xscale[b], d, total);
        }
        t.out[static_cast<size_t>(r) * kQuantTileCols + q * kQuantPanelCols + c] = total;
      }
    }
  }
}

void quant_batch_tile_scalar(const QuantTile& t) {
  const int per_group = blocks_per_group(t);
  const bool per_channel = t.groups == 1;
  for (int r = 0; r < t.mr; ++r) {
    const int8_t* xq = t.xq + static_cast<size_t>(r) * t.ldxq;
    const float* xscale = t.xscale + r;
    const int32_t* xqsum = t.xqsum + r;
    for (int q = 0; q < t.np; ++q) {
      for (int c = 0; c < kQuantPanelCols; ++c) {
        float total = 0.0f;
        for (int b = 0; b < t.blocks; ++b) {
          const int g = b / per_group;
          int32_t dot = 0;
          for (int kk = b * t.act_block; kk < (b + 1) * t.act_block; ++kk) dot += xq[kk] * tile_code(t, q, c, kk);
          const size_t bi = static_cast<size_t>(b) * t.ldxs;
          // d = Σ xq·code − zero·Σxq: exact in FP32 for integer zeros (|d| < 2^24), the one
          // rounding of the exact value for fractional ones (GGUF K-quant mins).
          const float d = std::fma(-tile_zero(t, q, g, c), static_cast<float>(xqsum[bi]), static_cast<float>(dot));
          const float scale = per_channel ? xscale[bi] : bf16_to_f32(tile_scales(t, q, g)[c]) * xscale[bi];
          total = std::fma(scale, d, total);
        }
        if (per_channel) total *= bf16_to_f32(tile_scales(t, q, 0)[c]);
        t.out[static_cast<size_t>(r) * kQuantTileCols + q * kQuantPanelCols + c] = total;
      }
    }
  }
}

}  // namespace slab::kern::detail
