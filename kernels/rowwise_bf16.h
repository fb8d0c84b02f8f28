#pragma once
// Per-row ops of the forward pass that feed the BF16 linears: RMSNorm and SiLU·up written as
// BF16 rows, and RoPE from precomputed cos/sin tables. Plain pointers and sizes; FP32 math.
#include <cstddef>

#include "kernels/bf16.h"

namespace slab::kern {

// out[i] = bf16(x[i] / sqrt(mean(x²) + eps) * weight[i]) for i < n.
void rmsnorm_to_bf16(bf16_t* out, const float* x, const float* weight, int n, float eps, Isa isa);

// out[i] = bf16(silu(gate[i]) * up[i]) for i < n.
void silu_mul_to_bf16(bf16_t* out, const float* gate, const float* up, int n, Isa isa);

// cos_out/sin_out[p * half + i] = cos/sin(p * inv_freq[i]) * scale for positions p in [first, last):
// the same float angle and product the reference RoPE computes, so table and reference agree
// exactly. scale is longrope's attention factor (1 otherwise).
void rope_tables(float* cos_out, float* sin_out, const float* inv_freq, int half, int first, int last,
                 float scale = 1.0f);

// Rotate-half RoPE in place over n_heads vectors of head_dim values, with cos/sin of one
// position (rotary_dim / 2 values each): the first rotary_dim values of each head rotate, pairs
// (i, i + rotary_dim / 2); the rest (partial rotary embeddings) pass through.
void rope_rotate_half(float* x, int n_heads, int head_dim, int rotary_dim, const float* cos, const float* sin);

}  // namespace slab::kern
