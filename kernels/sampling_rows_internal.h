#pragma once
// Internal to sampling_rows*.cpp: the AVX-512 and AVX2 forms, called only after cpuid said so.
#include <cstddef>
#include <cstdint>

#include "kernels/sampling_rows.h"

namespace slab::kern::detail {

// Terms of a float partial sum before it is added into the double total: 64 per lane keeps the
// float rounding of each block near 64 · 6e-8 relative in the worst case.
constexpr size_t kSumBlock = 1024;

float row_max_avx512(const float* x, size_t n);
double sum_exp_avx512(const float* x, size_t n, float shift, float scale, float* out);
double tail_masses_avx512(const float* x, size_t n, float shift, float scale, const float* thresholds, int n_thresholds,
                          size_t* counts, double* masses);
size_t indices_at_or_above_avx512(const float* x, size_t n, float threshold, int32_t* idx);
size_t first_at_or_above_avx512(const float* x, size_t n, float threshold);

float row_max_avx2(const float* x, size_t n);
double sum_exp_avx2(const float* x, size_t n, float shift, float scale, float* out);
double tail_masses_avx2(const float* x, size_t n, float shift, float scale, const float* thresholds, int n_thresholds,
                        size_t* counts, double* masses);
size_t indices_at_or_above_avx2(const float* x, size_t n, float threshold, int32_t* idx);
size_t first_at_or_above_avx2(const float* x, size_t n, float threshold);

}  // namespace slab::kern::detail
