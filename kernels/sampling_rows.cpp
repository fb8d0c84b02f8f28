// Portable loops of sampling_rows.h, and dispatch to the AVX-512 / AVX2 forms. The portable forms
// are also the references the vector forms are tested against: libm expf, double sums.
#include "kernels/sampling_rows.h"

#include <cmath>
#include <limits>

#include "kernels/sampling_rows_internal.h"

namespace slab::kern {

float row_max(const float* x, size_t n, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::row_max_avx512(x, n);
  if (isa == Isa::avx2) return detail::row_max_avx2(x, n);
  float best = -std::numeric_limits<float>::infinity();
  for (size_t i = 0; i < n; ++i) best = x[i] > best ? x[i] : best;
  return best;
}

double sum_exp(const float* x, size_t n, float shift, float scale, float* out, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::sum_exp_avx512(x, n, shift, scale, out);
  if (isa == Isa::avx2) return detail::sum_exp_avx2(x, n, shift, scale, out);
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float term = std::exp((x[i] - shift) * scale);
    if (out) out[i] = term;
    total += term;
  }
  return total;
}

void softmax(const float* x, size_t n, float scale, float* out, Isa isa) {
  const float max = row_max(x, n, isa);
  const auto inv_total = static_cast<float>(1.0 / sum_exp(x, n, max, scale, out, isa));
  for (size_t i = 0; i < n; ++i) out[i] *= inv_total;  // vectorised by the compiler
}

double tail_masses(const float* x, size_t n, float shift, float scale, const float* thresholds, int n_thresholds,
                   size_t* counts, double* masses, Isa isa) {
  if (isa == Isa::avx512_bf16)
    return detail::tail_masses_avx512(x, n, shift, scale, thresholds, n_thresholds, counts, masses);
  if (isa == Isa::avx2) return detail::tail_masses_avx2(x, n, shift, scale, thresholds, n_thresholds, counts, masses);
  for (int j = 0; j < n_thresholds; ++j) {
    counts[j] = 0;
    masses[j] = 0.0;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const float term = std::exp((x[i] - shift) * scale);
    total += term;
    for (int j = 0; j < n_thresholds; ++j) {
      if (x[i] >= thresholds[j]) {
        ++counts[j];
        masses[j] += term;
      }
    }
  }
  return total;
}

size_t first_at_or_above(const float* x, size_t n, float threshold, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::first_at_or_above_avx512(x, n, threshold);
  if (isa == Isa::avx2) return detail::first_at_or_above_avx2(x, n, threshold);
  for (size_t i = 0; i < n; ++i) {
    if (x[i] >= threshold) return i;
  }
  return n;
}

size_t indices_at_or_above(const float* x, size_t n, float threshold, int32_t* idx, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::indices_at_or_above_avx512(x, n, threshold, idx);
  if (isa == Isa::avx2) return detail::indices_at_or_above_avx2(x, n, threshold, idx);
  size_t count = 0;
  for (size_t i = 0; i < n; ++i) {
    if (x[i] >= threshold) idx[count++] = static_cast<int32_t>(i);
  }
  return count;
}

}  // namespace slab::kern
