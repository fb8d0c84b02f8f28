#pragma once
// Row passes of the sampler over one row of logits: max, sum of e^((x - shift)·scale), softmax,
// tail masses above several logit thresholds, and the indices at or above a threshold. They let
// top-p / min-p / top-k / logprobs find their few survivors in a handful of streaming passes
// instead of sorting the vocabulary. Plain pointers and sizes; n >= 1 everywhere.
//
// Isa::avx512_bf16 selects the AVX-512 forms (they use only avx512f/bw/vl/dq, present wherever
// the BF16 kernel set is), Isa::avx2 the AVX2+FMA forms, Isa::scalar libm loops. The vector forms'
// e^x has a relative error below 2e-7 and flushes results below 2^-126 (AVX2) / 2^-149 (AVX-512)
// to 0: terms that small never matter against the row's largest term, which is 1.
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"

namespace slab::kern {

// The largest x[i] (-inf when all are -inf). NaNs are not expected.
float row_max(const float* x, size_t n, Isa isa);

// Sum over i of e^((x[i] - shift) · scale); where out is not null, also out[i] = that term.
// Partial sums are float over short blocks, added into a double, so the relative error of the
// total stays near 1e-6 at 256k terms.
double sum_exp(const float* x, size_t n, float shift, float scale, float* out, Isa isa);

// out[i] = e^((x[i] - max) · scale) / sum_j e^((x[j] - max) · scale).
void softmax(const float* x, size_t n, float scale, float* out, Isa isa);

// Tail masses in one pass: for each of the n_thresholds (<= kMaxThresholds) logit thresholds,
// counts[j] = #{i : x[i] >= thresholds[j]} and masses[j] = sum of e^((x[i] - shift) · scale) over
// those i. Returns the sum over all i (the softmax denominator).
constexpr int kMaxThresholds = 8;
double tail_masses(const float* x, size_t n, float shift, float scale, const float* thresholds, int n_thresholds,
                   size_t* counts, double* masses, Isa isa);

// The first i with x[i] >= threshold, or n when there is none (argmax: threshold = row_max).
size_t first_at_or_above(const float* x, size_t n, float threshold, Isa isa);

// Writes the indices i with x[i] >= threshold, ascending, to idx (room for n); returns how many.
size_t indices_at_or_above(const float* x, size_t n, float threshold, int32_t* idx, Isa isa);

}  // namespace slab::kern
