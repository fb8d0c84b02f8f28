#pragma once
// Internal to rowwise_bf16*.cpp: the AVX-512 and AVX2 forms, called only after cpuid said so.
#include "kernels/bf16.h"

namespace slab::kern::detail {

void silu_mul_to_bf16_avx512(bf16_t* out, const float* gate, const float* up, int n);
void rmsnorm_to_bf16_avx512(bf16_t* out, const float* x, const float* weight, int n, float eps);
void silu_mul_to_bf16_avx2(bf16_t* out, const float* gate, const float* up, int n);
void rmsnorm_to_bf16_avx2(bf16_t* out, const float* x, const float* weight, int n, float eps);

}  // namespace slab::kern::detail
