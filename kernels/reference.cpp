#include "kernels/reference.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "kernels/kv_block.h"

namespace slab::ref {

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  double sum_squares = 0.0;
  for (int i = 0; i < n; ++i) sum_squares += static_cast<double>(x[i]) * x[i];
  const float inv_rms = 1.0f / std::sqrt(static_cast<float>(sum_squares / n) + eps);
  for (int i = 0; i < n; ++i) out[i] = x[i] * inv_rms * weight[i];
}

void linear(float* out, const float* x, const float* w, const float* bias, int m, int n, int k) {
  for (int row = 0; row < m; ++row) {
    const float* x_row = x + static_cast<size_t>(row) * k;
    for (int col = 0; col < n; ++col) {
      const float* w_row = w + static_cast<size_t>(col) * k;
      float acc = 0.0f;
      for (int i = 0; i < k; ++i) acc += x_row[i] * w_row[i];
      out[static_cast<size_t>(row) * n + col] = bias != nullptr ? acc + bias[col] : acc;
    }
  }
}

void silu_mul(float* out, const float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

void gelu_tanh_mul(float* out, const float* gate, const float* up, int n) {
  const float k = std::sqrt(2.0f / std::numbers::pi_v<float>);
  for (int i = 0; i < n; ++i) {
    const float g = gate[i];
    out[i] = 0.5f * g * (1.0f + std::tanh(k * (g + 0.044715f * g * g * g))) * up[i];
  }
}

void softcap(float* x, size_t n, float cap) {
  for (size_t i = 0; i < n; ++i) x[i] = cap * std::tanh(x[i] / cap);
}

void rope_inverse_frequencies(float* inv_freq, int rotary_dim, const RopeFrequencyParams& params) {
  const int half = rotary_dim / 2;
  for (int i = 0; i < half; ++i) {
    // Same operation order as transformers: base ** (2i / dim) in float, then its reciprocal.
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(rotary_dim);
    float f = 1.0f / std::pow(params.theta, exponent);
    if (params.scaling == RopeScalingKind::longrope) {
      // transformers: 1 / (ext_factor * base ** (2i / dim)), the product rounded once.
      f = 1.0f / (params.ext_factors[i] * std::pow(params.theta, exponent));
    } else if (params.scaling == RopeScalingKind::linear) {
      f /= params.factor;
    } else if (params.scaling == RopeScalingKind::llama3) {
      // Llama 3.1: long wavelengths are slowed by `factor`, short ones kept, the band between
      // them blended smoothly.
      const float old_context = static_cast<float>(params.original_max_position_embeddings);
      const float low_freq_wavelen = old_context / params.low_freq_factor;
      const float high_freq_wavelen = old_context / params.high_freq_factor;
      const float wavelen = 2.0f * std::numbers::pi_v<float> / f;
      if (wavelen > low_freq_wavelen) {
        f /= params.factor;
      } else if (wavelen >= high_freq_wavelen) {
        const float smooth =
            (old_context / wavelen - params.low_freq_factor) / (params.high_freq_factor - params.low_freq_factor);
        f = (1.0f - smooth) * f / params.factor + smooth * f;
      }
    }
    inv_freq[i] = f;
  }
}

void rope(float* x, int n_heads, int head_dim, int pos, const float* inv_freq, RopeStyle style, int rotary_dim,
          float scale) {
  const int half = (rotary_dim > 0 ? rotary_dim : head_dim) / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = x + static_cast<size_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[i];
      const float c = std::cos(angle) * scale;
      const float s = std::sin(angle) * scale;
      const int a = style == RopeStyle::rotate_half ? i : 2 * i;
      const int b = style == RopeStyle::rotate_half ? i + half : 2 * i + 1;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * c - x1 * s;
      v[b] = x1 * c + x0 * s;
    }
  }
}

void attention(float* out, const float* q, const PagedKv& kv, int n_heads, int n_kv_heads, int head_dim, int pos,
               int window, float scale) {
  const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
  const int group = n_heads / n_kv_heads;
  std::vector<float> scores(static_cast<size_t>(pos - first + 1));
  auto cached = [&](size_t offset, int kv_head, int p) {
    return kv.pool + kern::kv_block_offset(kv.block_table[p / kv.block_size], kv.block_stride, offset, kv_head,
                                           kv.head_stride, p % kv.block_size, head_dim);
  };
  for (int h = 0; h < n_heads; ++h) {
    const int kv_head = h / group;
    const float* qh = q + static_cast<size_t>(h) * head_dim;
    float max_score = -INFINITY;
    for (int p = first; p <= pos; ++p) {
      const float* k = cached(kv.k_offset, kv_head, p);
      float dot = 0.0f;
      for (int d = 0; d < head_dim; ++d) dot += qh[d] * k[d];
      scores[p - first] = dot * scale;
      max_score = std::max(max_score, scores[p - first]);
    }
    float total = 0.0f;
    for (float& s : scores) {
      s = std::exp(s - max_score);
      total += s;
    }
    float* oh = out + static_cast<size_t>(h) * head_dim;
    std::fill(oh, oh + head_dim, 0.0f);
    for (int p = first; p <= pos; ++p) {
      const float* v = cached(kv.v_offset, kv_head, p);
      const float weight = scores[p - first] / total;
      for (int d = 0; d < head_dim; ++d) oh[d] += weight * v[d];
    }
  }
}

}  // namespace slab::ref
