#pragma once
// Internal to the AVX-512 quantized tiles (linear_quant_avx512.cpp, linear_kquant_avx512.cpp,
// and the AMX tile's epilogue, linear_quant_amx.cpp):
// their target attribute and the one instruction both are built on. Include after <immintrin.h>;
// only code that runs after cpuid said avx512 bf16 + vnni (CpuFeatures::has_avx512_quant_kernels())
// may call these.
#include <immintrin.h>

#include <cstddef>
#include <cstdint>

#include "kernels/linear_quant_tile.h"

// GCC 12's unmasked shift/convert/permute intrinsics pass an undefined vector as the merge
// source, which -W(maybe-)uninitialized reports once inlined (a false positive: all lanes are
// written), as in rowwise_bf16_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512_QUANT __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,avx512vnni")))

namespace slab::kern::detail {

// 16 BF16 values as FP32.
SLAB_AVX512_QUANT inline __m512 load_bf16x16(const bf16_t* p) {
  const __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(w, 16));
}

// A Q5_K step's fifth bits as 0x10 in the lane bytes of its low (lo) and high (hi) nibble codes:
// lane byte L's is bit L / 16 (lo) or 4 + L / 16 (hi) of byte L % 16 of the step's 16 bytes
// (linear_quant.h), so one broadcast and a shift of each 32-bit lane by its 128-bit lane's count
// move it to bit 4. (The AVX2 tile shifts by immediates instead: Zen 2's variable shifts were
// slow enough to take the gain away.)
SLAB_AVX512_QUANT inline void kquant_fifth_bits(const uint8_t* step_bits, __m512i* lo, __m512i* hi) {
  const __m512i b = _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(step_bits)));
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  *lo = _mm512_and_si512(_mm512_sllv_epi32(b, _mm512_setr_epi32(4, 4, 4, 4, 3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1)), bit4);
  *hi = _mm512_and_si512(_mm512_srlv_epi32(b, _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)), bit4);
}

// 16 FP16 / u8 / i8 values of a K-quant record as FP32.
SLAB_AVX512_QUANT inline __m512 load_f16x16(const uint8_t* p) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
SLAB_AVX512_QUANT inline __m512 load_u8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
SLAB_AVX512_QUANT inline __m512 load_i8x16(const uint8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}

// acc += Σ4 u8(codes) · s8(x) per lane. In asm because GCC 12 does not tie the intrinsic's
// accumulator to its register: it copied every accumulator in and out of each instruction (two
// zmm moves per vpdpbusd).
SLAB_AVX512_QUANT inline __m512i dpbusd(__m512i acc, __m512i codes, __m512i x) {
  __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(codes), "v"(x));
  return acc;
}

// One 64-byte step of nibble codes (lo: k = 8s + j, hi: 8s + 4 + j, as W4's layout) against MR
// INT8 activation rows (xk: row 0 at k = 8s, rows ldxq apart), into MR × NP accumulators; with
// SPLIT the high nibbles go to chains of their own (1-2 rows: no single dependent chain).
template <int MR, int NP, bool SPLIT>
SLAB_AVX512_QUANT inline void nibble_step(__m512i (&acc)[MR][NP], __m512i (&acc_high)[SPLIT ? MR : 1][NP],
                                          const __m512i (&lo)[NP], const __m512i (&hi)[NP], const int8_t* xk,
                                          size_t ldxq) {
#pragma GCC unroll 6
  for (int r = 0; r < MR; ++r) {
    const int8_t* xr = xk + static_cast<size_t>(r) * ldxq;
    const __m512i x_lo = _mm512_set1_epi32(static_cast<int>(load_u32(xr)));
    const __m512i x_hi = _mm512_set1_epi32(static_cast<int>(load_u32(xr + 4)));
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      acc[r][q] = dpbusd(acc[r][q], lo[q], x_lo);
      if constexpr (SPLIT) {
        acc_high[r][q] = dpbusd(acc_high[r][q], hi[q], x_hi);
      } else {
        acc[r][q] = dpbusd(acc[r][q], hi[q], x_hi);
      }
    }
  }
}

// Accumulator (r, q)'s INT32 block sum: with SPLIT its high-nibble chain joined in (exact).
template <int MR, int NP, bool SPLIT>
SLAB_AVX512_QUANT inline __m512i joined_sum(const __m512i (&acc)[MR][NP], const __m512i (&acc_high)[SPLIT ? MR : 1][NP],
                                            int r, int q) {
  if constexpr (SPLIT) return _mm512_add_epi32(acc[r][q], acc_high[r][q]);
  return acc[r][q];
}

}  // namespace slab::kern::detail
