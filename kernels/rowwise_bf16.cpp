// Portable loops, and dispatch to the AVX-512 and AVX2 forms (rowwise_bf16_avx512.cpp,
// rowwise_bf16_avx2.cpp) for RMSNorm and SiLU·up. The portable BF16 conversion goes through
// convert_f32_to_bf16.
#include "kernels/rowwise_bf16.h"

#include <algorithm>
#include <cmath>

#include "kernels/rowwise_bf16_internal.h"

namespace slab::kern {
namespace {
constexpr int kChunk = 256;  // FP32 staging on the stack before the BF16 conversion
}

void rmsnorm_to_bf16(bf16_t* out, const float* x, const float* weight, int n, float eps, Isa isa) {
  if (isa == Isa::avx512_bf16) {
    detail::rmsnorm_to_bf16_avx512(out, x, weight, n, eps);
    return;
  }
  if (isa == Isa::avx2) {
    detail::rmsnorm_to_bf16_avx2(out, x, weight, n, eps);
    return;
  }
  // Four partial sums: lets the compiler keep several adds in flight without reassociating.
  float s[4] = {0, 0, 0, 0};
  int i = 0;
  for (; i + 4 <= n; i += 4) {
    for (int j = 0; j < 4; ++j) s[j] += x[i + j] * x[i + j];
  }
  for (; i < n; ++i) s[0] += x[i] * x[i];
  const float scale = 1.0f / std::sqrt((s[0] + s[1] + s[2] + s[3]) / static_cast<float>(n) + eps);
  alignas(64) float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    for (int j = 0; j < len; ++j) buf[j] = x[b + j] * scale * weight[b + j];
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), isa);
  }
}

void silu_mul_to_bf16(bf16_t* out, const float* gate, const float* up, int n, Isa isa) {
  if (isa == Isa::avx512_bf16) {
    detail::silu_mul_to_bf16_avx512(out, gate, up, n);
    return;
  }
  if (isa == Isa::avx2) {
    detail::silu_mul_to_bf16_avx2(out, gate, up, n);
    return;
  }
  alignas(64) float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    for (int j = 0; j < len; ++j) {
      const float g = gate[b + j];
      buf[j] = g / (1.0f + std::exp(-g)) * up[b + j];
    }
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), isa);
  }
}

void rope_tables(float* cos_out, float* sin_out, const float* inv_freq, int half, int first, int last, float scale) {
  for (int p = first; p < last; ++p) {
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(p) * inv_freq[i];
      cos_out[static_cast<size_t>(p) * half + i] = std::cos(angle) * scale;
      sin_out[static_cast<size_t>(p) * half + i] = std::sin(angle) * scale;
    }
  }
}

void rope_rotate_half(float* x, int n_heads, int head_dim, int rotary_dim, const float* cos, const float* sin) {
  const int half = rotary_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float x0 = v[i], x1 = v[i + half];
      v[i] = x0 * cos[i] - x1 * sin[i];
      v[i + half] = x1 * cos[i] + x0 * sin[i];
    }
  }
}

}  // namespace slab::kern
