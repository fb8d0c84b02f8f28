// Shared by the scratch experiments here (real.cpp, stage.cpp, pf.cpp; not built by CMake): the
// tile state request and configuration, a clock, and the AMX-BF16 linear's 2 x 2 K step as
// kernels/linear_bf16_amx.cpp runs it (B: two 16-column tiles of a packed panel's 2 KB k-step,
// rows 128 bytes apart; A: two 16-row tiles of x, rows lda bytes apart; C in tmm0..3).
#pragma once
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

struct alignas(64) AmxConfig {
  uint8_t palette = 1, start = 0, reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Asks Linux for the tile state (ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) and makes all eight
// tiles 16 rows x 64 bytes.
inline void amx_setup() {
  syscall(SYS_arch_prctl, 0x1023, 18);
  AmxConfig c;
  for (int t = 0; t < 8; t++) {
    c.rows[t] = 16;
    c.colsb[t] = 64;
  }
  asm volatile("ldtilecfg %0" ::"m"(c));
}

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline void zero_c() {
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
}

// One K step: B tiles from b (its 2 KB), A tiles from a; 4 tdpbf16ps.
inline void step_2x2(const char* b, const char* a, size_t lda) {
  _tile_loadd(6, b, 128);
  _tile_loadd(4, a, lda);
  _tile_dpbf16ps(0, 4, 6);
  _tile_loadd(7, b + 64, 128);
  _tile_dpbf16ps(1, 4, 7);
  _tile_loadd(5, a + 16 * lda, lda);
  _tile_dpbf16ps(2, 5, 6);
  _tile_dpbf16ps(3, 5, 7);
}

// C tiles to a [32][ldc] FP32 block.
inline void store_c(float* c, size_t ldc) {
  _tile_stored(0, c, ldc * 4);
  _tile_stored(1, c + 16, ldc * 4);
  _tile_stored(2, c + 16 * ldc, ldc * 4);
  _tile_stored(3, c + 16 * ldc + 16, ldc * 4);
}

// A panel pass with the weights read where they lie: `steps` K steps of 2 KB from B.
__attribute__((noinline)) inline void plain_pass(const char* B, const char* A, size_t lda, int steps, float* C,
                                                 size_t ldc) {
  zero_c();
  for (int s = 0; s < steps; s++) step_2x2(B + (size_t)s * 2048, A + (size_t)s * 64, lda);
  store_c(C, ldc);
}
