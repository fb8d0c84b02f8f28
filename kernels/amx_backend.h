#pragma once
// The two tile backends the AMX kernels (linear_bf16_amx.cpp, linear_quant_amx.cpp,
// attention_amx.cpp) are written against: HardwareTiles (the tile instructions) and
// EmulatedTiles (kern::AmxEmulator, which runs the same tiling in tests on CPUs without AMX). A
// kernel templated on the backend calls load_config, release, zero<T>, load<T>, store<T>, and
// dpbsud<C, A, B> or dpbf16ps<C, A, B> on the 2 × 2 block: C[i][j] = tmm 2i + j, A i = tmm 4 + i,
// B j = tmm 6 + j.
//
// Include only from files compiled for x86-64 with these target attributes available; only the
// hardware backend emits tile instructions, and only after cpu_features() reported the AMX
// extension and enable_amx_tiles() got the kernel's permission.
#include <immintrin.h>

#include <cstddef>

#include "kernels/amx_tiles.h"

// The target of every AMX kernel function: the tile instructions and the AVX-512 epilogues.
#define SLAB_AMX_KERNEL                                                                                        \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni,amx-tile,amx-int8,amx-bf16")))

namespace slab::kern::detail {

// GCC's tile intrinsics are macros that paste the tile number into the asm text, so each tile
// needs its literal: SLAB_EACH_TILE expands `op` for the template's T.
#define SLAB_EACH_TILE(op)                \
  if constexpr (T == 0) {                 \
    op(0);                                \
  } else if constexpr (T == 1) {          \
    op(1);                                \
  } else if constexpr (T == 2) {          \
    op(2);                                \
  } else if constexpr (T == 3) {          \
    op(3);                                \
  } else if constexpr (T == 4) {          \
    op(4);                                \
  } else if constexpr (T == 5) {          \
    op(5);                                \
  } else if constexpr (T == 6) {          \
    op(6);                                \
  } else {                                \
    static_assert(T == 7, "tiles 0..7"); \
    op(7);                                \
  }

struct HardwareTiles {
  // LDTILECFG through asm with the struct as a memory operand (see linear_bf16_amx.cpp: GCC 12's
  // _tile_loadconfig let the optimiser drop the stores that fill it).
  SLAB_AMX_KERNEL static void load_config(const AmxTileConfig& cfg) { __asm__ volatile("ldtilecfg %0" : : "m"(cfg)); }
  SLAB_AMX_KERNEL static void release() { _tile_release(); }
  template <int T>
  SLAB_AMX_KERNEL static void zero() {
#define SLAB_OP(t) _tile_zero(t)
    SLAB_EACH_TILE(SLAB_OP)
#undef SLAB_OP
  }
  template <int T>
  SLAB_AMX_KERNEL static void load(const void* p, size_t stride) {
#define SLAB_OP(t) _tile_loadd(t, p, static_cast<long>(stride))
    SLAB_EACH_TILE(SLAB_OP)
#undef SLAB_OP
  }
  template <int T>
  SLAB_AMX_KERNEL static void store(void* p, size_t stride) {
#define SLAB_OP(t) _tile_stored(t, p, static_cast<long>(stride))
    SLAB_EACH_TILE(SLAB_OP)
#undef SLAB_OP
  }
  // The four products of the 2 × 2 block: C[i][j] = tmm 2i + j, A i = tmm 4 + i, B j = tmm 6 + j.
  // SLAB_EACH_BLOCK_PRODUCT expands op(c, a, b) with the literals of the template's C.
#define SLAB_EACH_BLOCK_PRODUCT(op)                                                                                  \
  static_assert(C == 2 * (A - 4) + (B - 6) && A >= 4 && A <= 5 && B >= 6 && B <= 7, "a C tile of the 2 x 2 block"); \
  if constexpr (C == 0) {                                                                                             \
    op(0, 4, 6);                                                                                                      \
  } else if constexpr (C == 1) {                                                                                      \
    op(1, 4, 7);                                                                                                      \
  } else if constexpr (C == 2) {                                                                                      \
    op(2, 5, 6);                                                                                                      \
  } else {                                                                                                            \
    op(3, 5, 7);                                                                                                      \
  }
  template <int C, int A, int B>
  SLAB_AMX_KERNEL static void dpbsud() {
#define SLAB_OP(c, a, b) _tile_dpbsud(c, a, b)
    SLAB_EACH_BLOCK_PRODUCT(SLAB_OP)
#undef SLAB_OP
  }
  template <int C, int A, int B>
  SLAB_AMX_KERNEL static void dpbf16ps() {
#define SLAB_OP(c, a, b) _tile_dpbf16ps(c, a, b)
    SLAB_EACH_BLOCK_PRODUCT(SLAB_OP)
#undef SLAB_OP
  }
#undef SLAB_EACH_BLOCK_PRODUCT
};
#undef SLAB_EACH_TILE

struct EmulatedTiles {
  AmxEmulator& e;
  void load_config(const AmxTileConfig& cfg) const { e.load_config(cfg); }
  void release() const { e.release(); }
  template <int T>
  void zero() const {
    e.zero(T);
  }
  template <int T>
  void load(const void* p, size_t stride) const {
    e.load(T, p, stride);
  }
  template <int T>
  void store(void* p, size_t stride) const {
    e.store(T, p, stride);
  }
  template <int C, int A, int B>
  void dpbsud() const {
    e.dpbsud(C, A, B);
  }
  template <int C, int A, int B>
  void dpbf16ps() const {
    e.dpbf16ps(C, A, B);
  }
};

// Tile calls that do nothing: a kernel run on it does only its AVX-512 work, which
// bench_attention_block times against the whole kernel on the hardware tiles. Never for results.
struct NoTiles {
  void load_config(const AmxTileConfig&) const {}
  void release() const {}
  template <int T>
  void zero() const {}
  template <int T>
  void load(const void*, size_t) const {}
  template <int T>
  void store(void*, size_t) const {}
  template <int C, int A, int B>
  void dpbsud() const {}
  template <int C, int A, int B>
  void dpbf16ps() const {}
};

// TILERELEASE on the emulator when there is one, else on the hardware.
SLAB_AMX_KERNEL inline void release_tiles(AmxEmulator* emulator) {
  if (emulator) {
    emulator->release();
  } else {
    HardwareTiles::release();
  }
}

}  // namespace slab::kern::detail
