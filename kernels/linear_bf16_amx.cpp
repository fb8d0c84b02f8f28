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
// Written once against a tile backend (kernels/amx_backend.h): the hardware, or AmxEmulator,
// which runs the same tiling in the tests on CPUs without AMX. Only the hardware backend emits
// tile instructions, after cpu_features() reported amx_bf16 and enable_amx_tiles() (runtime/)
// got the kernel's permission for the tile state; the functions carry the target attribute, as
// the AVX-512 files do, so the rest of the binary stays baseline x86-64.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "kernels/amx_backend.h"
#include "kernels/amx_tiles.h"
#include "kernels/linear_bf16_tile.h"

namespace slab::kern::detail {
namespace {

AmxTileConfig tile_config(int rows) {
  const int r0 = rows < 16 ? rows : 16;
  const int r1 = rows - r0;
  AmxTileConfig cfg;
  cfg.set(0, r0, 64);  // C[0][0], C[0][1]: rows of A tile 0
  cfg.set(1, r0, 64);
  cfg.set(2, r1, 64);  // C[1][0], C[1][1]: rows of A tile 1 (unused when rows <= 16)
  cfg.set(3, r1, 64);
  cfg.set(4, r0, 64);  // A0
  cfg.set(5, r1, 64);  // A1
  cfg.set(6, 16, 64);  // B0, B1: 16 k-pairs
  cfg.set(7, 16, 64);
  return cfg;
}

template <typename Tiles>
SLAB_AMX_KERNEL void configure(AmxTiles& state, const Tiles& tiles, int rows) {
  if (state.rows == rows) return;
  tiles.load_config(tile_config(rows));
  state.rows = rows;
}

template <typename Tiles>
SLAB_AMX_KERNEL void panel_pass(AmxTiles& state, const Tiles& tiles, const bf16_t* x, size_t ldx, int rows,
                                const bf16_t* panel, int k, float* c, size_t ldc, size_t prefetch_bytes,
                                const bf16_t* prefetch_end) {
  configure(state, tiles, rows);
  const size_t sx = ldx * sizeof(bf16_t);
  constexpr size_t kPairBytes = 2 * 32 * sizeof(bf16_t);  // one k-pair of a 32-column panel
  constexpr size_t kStepBytes = 16 * kPairBytes;          // the panel bytes one K step reads (2 KB)
  const bf16_t* x1 = x + 16 * ldx;
  const char* const panel_end = prefetch_end
                                    ? reinterpret_cast<const char*>(prefetch_end)
                                    : reinterpret_cast<const char*>(panel) + static_cast<size_t>(k) / 32 * kStepBytes;
  // The lines of the step prefetch_bytes ahead of step k0, to L2 (the second row tile reads the
  // panel from there too).
  const auto prefetch_ahead = [&](int k0) {
    const char* ahead = reinterpret_cast<const char*>(panel + static_cast<size_t>(k0) * 32) + prefetch_bytes;
    if (ahead >= panel_end) return;
    for (size_t line = 0; line < kStepBytes; line += 64) _mm_prefetch(ahead + line, _MM_HINT_T1);
  };
  tiles.template zero<0>();
  tiles.template zero<1>();
  if (rows > 16) {
    tiles.template zero<2>();
    tiles.template zero<3>();
    for (int k0 = 0; k0 < k; k0 += 32) {
      const bf16_t* b = panel + static_cast<size_t>(k0) * 32;  // pair k0/2: (k0/2)·64 elements
      if (prefetch_bytes) prefetch_ahead(k0);
      tiles.template load<6>(b, kPairBytes);
      tiles.template load<4>(x + k0, sx);
      tiles.template dpbf16ps<0, 4, 6>();
      tiles.template load<7>(b + 32, kPairBytes);
      tiles.template dpbf16ps<1, 4, 7>();
      tiles.template load<5>(x1 + k0, sx);
      tiles.template dpbf16ps<2, 5, 6>();
      tiles.template dpbf16ps<3, 5, 7>();
    }
  } else {
    for (int k0 = 0; k0 < k; k0 += 32) {
      const bf16_t* b = panel + static_cast<size_t>(k0) * 32;
      if (prefetch_bytes) prefetch_ahead(k0);
      tiles.template load<6>(b, kPairBytes);
      tiles.template load<4>(x + k0, sx);
      tiles.template dpbf16ps<0, 4, 6>();
      tiles.template load<7>(b + 32, kPairBytes);
      tiles.template dpbf16ps<1, 4, 7>();
    }
  }
  const size_t sc = ldc * sizeof(float);
  tiles.template store<0>(c, sc);
  tiles.template store<1>(c + 16, sc);
  if (rows > 16) {
    tiles.template store<2>(c + 16 * ldc, sc);
    tiles.template store<3>(c + 16 * ldc + 16, sc);
  }
}

template <typename Tiles>
SLAB_AMX_KERNEL void packed_block_pass(AmxTiles& state, const Tiles& tiles, const bf16_t* xa, int rows,
                                       const bf16_t* panel, int k, float* c, size_t ldc, bool load_c) {
  configure(state, tiles, rows);
  constexpr size_t kPairBytes = 2 * 32 * sizeof(bf16_t);
  constexpr size_t kRowBytes = 32 * sizeof(bf16_t);  // a row of a packed A step
  const size_t sc = ldc * sizeof(float);
  const bool two = rows > 16;
  if (load_c) {
    tiles.template load<0>(c, sc);
    tiles.template load<1>(c + 16, sc);
    if (two) {
      tiles.template load<2>(c + 16 * ldc, sc);
      tiles.template load<3>(c + 16 * ldc + 16, sc);
    }
  } else {
    tiles.template zero<0>();
    tiles.template zero<1>();
    if (two) {
      tiles.template zero<2>();
      tiles.template zero<3>();
    }
  }
  for (int k0 = 0; k0 < k; k0 += 32) {
    const bf16_t* b = panel + static_cast<size_t>(k0) * 32;
    const bf16_t* a = xa + static_cast<size_t>(k0) * 32;  // step k0/32: 32 × 32 elements
    tiles.template load<6>(b, kPairBytes);
    tiles.template load<4>(a, kRowBytes);
    tiles.template dpbf16ps<0, 4, 6>();
    tiles.template load<7>(b + 32, kPairBytes);
    tiles.template dpbf16ps<1, 4, 7>();
    if (two) {
      tiles.template load<5>(a + 16 * 32, kRowBytes);
      tiles.template dpbf16ps<2, 5, 6>();
      tiles.template dpbf16ps<3, 5, 7>();
    }
  }
  tiles.template store<0>(c, sc);
  tiles.template store<1>(c + 16, sc);
  if (two) {
    tiles.template store<2>(c + 16 * ldc, sc);
    tiles.template store<3>(c + 16 * ldc + 16, sc);
  }
}

}  // namespace

SLAB_AMX_KERNEL void amx_panel_bf16(AmxTiles& tiles, const bf16_t* x, size_t ldx, int rows, const bf16_t* panel, int k,
                                    float* c, size_t ldc, size_t prefetch_bytes, const bf16_t* prefetch_end) {
  if (tiles.emulator) {
    panel_pass(tiles, EmulatedTiles{*tiles.emulator}, x, ldx, rows, panel, k, c, ldc, prefetch_bytes, prefetch_end);
  } else {
    panel_pass(tiles, HardwareTiles{}, x, ldx, rows, panel, k, c, ldc, prefetch_bytes, prefetch_end);
  }
}

SLAB_AMX_KERNEL void amx_packed_block_bf16(AmxTiles& tiles, const bf16_t* xa, int rows, const bf16_t* panel, int k,
                                           float* c, size_t ldc, bool load_c) {
  if (tiles.emulator) {
    packed_block_pass(tiles, EmulatedTiles{*tiles.emulator}, xa, rows, panel, k, c, ldc, load_c);
  } else {
    packed_block_pass(tiles, HardwareTiles{}, xa, rows, panel, k, c, ldc, load_c);
  }
}

SLAB_AMX_KERNEL void amx_pack_x(bf16_t* xa, const bf16_t* x, size_t ldx, int rows, int k) {
  for (int s = 0; s < k / 32; ++s) {
    bf16_t* step = xa + static_cast<size_t>(s) * 32 * 32;
    for (int r = 0; r < rows; ++r) {
      _mm512_store_si512(step + 32 * r, _mm512_loadu_si512(x + static_cast<size_t>(r) * ldx + 32 * s));
    }
  }
}

}  // namespace slab::kern::detail
