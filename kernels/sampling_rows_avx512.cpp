// AVX-512 forms of sampling_rows.h. Target attributes per function, as in rowwise_bf16_avx512.cpp:
// the rest of the binary stays baseline. Full vectors use plain loads and the last partial one a
// masked load: a masked load on every step ran the DRAM-bound index scan at a third of the speed
// of the same loop with plain loads (Zen 5, 64 rows of 262144 logits: 0.20 vs 0.06 ms a row).
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/exp_avx512.h"
#include "kernels/sampling_rows_internal.h"

// GCC 12's unmasked min/max/roundscale/scalef intrinsics pass _mm512_undefined_ps() as the merge
// source, which -Wmaybe-uninitialized reports once inlined (a false positive: the mask is all ones).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif

#define SLAB_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq")))

namespace slab::kern::detail {
namespace {

SLAB_AVX512 inline __mmask16 tail_mask(size_t valid) {
  return valid >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << valid) - 1u);
}

// e^((x - shift) · scale) on the lanes of m, 0 elsewhere.
SLAB_AVX512 inline __m512 shifted_exp(__mmask16 m, __m512 x, __m512 shift, __m512 scale) {
  return _mm512_maskz_mov_ps(m, exp_avx512(_mm512_mul_ps(_mm512_sub_ps(x, shift), scale)));
}

}  // namespace

SLAB_AVX512 float row_max_avx512(const float* x, size_t n) {
  const __m512 neg_inf = _mm512_set1_ps(-__builtin_inff());
  __m512 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};  // four chains: vmaxps latency
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int j = 0; j < 4; ++j) best[j] = _mm512_max_ps(best[j], _mm512_loadu_ps(x + i + 16 * j));
  }
  for (; i < n; i += 16) {
    best[0] = _mm512_max_ps(best[0], _mm512_mask_loadu_ps(neg_inf, tail_mask(n - i), x + i));
  }
  return _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(best[0], best[1]), _mm512_max_ps(best[2], best[3])));
}

SLAB_AVX512 double sum_exp_avx512(const float* x, size_t n, float shift, float scale, float* out) {
  const __m512 vshift = _mm512_set1_ps(shift), vscale = _mm512_set1_ps(scale);
  double total = 0.0;
  for (size_t block = 0; block < n; block += kSumBlock) {
    const size_t end = std::min(n, block + kSumBlock);
    __m512 acc[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    size_t i = block;
    for (; i + 16 <= end; i += 16) {
      const __m512 term = exp_avx512(_mm512_mul_ps(_mm512_sub_ps(_mm512_loadu_ps(x + i), vshift), vscale));
      if (out) _mm512_storeu_ps(out + i, term);
      acc[(i >> 4) & 1] = _mm512_add_ps(acc[(i >> 4) & 1], term);
    }
    if (i < end) {
      const __mmask16 m = tail_mask(end - i);
      const __m512 term = shifted_exp(m, _mm512_maskz_loadu_ps(m, x + i), vshift, vscale);
      if (out) _mm512_mask_storeu_ps(out + i, m, term);
      acc[0] = _mm512_add_ps(acc[0], term);
    }
    total += _mm512_reduce_add_ps(_mm512_add_ps(acc[0], acc[1]));
  }
  return total;
}

SLAB_AVX512 double tail_masses_avx512(const float* x, size_t n, float shift, float scale, const float* thresholds,
                                      int n_thresholds, size_t* counts, double* masses) {
  const __m512 vshift = _mm512_set1_ps(shift), vscale = _mm512_set1_ps(scale);
  __m512 vthreshold[kMaxThresholds];
  for (int j = 0; j < n_thresholds; ++j) {
    vthreshold[j] = _mm512_set1_ps(thresholds[j]);
    counts[j] = 0;
    masses[j] = 0.0;
  }
  double total = 0.0;
  for (size_t block = 0; block < n; block += kSumBlock) {
    const size_t end = std::min(n, block + kSumBlock);
    __m512 acc_all = _mm512_setzero_ps();
    __m512 acc[kMaxThresholds];
    for (int j = 0; j < n_thresholds; ++j) acc[j] = _mm512_setzero_ps();
    for (size_t i = block; i < end; i += 16) {
      const bool full = i + 16 <= end;
      const __mmask16 m = full ? static_cast<__mmask16>(0xffff) : tail_mask(end - i);
      const __m512 v = full ? _mm512_loadu_ps(x + i) : _mm512_maskz_loadu_ps(m, x + i);
      const __m512 term = shifted_exp(m, v, vshift, vscale);
      acc_all = _mm512_add_ps(acc_all, term);
      for (int j = 0; j < n_thresholds; ++j) {
        const __mmask16 above = _mm512_mask_cmp_ps_mask(m, v, vthreshold[j], _CMP_GE_OQ);
        acc[j] = _mm512_mask_add_ps(acc[j], above, acc[j], term);
        counts[j] += static_cast<size_t>(__builtin_popcount(above));
      }
    }
    total += _mm512_reduce_add_ps(acc_all);
    for (int j = 0; j < n_thresholds; ++j) masses[j] += _mm512_reduce_add_ps(acc[j]);
  }
  return total;
}

SLAB_AVX512 size_t indices_at_or_above_avx512(const float* x, size_t n, float threshold, int32_t* idx) {
  const __m512 vthreshold = _mm512_set1_ps(threshold);
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  size_t count = 0;
  auto append = [&](__mmask16 above, size_t base) SLAB_AVX512 {
    _mm512_mask_compressstoreu_epi32(idx + count, above,
                                     _mm512_add_epi32(lane, _mm512_set1_epi32(static_cast<int>(base))));
    count += static_cast<size_t>(__builtin_popcount(above));
  };
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {  // usually nothing passes: the threshold keeps a few of 100k+
    __mmask16 above[4];
    for (int j = 0; j < 4; ++j) above[j] = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16 * j), vthreshold, _CMP_GE_OQ);
    if ((above[0] | above[1] | above[2] | above[3]) == 0) continue;
    for (int j = 0; j < 4; ++j) {
      if (above[j]) append(above[j], i + 16 * static_cast<size_t>(j));
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __mmask16 above = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), vthreshold, _CMP_GE_OQ);
    if (above) append(above, i);
  }
  return count;
}

SLAB_AVX512 size_t first_at_or_above_avx512(const float* x, size_t n, float threshold) {
  const __m512 vthreshold = _mm512_set1_ps(threshold);
  size_t i = 0;
  for (; i + 64 <= n; i += 64) {
    __mmask16 above[4];
    for (int j = 0; j < 4; ++j) above[j] = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i + 16 * j), vthreshold, _CMP_GE_OQ);
    if ((above[0] | above[1] | above[2] | above[3]) == 0) continue;
    for (int j = 0; j < 4; ++j) {
      if (above[j]) return i + 16 * static_cast<size_t>(j) + static_cast<size_t>(__builtin_ctz(above[j]));
    }
  }
  for (; i < n; i += 16) {
    const __mmask16 m = tail_mask(n - i);
    const __mmask16 above = _mm512_mask_cmp_ps_mask(m, _mm512_maskz_loadu_ps(m, x + i), vthreshold, _CMP_GE_OQ);
    if (above) return i + static_cast<size_t>(__builtin_ctz(above));
  }
  return n;
}

}  // namespace slab::kern::detail
