#pragma once
// Gemma's element-wise ops on the fast path: the GeLU-tanh gated MLP activation written as the
// BF16 input of the down projection, and tanh soft-capping of logits. Scalar, AVX2 and AVX-512
// forms behind one call each; the scalar form is kernels/reference.h's math. Plain pointers.
#include <cstddef>

#include "kernels/bf16.h"

namespace slab::kern {

// out[i] = bf16(gelu_tanh(gate[i]) * up[i]) for i < n (ref::gelu_tanh_mul, then one rounding).
void gelu_tanh_mul_to_bf16(bf16_t* out, const float* gate, const float* up, int n, Isa isa);

// x[i] = cap * tanh(x[i] / cap) in place (ref::softcap).
void softcap(float* x, size_t n, float cap, Isa isa);

namespace detail {  // AVX-512 forms in rowwise_bf16_avx512.cpp, AVX2 in gated_activation_avx2.cpp
void gelu_tanh_mul_to_bf16_avx512(bf16_t* out, const float* gate, const float* up, int n);
void softcap_avx512(float* x, size_t n, float cap);
void gelu_tanh_mul_to_bf16_avx2(bf16_t* out, const float* gate, const float* up, int n);
void softcap_avx2(float* x, size_t n, float cap);
}  // namespace detail

}  // namespace slab::kern
