// AMX INT8 tile of the quantized linear (INT8 activations against W8, W4 and the K-quant
// formats): up to 32 rows × 2 panels of 16 columns over the whole of K, per activation block
// TDPBSUD into INT32 tiles, then the FP32 epilogue of the AVX-512 register tile
// (linear_quant_avx512.cpp, linear_kquant_avx512.cpp) in its order.
//
// Layouts: a W8 panel's codes already are AMX's B layout for 16 columns — a 64-byte step holds,
// per column, 4 consecutive k (the 32-bit lane) — so 16 steps are one B tile of K = 64 at a row
// stride of 64 bytes, read in place. W4 and K-quant panels are unpacked to that layout first (the
// driver does it once per panel pair, before the row tiles pass over it; K-quant codes with their
// top bits: 0..15, 0..31 or 0..63, unsigned as TDPBSUD's B operand wants). The A tiles are 16 INT8 activation
// rows × 32 or 64 bytes straight from the quantized rows (stride: the padded K).
//
// Tiles: tmm0..3 the INT32 C blocks [A tile i][B tile j] (C[i][j] = tmm 2i + j), tmm4/5 the A
// tiles (rows 0..15 and 16..31), tmm6/7 the B tiles (panels 0 and 1). An activation block (32 or
// 128 elements, quant_act_block) is one or two TDPBSUD of K = 32 or 64 per C tile: with blocks of
// 32 the A tiles are 32 bytes wide and the B tiles 8 rows; Q6_K's sub-groups of 16 take one of
// K = 16 each. After each block the C tiles go to
// memory and the epilogue adds −zero · Σxq (symmetric formats; the integer sum is then the same
// as the register tiles', whose accumulators start there), converts to FP32 and accumulates
// fma(weight scale · activation scale, d, total) with the AVX-512 instructions of the batched
// tile, so AMX, AVX-512, AVX2 and scalar give identical bits.
//
// Written once against a tile backend: the hardware (intrinsics) or AmxEmulator
// (kernels/amx_tiles.h), which runs the same tiling on CPUs without AMX in the tests. The
// function carries the AMX target attribute; only the hardware backend emits tile instructions,
// and it is only called after cpu_features() reported amx_int8 and enable_amx_tiles() got the
// kernel's permission.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/amx_backend.h"
#include "kernels/amx_tiles.h"
#include "kernels/linear_quant_avx512_ops.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
namespace {

constexpr int kAmxTileRows = 16;

// rows (1..32) activation rows, chunk K bytes (16, 32 or 64) per TDPBSUD.
AmxTileConfig tile_config(int rows, int chunk) {
  const int r0 = rows < kAmxTileRows ? rows : kAmxTileRows;
  const int r1 = rows - r0;
  AmxTileConfig cfg;
  cfg.set(0, r0, 64);  // C[0][0], C[0][1]: 16 INT32 columns
  cfg.set(1, r0, 64);
  cfg.set(2, r1, 64);  // C[1][0], C[1][1]: rows of A tile 1 (unused at 16 rows and fewer)
  cfg.set(3, r1, 64);
  cfg.set(4, r0, chunk);  // A0, A1
  cfg.set(5, r1, chunk);
  cfg.set(6, chunk / 4, 64);  // B0, B1: chunk / 4 steps of 4 k per column
  cfg.set(7, chunk / 4, 64);
  return cfg;
}

// One tile's pass: its rows and panels, the INT32 block sums c and the FP32 totals.
struct Pass {
  const QuantTile& t;
  bool two_a, two_b;
  alignas(64) int32_t c[kQuantAmxRows][kQuantTileCols];
  alignas(64) float total[kQuantAmxRows][kQuantTileCols];
};

template <typename Tiles>
SLAB_AMX_KERNEL void configure(const QuantTile& t, AmxQuantTiles& state, const Tiles& tiles, int chunk) {
  if (state.rows == t.mr && state.chunk == chunk) return;
  tiles.load_config(tile_config(t.mr, chunk));
  state.rows = t.mr;
  state.chunk = chunk;
}

// c = the rows' INT8 activations [k0, k0 + chunks · chunk) · the panels' byte codes there.
template <typename Tiles>
SLAB_AMX_KERNEL void block_sums(Pass& p, const Tiles& tiles, size_t k0, int chunk, int chunks) {
  constexpr size_t kBStride = 64;  // one 4-k step of 16 columns
  constexpr size_t kCStride = kQuantTileCols * sizeof(int32_t);
  const QuantTile& t = p.t;
  tiles.template zero<0>();
  if (p.two_b) tiles.template zero<1>();
  if (p.two_a) {
    tiles.template zero<2>();
    if (p.two_b) tiles.template zero<3>();
  }
  for (int ch = 0; ch < chunks; ++ch) {
    const size_t kb = k0 + static_cast<size_t>(ch) * chunk;  // INT8: bytes = k
    const size_t step = kb / 4 * kBStride;
    tiles.template load<4>(t.xq + kb, t.ldxq);
    tiles.template load<6>(t.byte_codes[0] + step, kBStride);
    tiles.template dpbsud<0, 4, 6>();
    if (p.two_a) {
      tiles.template load<5>(t.xq + static_cast<size_t>(kAmxTileRows) * t.ldxq + kb, t.ldxq);
      tiles.template dpbsud<2, 5, 6>();
    }
    if (p.two_b) {
      tiles.template load<7>(t.byte_codes[1] + step, kBStride);
      tiles.template dpbsud<1, 4, 7>();
      if (p.two_a) tiles.template dpbsud<3, 5, 7>();
    }
  }
  tiles.template store<0>(&p.c[0][0], kCStride);
  if (p.two_b) tiles.template store<1>(&p.c[0][16], kCStride);
  if (p.two_a) {
    tiles.template store<2>(&p.c[kAmxTileRows][0], kCStride);
    if (p.two_b) tiles.template store<3>(&p.c[kAmxTileRows][16], kCStride);
  }
}

SLAB_AMX_KERNEL inline __m512i sums_of(const Pass& p, int r, int q, int32_t start) {
  return _mm512_add_epi32(_mm512_set1_epi32(start), _mm512_load_si512(&p.c[r][16 * q]));
}
SLAB_AMX_KERNEL inline void add_total(Pass& p, int r, int q, __m512 scale, __m512 d) {
  _mm512_store_ps(&p.total[r][16 * q], _mm512_fmadd_ps(scale, d, _mm512_load_ps(&p.total[r][16 * q])));
}

// W8 / W4: per weight group, per activation block; the batched register tile's epilogue.
template <typename Tiles>
SLAB_AMX_KERNEL void plain_tile(Pass& p, AmxQuantTiles& state, const Tiles& tiles) {
  const QuantTile& t = p.t;
  const int chunk = t.act_block == kQuantActBlock ? 32 : 64;
  configure(t, state, tiles, chunk);
  const bool per_channel = t.groups == 1;
  const int per_group = blocks_per_group(t);
  const int groups = per_channel ? 1 : t.groups;
  const int implied = t.zero_point ? 0 : implied_zero(t.bits);
  __m512 wscale[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()}, zero[2] = {wscale[0], wscale[1]};
  for (int g = 0; g < groups; ++g) {
    for (int q = 0; q < t.np; ++q) {
      wscale[q] = load_bf16x16(tile_scales(t, q, g));
      if (t.zero_point) zero[q] = load_bf16x16(tile_zeros(t, q, g));
    }
    const int b_end = per_channel ? t.blocks : (g + 1) * per_group;
    for (int b = per_channel ? 0 : g * per_group; b < b_end; ++b) {
      block_sums(p, tiles, static_cast<size_t>(b) * t.act_block, chunk, t.act_block / chunk);
      const int32_t* xqsum = t.xqsum + static_cast<size_t>(b) * t.ldxs;
      const float* xscales = t.xscale + static_cast<size_t>(b) * t.ldxs;
      for (int r = 0; r < t.mr; ++r) {
        const __m512 xscale = _mm512_set1_ps(xscales[r]);
        for (int q = 0; q < t.np; ++q) {
          __m512 d = _mm512_cvtepi32_ps(sums_of(p, r, q, -implied * xqsum[r]));
          if (t.zero_point) d = _mm512_fnmadd_ps(zero[q], _mm512_set1_ps(static_cast<float>(xqsum[r])), d);
          add_total(p, r, q, per_channel ? xscale : _mm512_mul_ps(wscale[q], xscale), d);
        }
      }
    }
  }
  if (per_channel) {
    for (int r = 0; r < t.mr; ++r) {
      for (int q = 0; q < t.np; ++q) {
        _mm512_store_ps(&p.total[r][16 * q], _mm512_mul_ps(_mm512_load_ps(&p.total[r][16 * q]), wscale[q]));
      }
    }
  }
}

// Q4_K / Q5_K / Q6_K: per super-block, per block of 32; the K-quant register tile's epilogue
// (linear_kquant_avx512.cpp). 4/5-bit: one TDPBSUD of K = 32 per block; 6-bit: one of K = 16
// per half block (its sub-groups of 16 have scales of their own).
template <typename Tiles>
SLAB_AMX_KERNEL void kquant_tile(Pass& p, AmxQuantTiles& state, const Tiles& tiles) {
  const QuantTile& t = p.t;
  constexpr int kBlocks = kKQuantSuperK / kQuantActBlock;
  const bool mins = kquant_has_mins(t.bits);
  const KQuantLayout l = kquant_layout(t.bits);
  configure(t, state, tiles, mins ? 32 : 16);
  for (int sb = 0; sb < t.super_blocks; ++sb) {
    const uint8_t* rec[2] = {};
    for (int q = 0; q < t.np; ++q) {
      rec[q] = t.panel + static_cast<size_t>(q) * t.panel_stride + static_cast<size_t>(sb) * l.record;
    }
    for (int lb = 0; lb < kBlocks; ++lb) {
      const int b = sb * kBlocks + lb;
      const size_t k0 = static_cast<size_t>(b) * kQuantActBlock;
      const int32_t* xqsum = t.xqsum + static_cast<size_t>(b) * t.ldxs;
      const float* xscales = t.xscale + static_cast<size_t>(b) * t.ldxs;
      const int32_t* xqhalf = t.xqhalf + static_cast<size_t>(b) * t.ldxs;
      __m512 s0[2], s1[2], o[2];
      for (int q = 0; q < t.np; ++q) {
        const __m512 dq = load_f16x16(rec[q] + l.d);
        if (mins) {
          s0[q] = _mm512_mul_ps(dq, load_u8x16(rec[q] + l.scales + 16 * static_cast<size_t>(lb)));
          o[q] =
              _mm512_mul_ps(load_f16x16(rec[q] + l.dmin), load_u8x16(rec[q] + l.mins + 16 * static_cast<size_t>(lb)));
        } else {
          s0[q] = _mm512_mul_ps(dq, load_i8x16(rec[q] + l.scales + 32 * static_cast<size_t>(lb)));
          s1[q] = _mm512_mul_ps(dq, load_i8x16(rec[q] + l.scales + 32 * static_cast<size_t>(lb) + 16));
        }
      }
      if (mins) {
        block_sums(p, tiles, k0, 32, 1);
        for (int r = 0; r < t.mr; ++r) {
          const __m512 xscale = _mm512_set1_ps(xscales[r]);
          for (int q = 0; q < t.np; ++q) {
            const __m512 inner = _mm512_fnmadd_ps(o[q], _mm512_set1_ps(static_cast<float>(xqsum[r])),
                                                  _mm512_mul_ps(s0[q], _mm512_cvtepi32_ps(sums_of(p, r, q, 0))));
            add_total(p, r, q, xscale, inner);
          }
        }
        continue;
      }
      for (int half = 0; half < 2; ++half) {
        block_sums(p, tiles, k0 + 16 * static_cast<size_t>(half), 16, 1);
        for (int r = 0; r < t.mr; ++r) {
          const __m512 xscale = _mm512_set1_ps(xscales[r]);
          const int32_t start = -32 * (half == 0 ? xqhalf[r] : xqsum[r] - xqhalf[r]);
          for (int q = 0; q < t.np; ++q) {
            add_total(p, r, q, _mm512_mul_ps(xscale, half == 0 ? s0[q] : s1[q]),
                      _mm512_cvtepi32_ps(sums_of(p, r, q, start)));
          }
        }
      }
    }
  }
}

template <typename Tiles>
SLAB_AMX_KERNEL void amx_tile(const QuantTile& t, AmxQuantTiles& state, const Tiles& tiles) {
  Pass p{t, t.mr > kAmxTileRows, t.np == 2, {}, {}};  // totals from zero
  if (t.k_quant) {
    kquant_tile(p, state, tiles);
  } else {
    plain_tile(p, state, tiles);
  }
  for (int r = 0; r < t.mr; ++r) {
    for (int q = 0; q < t.np; ++q) {
      _mm512_storeu_ps(t.out + static_cast<size_t>(r) * kQuantTileCols + 16 * q, _mm512_load_ps(&p.total[r][16 * q]));
    }
  }
}

}  // namespace

