#pragma once
// Internal to linear_quant*.cpp: one register tile of the quantized linear (up to 8 or 6 rows ×
// up to 2 panels of 16 columns over the whole of K), described with plain pointers so that the scalar,
// AVX2 and AVX-512 implementations share the driver. A tile writes FP32 sums in natural column
// order; the driver adds bias / residual and stores (finish_row of linear_bf16_tile.h).
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/amx_tiles.h"
#include "kernels/bf16.h"
#include "kernels/linear_quant.h"

namespace slab::kern::detail {

inline constexpr int kQuantDecodeTileRows = 8;  // decode: every row of M <= 8 in one pass
inline constexpr int kQuantBatchTileRows = 6;   // batched: 6 x 2 INT32 + 6 x 2 FP32 zmm
// Rows of a batched tile: 6, but 4 for the K-quant tiles (their sub-scale and min vectors take
// the registers: 6 rows on AVX-512 ran 4-10 % slower for Q4_K and ~25 % for Q6_K at M = 16 and
// 128, bench_linear_quant --kinds q4k,q6k, three alternating rounds on Zen 4) and for W4 on AVX2 (16 ymm hold 4 rows; its tile runs taller ones 4 rows at a
// time, so a 6-row tile would be 4 + 2). AVX-512's W4 6 x 2 tile spills a few of its FP32 totals
// and still ran 4-7 % faster than 4 x 2 (Zen 4, one core and two, M = 16 and 128,
// bench_linear_quant --kinds w4g32, alternating runs): the nibbles are unpacked once per 6 rows.
inline int batch_tile_rows(const QuantFormat& f, Isa isa) {
  if (f.k_quant || (f.bits == 4 && isa == Isa::avx2)) return 4;
  return kQuantBatchTileRows;
}
inline constexpr int kQuantTileCols = 32;  // out row stride of a tile

struct QuantTile {
  // Weights: np panels from `panel`, panel_stride bytes apart (panel_bytes: consecutive; SwiGLU:
  // a gate panel and its up panel), see linear_quant.h for the layout; panels 2 and 3 (one row on
  // AVX2 only: W8 decode and K-quant) are panels 0 and 1 moved on by pair_stride bytes (tile_panel).
  // next_tile_bytes: from `panel` to the next tile's first panel in the thread's stream
  // (prefetches run ahead into it).
  const uint8_t* panel = nullptr;
  size_t panel_bytes = 0;
  size_t panel_stride = 0;
  size_t pair_stride = 0;
  size_t next_tile_bytes = 0;
  size_t code_bytes = 0;  // offset of a panel's scales
  int np = 1;             // 1..2, or 4 (pair_stride)
  int bits = 8;           // 8 or 4
  int groups = 1;
  int group_steps = 0;      // 64-byte code steps per group
  bool zero_point = false;  // zeros stored after the scales; else implied_zero(bits)
  int mr = 1;               // rows 1..kQuantDecodeTileRows (decode) or batch_tile_rows()
  // Decode (weight-only, quant_int16_activations): INT16 rows (padded K), row stride ldx16, and per
  // block of x16_block elements of K a power-of-two scale and Σ x16 ([mr][ldx16s] each).
  const int16_t* x16 = nullptr;
  size_t ldx16 = 0;
  int x16_block = 0;
  size_t ldx16s = 0;
  const float* x16scale = nullptr;
  const int32_t* x16sum = nullptr;
  // Batched: INT8 rows (padded K), their scales and INT32 sums per act_block elements of K
  // (quant_act_block: 32, or 128 for per-channel and g128 weights; K-quant tiles: always 32).
  const int8_t* xq = nullptr;
  size_t ldxq = 0;
  int act_block = kQuantActBlock;
  int blocks = 0;                   // padded K / act_block
  size_t ldxs = 0;                  // block stride of xscale and xqsum (block-major: a tile's rows adjacent)
  const float* xscale = nullptr;    // [blocks][ldxs], rows 0..mr-1
  const int32_t* xqsum = nullptr;   // [blocks][ldxs]
  const int32_t* xqhalf = nullptr;  // [blocks][ldxs]: Σxq over the first 16 of each block
  // K-quant formats: the panel is super_blocks records of kquant_layout(bits).record bytes.
  bool k_quant = false;
  int super_blocks = 0;
  // Batched tiles that stream their panels from memory (W4 decode: each panel is read once)
  // prefetch ahead; the batched M > 8 ones read them from L2 after the first row tile.
  bool stream = false;
  // Prefetches stop here: the end of the thread's run, or for a run's last tile the end of the
  // thread's next run, which next_tile_bytes then points into (linear_quant.cpp, DecodeRun).
  const uint8_t* stream_end = nullptr;
  float* out = nullptr;  // [mr][kQuantTileCols] (four panels: one row of 64)
  // AMX tiles: each panel's codes one byte per code in W8's step layout (64-byte steps of 4 k per
  // 32-bit lane): W8 the panel's own codes, W4 and K-quant ones unpacked (unpack_*_codes).
  const uint8_t* byte_codes[2] = {};
  // K-quant batched tiles on AVX2: the np panels' scale tables (kquant_scale_table_avx2), each
  // super_blocks · kKQuantTableFloats floats, made once for every row tile; null: the tile
  // forms the products itself.
  const float* kq_table = nullptr;
};

// Byte offsets inside one K-quant super-block record of a panel (linear_quant.h): 8 code blocks
// of 4 steps (a step: 8 k of 16 columns), each block its 4 steps' nibbles (256 bytes) and then,
// for 5- and 6-bit codes, their high bits (4 × 16 or 4 × 32 bytes), so that a tile reading a
// block's steps reads the record forward; then the tail.
struct KQuantLayout {
  size_t block = 0;      // bytes of a code block: 256, 320 (5-bit), 384 (6-bit)
  size_t high_step = 0;  // high-bit bytes of a step: 0, 16 (5-bit), 32 (6-bit)
  size_t d = 0;          // 16 FP16
  size_t dmin = 0;       // 4/5-bit: 16 FP16
  size_t scales = 0;     // [groups per super-block][16]
  size_t mins = 0;       // 4/5-bit: [8][16]
  size_t record = 0;     // the whole record, a multiple of 64
};
inline KQuantLayout kquant_layout(int bits) {
  constexpr size_t kBlockNibbles = 4 * 64;
  KQuantLayout l;
  l.high_step = bits == 4 ? 0 : bits == 5 ? 16 : 32;
  l.block = kBlockNibbles + 4 * l.high_step;
  l.d = 8 * l.block;
  if (bits != 6) {
    l.dmin = l.d + 32;
    l.scales = l.dmin + 32;
    l.mins = l.scales + 8 * 16;
    l.record = l.mins + 8 * 16;  // 2368 (4-bit), 2880 (5-bit)
  } else {
    l.scales = l.d + 32;
    l.record = (l.scales + 16 * 16 + 63) / 64 * 64;  // 3392
  }
  return l;
}
// Where code step s (0..31) of a record starts: its 64 nibble bytes, and its high bits.
inline size_t kquant_nibbles_at(const KQuantLayout& l, int s) {
  return static_cast<size_t>(s / 4) * l.block + 64 * static_cast<size_t>(s % 4);
}
inline size_t kquant_high_at(const KQuantLayout& l, int s) {
  return static_cast<size_t>(s / 4) * l.block + 256 + l.high_step * static_cast<size_t>(s % 4);
}

// Unaligned loads of activation bytes (a broadcast's 4 or 8 INT8 / 4 BF16 values).
inline uint32_t load_u32(const void* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
inline uint64_t load_u64(const void* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

inline int implied_zero(int bits) { return bits == 8 ? 128 : 8; }
inline int quant_step_k(int bits) { return bits == 8 ? 4 : 8; }  // K elements per 64-byte step
// Byte offset of (column c of a panel, k) in the panel's codes, and whether it is a high nibble.
inline size_t code_offset(int bits, int c, int k, bool* high) {
  const int step_k = quant_step_k(bits);
  const int j = k % step_k;
  *high = bits == 4 && j >= 4;
  return static_cast<size_t>(k / step_k) * 64 + 4 * static_cast<size_t>(c) + static_cast<size_t>(j % 4);
}
// Batched tiles: 64-byte code steps per activation block, and activation blocks per weight group.
inline int block_steps(const QuantTile& t) { return t.act_block / quant_step_k(t.bits); }
inline int blocks_per_group(const QuantTile& t) { return t.group_steps / block_steps(t); }

// Panel q of the tile.
inline const uint8_t* tile_panel(const QuantTile& t, int q) {
  return t.panel + static_cast<size_t>(q % 2) * t.panel_stride + static_cast<size_t>(q / 2) * t.pair_stride;
}
// Scales and zeros of panel q (of the tile) and group g, 16 BF16 values each.
inline const bf16_t* tile_scales(const QuantTile& t, int q, int g) {
  return reinterpret_cast<const bf16_t*>(tile_panel(t, q) + t.code_bytes) + static_cast<size_t>(g) * 16;
}
inline const bf16_t* tile_zeros(const QuantTile& t, int q, int g) {
  return tile_scales(t, q, g) + static_cast<size_t>(t.groups) * 16;
}

// Weight-only decode tiles (W8 on INT16 activations): every ISA gives the scalar tile's bits.
void quant_decode_tile_scalar(const QuantTile& t);
void quant_decode_tile_avx2(const QuantTile& t);
void quant_decode_tile_avx512(const QuantTile& t);
void quant_batch_tile_scalar(const QuantTile& t);
void quant_batch_tile_avx2(const QuantTile& t);
void quant_batch_tile_avx512(const QuantTile& t);
// K-quant tiles (kernels/linear_kquant*.cpp): INT8 activations, any M, up to 4 rows and 2 panels.
// Bits 4 and 5 share the min-offset arithmetic, 6 has the sub-groups of 16.
constexpr bool kquant_has_mins(int bits) { return bits != 6; }
void kquant_tile_scalar(const QuantTile& t);
void kquant_tile_avx2(const QuantTile& t);
// A K-quant panel's per-block FP32 scale factors, [super_blocks][8 blocks][2 halves of 8
// columns][2][8]: 4/5-bit d·sc and dmin·m, 6-bit d·sc of the block's first and second 16. Every
// row tile of a batched call needs the same ones, and forming them took ~7 % of the AVX2 tile's
// time at M = 16-128; the same products as the tile's, so the same bits.
inline constexpr int kKQuantTableFloats = 8 * 2 * 2 * 8;
void kquant_scale_table_avx2(float* table, const uint8_t* panel, int bits, int super_blocks);
void kquant_tile_avx512(const QuantTile& t);
// The code of column c at k of panel q (0..15 or 0..63), for the scalar tiles and dequantizing.
int kquant_code(const uint8_t* panel, int bits, int c, int k);
// dequantize_quant_rows for the K-quant formats.
void dequantize_kquant_rows(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int k, int first,
                            int rows);

// AMX INT8 tiles (linear_quant_amx.cpp), every format: up to
// kQuantAmxRows rows × np panels over the whole of K, TDPBSUD of the INT8 rows (signed) against
// byte_codes (unsigned) per activation block, then the batched tiles' FP32 epilogue in the same
// order, so the results equal the other ISAs' bit for bit. A thread's tile configuration lives in
// AmxQuantTiles; with `emulator` set the tile instructions run on it (kernels/amx_tiles.h) instead
// of the hardware.
inline constexpr int kQuantAmxRows = 32;  // two 16-row A tiles
struct AmxQuantTiles {
  int rows = 0;   // the loaded configuration's rows (0: none loaded)
  int chunk = 0;  // and its K bytes per TDPBSUD (32 or 64)
  AmxEmulator* emulator = nullptr;
};
void quant_batch_tile_amx(const QuantTile& t, AmxQuantTiles& tiles);
void quant_amx_release(AmxQuantTiles& tiles);
// The AMX-BF16 prefill (linear_quant_amx_bf16.cpp): the tile's np panels, from their byte codes
// (W8's own or unpacked as for the INT8 tiles; 4-bit codes, W4 and Q4_K, are read in place and
// `bytes` is not read: dequantizes_nibbles), dequantized over K = k (a multiple of 32) to one
// BF16 panel in linear_bf16's packed layout (k / 2 pairs of 32 columns; panel q in columns
// 16q .. 16q + 15, zeros there for a missing second panel).
void dequantize_pair_bf16(bf16_t* panel, const QuantTile& w, const uint8_t* const bytes[2], int k);
inline bool dequantizes_nibbles(const QuantTile& w) { return w.bits == 4; }
// W4 panel codes (kp / 8 steps of 64 bytes) as bytes: kp / 4 steps of W8's layout, 16 · kp bytes.
void unpack_w4_codes(uint8_t* dst, const uint8_t* codes, int kp);
// The same for a K-quant panel (super_blocks records of `bits`): codes 0..15, 0..31 or 0..63.
void unpack_kquant_codes(uint8_t* dst, const uint8_t* panel, int bits, int super_blocks);

// One activation row to INT8 (phase 1 of M > 8; W4 decode on each thread), block b = elements
// [block·b, block·b + block) of the kp (a multiple of block, 32 or 128; zeros past k):
// scales[b · stride] = max|x| / 127 over the block, xq = x · (127 / max) rounded to nearest even,
// clamped to ±127; sums[b · stride] = Σ xq over the block, halves[b · stride] = Σ xq over its
// first 16 (the K-quant 6-bit tiles' sub-groups, with blocks of 32). Bit-identical across ISAs.
void quantize_row_scalar(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x,
                         int k, int kp, int block);
void quantize_row_avx2(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x, int k,
                       int kp, int block);
void quantize_row_avx512(int8_t* xq, float* scales, int32_t* sums, int32_t* halves, size_t stride, const bf16_t* x,
                         int k, int kp, int block);

// One activation row to INT16 for the W8 decode tiles (quant_int16_activations), per block b of
// `block` elements of the kp (zeros past k): with E the exponent of the block's max|x| (max|x| =
// m · 2^E, 0.5 <= m < 1), x16 = x · 2^(15 − E) rounded to nearest even (|x16| <= 32640: BF16 has
// 8 significant bits), scales[b] = 2^(E − 15), sums[b] = Σ x16. Values whose exponent is within 7
// of the max's keep every bit; the others are rounded to a multiple of 2^(E − 15) (half a step,
// at most max|x| · 2^-15 off). E is at least −111 (a block whose max is below 2^-112 takes the scale
// 2^-126); an all-zero block gets scale 0. Non-finite x is not supported (the activations of a
// model that diverged). Bit-identical across ISAs.
void quantize_row_int16_scalar(int16_t* x16, float* scales, int32_t* sums, const bf16_t* x, int k, int kp, int block);
void quantize_row_int16_avx2(int16_t* x16, float* scales, int32_t* sums, const bf16_t* x, int k, int kp, int block);

}  // namespace slab::kern::detail
