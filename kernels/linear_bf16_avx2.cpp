// AVX2+FMA tile of the BF16 linear kernel for x86-64 CPUs without AVX-512 BF16 (same packed
// layout). A 32-bit lane of a packed k-pair holds (w[k], w[k+1]) of one column: shifting left by
// 16 gives w[k] as FP32, masking the low half gives w[k+1]; two FMAs per 8 columns. Compiled per
// function for avx2/fma; only called after cpuid said so.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "kernels/linear_bf16_tile.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// R rows (1 or 2) x 32 columns of one panel: 4R accumulators, 8 weight halves, 2R broadcasts.
template <int R>
SLAB_AVX2 void rows_panel(const Tile& t, int row0, int panel, float* acc_out) {
  __m256 acc[R][4];
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) {
      acc[r][j] = t.load_c ? _mm256_loadu_ps(t.c + static_cast<size_t>(row0 + r) * t.ldc + panel * 32 + 8 * j)
                           : _mm256_setzero_ps();
    }
  }
  const bf16_t* b = t.b + static_cast<size_t>(panel) * t.panel_stride;
  const __m256i hi_mask = _mm256_set1_epi32(static_cast<int>(0xffff0000u));
  const int pairs = t.n_pairs + (t.half_pair ? 1 : 0);
  for (int p = 0; p < pairs; ++p) {
    __m256 even[4], odd[4];
    for (int j = 0; j < 4; ++j) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 64 * static_cast<size_t>(p) + 16 * j));
      even[j] = _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
      odd[j] = _mm256_castsi256_ps(_mm256_and_si256(w, hi_mask));
    }
    for (int r = 0; r < R; ++r) {
      const bf16_t* xr = t.a + static_cast<size_t>(row0 + r) * t.lda + 2 * static_cast<size_t>(p);
      const __m256 x0 = _mm256_set1_ps(bf16_to_f32(xr[0]));
      const __m256 x1 = _mm256_set1_ps(p < t.n_pairs ? bf16_to_f32(xr[1]) : 0.0f);
      for (int j = 0; j < 4; ++j) {
        acc[r][j] = _mm256_fmadd_ps(x0, even[j], acc[r][j]);
        acc[r][j] = _mm256_fmadd_ps(x1, odd[j], acc[r][j]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int j = 0; j < 4; ++j) _mm256_storeu_ps(acc_out + r * 64 + panel * 32 + 8 * j, acc[r][j]);
  }
}

}  // namespace

void tile_avx2(const Tile& t) {
  float acc[2 * 64];
  for (int row = 0; row < t.mr; row += 2) {
    const int rows = std::min(2, t.mr - row);
    for (int panel = 0; panel < t.np; ++panel) {
      if (rows == 2) {
        rows_panel<2>(t, row, panel, acc);
      } else {
        rows_panel<1>(t, row, panel, acc);
      }
    }
    for (int r = 0; r < rows; ++r) {
      const int cols = t.np * 32;
      if (!t.epilogue) {
        std::copy(acc + r * 64, acc + r * 64 + cols, t.c + static_cast<size_t>(row + r) * t.ldc);
        continue;
      }
      const size_t o = static_cast<size_t>(row + r) * t.ldo;
      finish_row(acc + r * 64, t.n_valid, t.bias,
                 t.residual ? t.residual + static_cast<size_t>(row + r) * t.ldr : nullptr,
                 t.out_f32 ? t.out_f32 + o : nullptr, t.out_bf16 ? t.out_bf16 + o : nullptr);
    }
  }
}

}  // namespace slab::kern::detail
