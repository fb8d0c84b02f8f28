#pragma once
// Scalar FP32 reference of every op of the transformer forward pass. These are the oracle the
// optimised kernels are tested against and the portable fallback on CPUs without AVX-512.
// Plain pointers and sizes only: no engine types.
#include <cstddef>
#include <cstdint>

namespace slab::ref {

// out[n] = x[n] / sqrt(mean(x^2) + eps) * weight[n]. out may alias x.
void rmsnorm(float* out, const float* x, const float* weight, int n, float eps);

// out[m][n] = sum_k x[m][k] * w[n][k] (+ bias[n] when bias is not null). w is [n, k] row-major,
// the Hugging Face nn.Linear layout. out must not alias x.
void linear(float* out, const float* x, const float* w, const float* bias, int m, int n, int k);

// out[i] = silu(gate[i]) * up[i]. out may alias gate or up.
void silu_mul(float* out, const float* gate, const float* up, int n);

// out[i] = gelu_tanh(gate[i]) * up[i], gelu_tanh(g) = g/2 · (1 + tanh(√(2/π) · (g + 0.044715 g³)))
// (PyTorch's gelu(approximate="tanh"), Gemma's gelu_pytorch_tanh). out may alias gate or up.
void gelu_tanh_mul(float* out, const float* gate, const float* up, int n);

// x[i] = cap · tanh(x[i] / cap): Gemma's logit soft-capping.
void softcap(float* x, size_t n, float cap);

// Rotary embedding frequency tables. RoPE scaling is chosen by the caller with plain numbers.
enum class RopeScalingKind { none, linear, llama3, longrope };
struct RopeFrequencyParams {
  float theta = 10000.0f;
  RopeScalingKind scaling = RopeScalingKind::none;
  float factor = 1.0f;
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;
  // longrope: rotary_dim / 2 per-frequency divisors (the short or the long factor list).
  const float* ext_factors = nullptr;
};
// Writes rotary_dim / 2 inverse frequencies.
void rope_inverse_frequencies(float* inv_freq, int rotary_dim, const RopeFrequencyParams& params);

// Which elements rotate together: rotate-half pairs (i, i + d/2) as Hugging Face checkpoints are
// laid out; interleaved pairs (2i, 2i + 1) as Meta/GGUF checkpoints are.
enum class RopeStyle { rotate_half, interleaved };
// Rotates each of n_heads vectors of head_dim values in place for position `pos`. Only the first
// rotary_dim values of each head rotate (partial rotary embeddings; 0 means head_dim), pairing
// (i, i + rotary_dim / 2) in rotate-half style; the rest pass through. cos and sin are multiplied
// by `scale` (longrope's attention factor) before use.
void rope(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, RopeStyle style, int rotary_dim = 0,
          float scale = 1.0f);

// One sequence's keys and values in paged blocks (see src/kv/kv_cache.h for the layout). Offsets
// and strides are in floats; k_offset/v_offset select the layer's K and V inside a block.
struct PagedKv {
  const float* pool = nullptr;
  const int32_t* block_table = nullptr;
  int block_size = 0;
  size_t block_stride = 0;
  size_t k_offset = 0;
  size_t v_offset = 0;
  size_t head_stride = 0;  // between KV heads inside a block (KvGeometry: 2 * block_size * head_dim)
};

// Causal attention of one query token at position `pos` over the cached positions
// [first, pos], where first = max(0, pos - window + 1) when window > 0 (sliding window) and 0
// otherwise. q and out are [n_heads][head_dim]; query head h reads KV head h / (n_heads /
// n_kv_heads) (grouped-query attention). scale multiplies q·k before the softmax.
void attention(float* out, const float* q, const PagedKv& kv, int n_heads, int n_kv_heads, int head_dim, int pos,
               int window, float scale);

}  // namespace slab::ref
