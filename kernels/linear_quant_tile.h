#pragma once
// Internal to linear_quant*.cpp: one register tile of the quantized linear (up to 8 or 6 rows ×
// up to 2 panels of 16 columns over the whole of K), described with plain pointers so that the scalar,
// AVX2 and AVX-512 implementations share the driver. A tile writes FP32 sums in natural column
// order; the driver adds bias / residual and stores (finish_row of linear_bf16_tile.h).
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/linear_quant.h"

namespace slab::kern::detail {

inline constexpr int kQuantDecodeTileRows = 8;  // decode: every row of M <= 8 in one pass
inline constexpr int kQuantBatchTileRows = 6;   // batched: 6 x 2 INT32 + 6 x 2 FP32 zmm
// Rows of a batched tile: W4 needs 4 zmm of nibbles per step, so it stops at 4 rows.
inline int batch_tile_rows(int bits) { return bits == 8 ? kQuantBatchTileRows : 4; }
inline constexpr int kQuantTileCols = 32;  // out row stride of a tile

struct QuantTile {
  // Weights: np panels from `panel`, panel_stride bytes apart (panel_bytes: consecutive; SwiGLU:
  // a gate panel and its up panel), see linear_quant.h for the layout. next_tile_bytes: from
  // `panel` to the next tile's first panel in the thread's stream (prefetches run ahead into it).
  const uint8_t* panel = nullptr;
  size_t panel_bytes = 0;
  size_t panel_stride = 0;
  size_t next_tile_bytes = 0;
  size_t code_bytes = 0;  // offset of a panel's scales
  int np = 1;             // 1..2
  int bits = 8;           // 8 or 4
  int groups = 1;
  int group_steps = 0;      // 64-byte code steps per group
  bool zero_point = false;  // zeros stored after the scales; else implied_zero(bits)
  int mr = 1;               // rows 1..kQuantDecodeTileRows (decode) or batch_tile_rows(bits)
  // Decode (weight-only): BF16 rows padded with zeros to the padded K, FP32 sums per group.
  const bf16_t* x = nullptr;
  size_t ldx = 0;
  const float* xsum = nullptr;  // [mr][groups]
  // Batched: INT8 rows (padded K), their scales and INT32 sums per kQuantActBlock block of K.
  const int8_t* xq = nullptr;
  size_t ldxq = 0;
  int blocks = 0;                  // padded K / kQuantActBlock
  size_t ldxs = 0;                 // block stride of xscale and xqsum (block-major: a tile's rows adjacent)
  const float* xscale = nullptr;   // [blocks][ldxs], rows 0..mr-1
  const int32_t* xqsum = nullptr;  // [blocks][ldxs]
  // Batched tiles that stream their panels from memory (W4 decode: each panel is read once)
  // prefetch ahead; the batched M > 8 ones read them from L2 after the first row tile.
  bool stream = false;
  const uint8_t* stream_end = nullptr;  // prefetches stop here (the end of the thread's run)
  float* out = nullptr;                 // [mr][kQuantTileCols]
};

inline int implied_zero(int bits) { return bits == 8 ? 128 : 8; }
inline int quant_step_k(int bits) { return bits == 8 ? 4 : 8; }  // K elements per 64-byte step
// Batched tiles: 64-byte code steps per activation block, and activation blocks per weight group.
inline int block_steps(int bits) { return kQuantActBlock / quant_step_k(bits); }
inline int blocks_per_group(const QuantTile& t) { return t.group_steps / block_steps(t.bits); }

// Scales and zeros of panel q (of the tile) and group g, 16 BF16 values each.
inline const bf16_t* tile_scales(const QuantTile& t, int q, int g) {
  return reinterpret_cast<const bf16_t*>(t.panel + static_cast<size_t>(q) * t.panel_stride + t.code_bytes) +
         static_cast<size_t>(g) * 16;
}
inline const bf16_t* tile_zeros(const QuantTile& t, int q, int g) {
  return tile_scales(t, q, g) + static_cast<size_t>(t.groups) * 16;
}

// Weight-only decode tiles: W8 (the scalar one takes either width).
void quant_decode_tile_scalar(const QuantTile& t);
void quant_decode_tile_avx2(const QuantTile& t);
void quant_decode_tile_avx512(const QuantTile& t);
void quant_batch_tile_scalar(const QuantTile& t);
void quant_batch_tile_avx2(const QuantTile& t);
void quant_batch_tile_avx512(const QuantTile& t);

// One activation row to INT8 (phase 1 of M > 8; W4 decode on each thread), block b = elements [32b, 32b + 32) of the
// kp (a multiple of 32; zeros past k): scales[b · stride] = max|x| / 127 over the block, xq = x ·
// (127 / max) rounded to nearest even, clamped to ±127; sums[b · stride] = Σ xq over the block.
// Bit-identical across ISAs.
void quantize_row_scalar(int8_t* xq, float* scales, int32_t* sums, size_t stride, const bf16_t* x, int k, int kp);
void quantize_row_avx2(int8_t* xq, float* scales, int32_t* sums, size_t stride, const bf16_t* x, int k, int kp);
void quantize_row_avx512(int8_t* xq, float* scales, int32_t* sums, size_t stride, const bf16_t* x, int k, int kp);

}  // namespace slab::kern::detail
