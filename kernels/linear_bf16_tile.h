#pragma once
// Internal to linear_bf16*.cpp: one register tile of the BF16 linear, described with plain
// pointers so that the scalar and AVX-512 implementations share the driver.
#include <cstddef>

#include "kernels/amx_tiles.h"
#include "kernels/bf16.h"

namespace slab::kern::detail {

struct Tile {
  const bf16_t* a = nullptr;  // x row 0 at element 2·pair0
  size_t lda = 0;
  const bf16_t* b = nullptr;  // panel 0 at pair0 (next panel: + panel_stride elements)
  size_t panel_stride = 0;
  int mr = 1;              // rows, 1..8
  int np = 1;              // panels, 1..2 (32 or 64 columns); the AVX2 decode tile of 1..2 rows: 1..4
  int n_pairs = 0;         // full k-pairs
  bool half_pair = false;  // then one more pair whose x high element is K's end (zero)
  // Software prefetch: pf_lines 64-byte lines from pf (in panel 0; the same offset in the
  // second panel), pf_per_pair of them per k-pair iteration (0: none). The lines may lie past
  // the matrix: prefetches never fault.
  const bf16_t* pf = nullptr;
  int pf_lines = 0;
  int pf_per_pair = 0;
  // Accumulator source and sink: scratch c [mr][ldc] FP32 (all np·32 columns).
  float* c = nullptr;
  size_t ldc = 0;
  bool load_c = false;    // start from c (else from zero)
  bool epilogue = false;  // finish into out (else store to c)
  // Epilogue: columns [0, n_valid) of the tile are real; rows are all real.
  float* out_f32 = nullptr;
  bf16_t* out_bf16 = nullptr;
  size_t ldo = 0;
  const float* bias = nullptr;      // at the tile's first column
  const float* residual = nullptr;  // at the tile's first row and column
  size_t ldr = 0;
  int n_valid = 0;
  // AVX2 and AVX-512 fp32_products, large M: the tile's block of weights as FP32
  // (fp32_block_buffer), k-major:
  // wf[k][np·32] for k < 2·(n_pairs + half_pair). Null: convert in the tile. wf_fill (= wf, for
  // the group's first row tile): the tile writes that block from b as it computes; the later
  // row tiles read it.
  const float* wf = nullptr;
  float* wf_fill = nullptr;
};

void tile_scalar(const Tile& t);
// The FP32 blocks (Tile::wf: AVX2, and AVX-512 with LinearBlocking::fp32_products) take at most
// this many k-pairs: the driver caps its K block.
inline constexpr int kFp32MaxBlockPairs = 256;
void tile_avx2(const Tile& t);
// Room for the FP32 form of `pairs` k-pairs of np panels ([2·pairs][np·32]), a buffer of the
// calling thread's that the next call reuses, 64-byte aligned.
float* fp32_block_buffer(int np, int pairs);
// With t.wf: the FP32-product form (6 rows at most); else vdpbf16ps.
void tile_avx512_bf16(const Tile& t);
// Epilogue of one row of one tile from FP32 sums: + bias, + residual, store FP32 or BF16.
void finish_row(const float* acc, int n_valid, const float* bias, const float* residual, float* out_f32,
                bf16_t* out_bf16);
void convert_f32_to_bf16_avx512(bf16_t* dst, const float* src, size_t n);
void convert_f32_to_bf16_avx2(bf16_t* dst, const float* src, size_t n);

// The AMX block (linear_bf16_amx.cpp), on a thread's AmxTiles (kernels/amx_tiles.h).
// c[r][0..32) = x[r][0..k) · panel for r < rows (1..32): one 32-column panel at pair 0, k a
// multiple of 32, FP32 sums to c (row stride ldc floats). Reconfigures the tiles when rows
// differs from the loaded configuration. prefetch_bytes > 0: each K step also prefetches the
// weights that far ahead into L2 (LinearBlocking::amx_prefetch_bytes), never at or past
// prefetch_end (null: the panel's end; the caller's run of contiguous panels may go further).
void amx_panel_bf16(AmxTiles& tiles, const bf16_t* x, size_t ldx, int rows, const bf16_t* panel, int k, float* c,
                    size_t ldc, size_t prefetch_bytes = 0, const bf16_t* prefetch_end = nullptr);
// K-blocked AMX (LinearBlocking::amx_k_block). amx_pack_x copies rows (1..32) × k (a multiple
// of 32) of x into xa as k/32 steps of [32 rows][32 elements] (2 KB each; rows past `rows` are
// left as they are: the tile configuration never reads them).
void amx_pack_x(bf16_t* xa, const bf16_t* x, size_t ldx, int rows, int k);
// c[r][0..32) (+)= xa block · panel block for r < rows: `panel` at the block's first pair, k
// elements; load_c starts from c (else from zero). Same tile configuration as amx_panel_bf16.
void amx_packed_block_bf16(AmxTiles& tiles, const bf16_t* xa, int rows, const bf16_t* panel, int k, float* c,
                           size_t ldc, bool load_c);

}  // namespace slab::kern::detail