SLAB_AMX_KERNEL void quant_batch_tile_amx(const QuantTile& t, AmxQuantTiles& tiles) {
  if (tiles.emulator) {
    amx_tile(t, tiles, EmulatedTiles{*tiles.emulator});
  } else {
    amx_tile(t, tiles, HardwareTiles{});
  }
}

SLAB_AMX_KERNEL void quant_amx_release(AmxQuantTiles& tiles) {
  if (tiles.rows == 0) return;
  release_tiles(tiles.emulator);
  tiles.rows = 0;
  tiles.chunk = 0;
}

SLAB_AMX_KERNEL void unpack_w4_codes(uint8_t* dst, const uint8_t* codes, int kp) {
  // W4 step s: low nibbles k = 8s + j, high nibbles 8s + 4 + j (j = 0..3) per 32-bit lane; as
  // bytes they are W8 steps 2s and 2s + 1.
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  for (int s = 0; s < kp / 8; ++s) {
    const __m512i v = _mm512_loadu_si512(codes + 64 * static_cast<size_t>(s));
    _mm512_storeu_si512(dst + 128 * static_cast<size_t>(s), _mm512_and_si512(v, nibble));
    _mm512_storeu_si512(dst + 128 * static_cast<size_t>(s) + 64, _mm512_and_si512(_mm512_srli_epi16(v, 4), nibble));
  }
}

