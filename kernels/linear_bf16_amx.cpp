// AMX-BF16 block of the linear kernel (tdpbf16ps): rows × 32 columns of one packed panel over
// the whole of K, the sums left in FP32 scratch for the driver's epilogue (linear_bf16.cpp).
//
// The packed panel already is AMX's B layout: a k-pair of a panel holds 32 columns × 2 BF16
// (128 bytes), so 16 consecutive pairs of columns 0..15 (or 16..31) are one B tile of 16 rows ×
// 64 bytes at a row stride of 128 bytes. A tiles are 16 rows of x × 32 BF16 straight from the
// activation rows (stride ldx). Nothing is repacked.
//
// Tiles: tmm0..3 the C blocks [A tile i][B tile j], tmm4/5 the two A tiles (rows 0..15 and
// 16..31), tmm6/7 the two B tiles. Per 32 elements of K: 4 loads, 4 tdpbf16ps (a 2×2 block,
// each load used twice). Row counts below 32 shorten the A and C tiles in the configuration,
// so no load reads a row past the matrix.
//
// Only called after cpu_features() reported amx_bf16 and enable_amx_tiles() (runtime/) got the
// kernel's permission for the tile state; the function carries the target attribute, as the
// AVX-512 files do, so the rest of the binary stays baseline x86-64.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/amx_tiles.h"
#include "kernels/linear_bf16_tile.h"

#define SLAB_AMX_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))

namespace slab::kern::detail {
namespace {

SLAB_AMX_BF16 void load_config(int rows) {
  const int r0 = rows < 16 ? rows : 16;
  const int r1 = rows - r0;
  AmxTileConfig cfg;
  auto set = [&cfg](int tile, int r) { cfg.set(tile, r, 64); };
  set(0, r0);  // C[0][0], C[0][1]: rows of A tile 0
  set(1, r0);
  set(2, r1);  // C[1][0], C[1][1]: rows of A tile 1 (unused when rows <= 16)
  set(3, r1);
  set(4, r0);  // A0
  set(5, r1);  // A1
  set(6, 16);  // B0, B1: 16 k-pairs
  set(7, 16);
  // LDTILECFG through asm with the whole struct as a memory operand: GCC 12's _tile_loadconfig
  // does not tell the optimiser that the 64 bytes are read, and in another function it dropped
  // the stores of colsb and rows as dead (the tiles then faulted on the 16-core Xeon).
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));
}

}  // namespace

SLAB_AMX_BF16 void amx_panel_bf16(AmxTiles& tiles, const bf16_t* x, size_t ldx, int rows, const bf16_t* panel, int k,
                                  float* c, size_t ldc) {
  if (tiles.rows != rows) {
    load_config(rows);
    tiles.rows = rows;
  }
  const size_t sx = ldx * sizeof(bf16_t);
  constexpr size_t kPairBytes = 2 * 32 * sizeof(bf16_t);  // one k-pair of a 32-column panel
  const bf16_t* x1 = x + 16 * ldx;
  _tile_zero(0);
  _tile_zero(1);
  if (rows > 16) {
    _tile_zero(2);
    _tile_zero(3);
    for (int k0 = 0; k0 < k; k0 += 32) {
      const bf16_t* b = panel + static_cast<size_t>(k0) * 32;  // pair k0/2: (k0/2)·64 elements
      _tile_loadd(6, b, kPairBytes);
      _tile_loadd(4, x + k0, sx);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, b + 32, kPairBytes);
      _tile_dpbf16ps(1, 4, 7);
      _tile_loadd(5, x1 + k0, sx);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  } else {
    for (int k0 = 0; k0 < k; k0 += 32) {
      const bf16_t* b = panel + static_cast<size_t>(k0) * 32;
      _tile_loadd(6, b, kPairBytes);
      _tile_loadd(4, x + k0, sx);
      _tile_dpbf16ps(0, 4, 6);
      _tile_loadd(7, b + 32, kPairBytes);
      _tile_dpbf16ps(1, 4, 7);
    }
  }
  const size_t sc = ldc * sizeof(float);
  _tile_stored(0, c, sc);
  _tile_stored(1, c + 16, sc);
  if (rows > 16) {
    _tile_stored(2, c + 16 * ldc, sc);
    _tile_stored(3, c + 16 * ldc + 16, sc);
  }
}

SLAB_AMX_BF16 void amx_pack_x(bf16_t* xa, const bf16_t* x, size_t ldx, int rows, int k) {
  for (int s = 0; s < k / 32; ++s) {
    bf16_t* step = xa + static_cast<size_t>(s) * 32 * 32;
    for (int r = 0; r < rows; ++r) {
      _mm512_store_si512(step + 32 * r, _mm512_loadu_si512(x + static_cast<size_t>(r) * ldx + 32 * s));
    }
  }
}

SLAB_AMX_BF16 void amx_packed_block_bf16(AmxTiles& tiles, const bf16_t* xa, int rows, const bf16_t* panel, int k,
                                         float* c, size_t ldc, bool load_c) {
  if (tiles.rows != rows) {
    load_config(rows);
    tiles.rows = rows;
  }
  constexpr size_t kPairBytes = 2 * 32 * sizeof(bf16_t);
  constexpr size_t kRowBytes = 32 * sizeof(bf16_t);  // a row of a packed A step
  const size_t sc = ldc * sizeof(float);
  const bool two = rows > 16;
  if (load_c) {
    _tile_loadd(0, c, sc);
    _tile_loadd(1, c + 16, sc);
    if (two) {
      _tile_loadd(2, c + 16 * ldc, sc);
      _tile_loadd(3, c + 16 * ldc + 16, sc);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if (two) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int k0 = 0; k0 < k; k0 += 32) {
    const bf16_t* b = panel + static_cast<size_t>(k0) * 32;
    const bf16_t* a = xa + static_cast<size_t>(k0) * 32;  // step k0/32: 32 × 32 elements
    _tile_loadd(6, b, kPairBytes);
    _tile_loadd(4, a, kRowBytes);
    _tile_dpbf16ps(0, 4, 6);
    _tile_loadd(7, b + 32, kPairBytes);
    _tile_dpbf16ps(1, 4, 7);
    if (two) {
      _tile_loadd(5, a + 16 * 32, kRowBytes);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, c, sc);
  _tile_stored(1, c + 16, sc);
  if (two) {
    _tile_stored(2, c + 16 * ldc, sc);
    _tile_stored(3, c + 16 * ldc + 16, sc);
  }
}

SLAB_AMX_BF16 void amx_release(AmxTiles& tiles) {
  if (tiles.rows == 0) return;
  _tile_release();
  tiles.rows = 0;
}

}  // namespace slab::kern::detail
