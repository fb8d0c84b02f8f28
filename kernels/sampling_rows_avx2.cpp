// AVX2+FMA forms of sampling_rows.h for x86-64 CPUs without AVX-512. Compiled per function for
// avx2/fma; only called after cpuid said so. Tails run through the same 8-lane code on a padded
// copy of the last few values, so the results do not depend on where n ends.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/exp_avx2.h"
#include "kernels/sampling_rows_internal.h"

#define SLAB_AVX2 __attribute__((target("avx2,fma")))

namespace slab::kern::detail {
namespace {

// The last n % 8 values of x, padded to 8 with `fill`.
struct Tail {
  alignas(32) float v[8];
  Tail(const float* x, size_t count, float fill) {
    for (size_t k = 0; k < 8; ++k) v[k] = k < count ? x[k] : fill;
  }
};

SLAB_AVX2 inline float reduce_add(__m256 v) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(h, _mm_movehdup_ps(h)));
}

SLAB_AVX2 inline float reduce_max(__m256 v) {
  const __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 h = _mm_max_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_max_ss(h, _mm_movehdup_ps(h)));
}

SLAB_AVX2 inline __m256 shifted_exp(__m256 x, __m256 shift, __m256 scale) {
  return exp_avx2(_mm256_mul_ps(_mm256_sub_ps(x, shift), scale));
}

}  // namespace

SLAB_AVX2 float row_max_avx2(const float* x, size_t n) {
  const __m256 neg_inf = _mm256_set1_ps(-__builtin_inff());
  __m256 best[4] = {neg_inf, neg_inf, neg_inf, neg_inf};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    for (int j = 0; j < 4; ++j) best[j] = _mm256_max_ps(best[j], _mm256_loadu_ps(x + i + 8 * j));
  }
  for (; i + 8 <= n; i += 8) best[0] = _mm256_max_ps(best[0], _mm256_loadu_ps(x + i));
  if (i < n) best[1] = _mm256_max_ps(best[1], _mm256_load_ps(Tail(x + i, n - i, -__builtin_inff()).v));
  return reduce_max(_mm256_max_ps(_mm256_max_ps(best[0], best[1]), _mm256_max_ps(best[2], best[3])));
}

SLAB_AVX2 double sum_exp_avx2(const float* x, size_t n, float shift, float scale, float* out) {
  const __m256 vshift = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale);
  double total = 0.0;
  for (size_t block = 0; block < n; block += kSumBlock) {
    const size_t end = std::min(n, block + kSumBlock);
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    size_t i = block;
    for (; i + 8 <= end; i += 8) {
      const __m256 term = shifted_exp(_mm256_loadu_ps(x + i), vshift, vscale);
      if (out) _mm256_storeu_ps(out + i, term);
      acc[(i >> 3) & 1] = _mm256_add_ps(acc[(i >> 3) & 1], term);
    }
    if (i < end) {  // -inf pads give 0 terms
      alignas(32) float term[8];
      _mm256_store_ps(term, shifted_exp(_mm256_load_ps(Tail(x + i, end - i, -__builtin_inff()).v), vshift, vscale));
      if (out) std::copy(term, term + (end - i), out + i);
      acc[0] = _mm256_add_ps(acc[0], _mm256_load_ps(term));
    }
    total += reduce_add(_mm256_add_ps(acc[0], acc[1]));
  }
  return total;
}

namespace {

// The running sums of tail_masses_avx2 over one block.
struct TailSums {
  __m256 all;
  __m256 above[kMaxThresholds];
};

// Adds the 8 values of v whose lane is set in `valid` (all ones, or a tail's first lanes).
SLAB_AVX2 inline void add_to_tails(TailSums& sums, __m256 v, __m256 valid, __m256 shift, __m256 scale,
                                   const __m256* thresholds, int n_thresholds, size_t* counts) {
  const __m256 term = _mm256_and_ps(valid, shifted_exp(v, shift, scale));
  sums.all = _mm256_add_ps(sums.all, term);
  for (int j = 0; j < n_thresholds; ++j) {
    const __m256 above = _mm256_and_ps(valid, _mm256_cmp_ps(v, thresholds[j], _CMP_GE_OQ));
    sums.above[j] = _mm256_add_ps(sums.above[j], _mm256_and_ps(above, term));
    counts[j] += static_cast<size_t>(__builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(above))));
  }
}

}  // namespace

SLAB_AVX2 double tail_masses_avx2(const float* x, size_t n, float shift, float scale, const float* thresholds,
                                  int n_thresholds, size_t* counts, double* masses) {
  const __m256 vshift = _mm256_set1_ps(shift), vscale = _mm256_set1_ps(scale);
  const __m256 all_lanes = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  __m256 vthreshold[kMaxThresholds];
  for (int j = 0; j < n_thresholds; ++j) {
    vthreshold[j] = _mm256_set1_ps(thresholds[j]);
    counts[j] = 0;
    masses[j] = 0.0;
  }
  double total = 0.0;
  for (size_t block = 0; block < n; block += kSumBlock) {
    const size_t end = std::min(n, block + kSumBlock);
    TailSums sums;
    sums.all = _mm256_setzero_ps();
    for (int j = 0; j < n_thresholds; ++j) sums.above[j] = _mm256_setzero_ps();
    size_t i = block;
    for (; i + 8 <= end; i += 8) {
      add_to_tails(sums, _mm256_loadu_ps(x + i), all_lanes, vshift, vscale, vthreshold, n_thresholds, counts);
    }
    if (i < end) {
      const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
      const __m256 valid = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(end - i)), lane));
      add_to_tails(sums, _mm256_load_ps(Tail(x + i, end - i, 0.0f).v), valid, vshift, vscale, vthreshold, n_thresholds,
                   counts);
    }
    total += reduce_add(sums.all);
    for (int j = 0; j < n_thresholds; ++j) masses[j] += reduce_add(sums.above[j]);
  }
  return total;
}

SLAB_AVX2 size_t indices_at_or_above_avx2(const float* x, size_t n, float threshold, int32_t* idx) {
  const __m256 vthreshold = _mm256_set1_ps(threshold);
  size_t count = 0;
  auto append = [&](unsigned above, size_t base) {
    for (; above; above &= above - 1)
      idx[count++] = static_cast<int32_t>(base + static_cast<size_t>(__builtin_ctz(above)));
  };
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    append(static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vthreshold, _CMP_GE_OQ))), i);
  }
  if (i < n) {
    const unsigned valid = (1u << (n - i)) - 1u;
    const __m256 tail = _mm256_load_ps(Tail(x + i, n - i, 0.0f).v);
    append(valid & static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(tail, vthreshold, _CMP_GE_OQ))), i);
  }
  return count;
}

SLAB_AVX2 size_t first_at_or_above_avx2(const float* x, size_t n, float threshold) {
  const __m256 vthreshold = _mm256_set1_ps(threshold);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const auto above =
        static_cast<unsigned>(_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), vthreshold, _CMP_GE_OQ)));
    if (above) return i + static_cast<size_t>(__builtin_ctz(above));
  }
  for (; i < n; ++i) {
    if (x[i] >= threshold) return i;
  }
  return n;
}

}  // namespace slab::kern::detail