SLAB_AMX_KERNEL void unpack_kquant_codes(uint8_t* dst, const uint8_t* panel, int bits, int super_blocks) {
  // Each record's 32 nibble steps as W4's, with the top bits of 5- and 6-bit codes added as the
  // K-quant register tile does (linear_kquant_avx512.cpp).
  const KQuantLayout l = kquant_layout(bits);
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const __m512i low2 = _mm512_set1_epi8(0x03), next2 = _mm512_set1_epi8(0x0c);
  for (int sb = 0; sb < super_blocks; ++sb) {
    const uint8_t* rec = panel + static_cast<size_t>(sb) * l.record;
    for (int s = 0; s < kKQuantSuperK / 8; ++s) {
      const __m512i v = _mm512_loadu_si512(rec + kquant_nibbles_at(l, s));
      __m512i lo = _mm512_and_si512(v, nibble);
      __m512i hi = _mm512_and_si512(_mm512_srli_epi32(v, 4), nibble);
      if (bits == 6) {
        const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(rec + kquant_high_at(l, s)));
        const __m512i hh = _mm512_inserti64x4(_mm512_castsi256_si512(h), _mm256_srli_epi16(h, 4), 1);
        lo = _mm512_or_si512(lo, _mm512_slli_epi32(_mm512_and_si512(hh, low2), 4));
        hi = _mm512_or_si512(hi, _mm512_slli_epi32(_mm512_and_si512(hh, next2), 2));
      } else if (bits == 5) {
        __m512i lo_bits, hi_bits;
        kquant_fifth_bits(rec + kquant_high_at(l, s), &lo_bits, &hi_bits);
        lo = _mm512_or_si512(lo, lo_bits);
        hi = _mm512_or_si512(hi, hi_bits);
      }
      uint8_t* out = dst + static_cast<size_t>(sb) * (kKQuantSuperK / 4) * 64 + 128 * static_cast<size_t>(s);
      _mm512_storeu_si512(out, lo);
      _mm512_storeu_si512(out + 64, hi);
    }
  }
}

}  // namespace slab::kern::detail
