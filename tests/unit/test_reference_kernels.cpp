// The scalar reference ops against independent formulations: paged attention against dense
// attention over the same keys, the two RoPE pairings against each other, RMSNorm by hand.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/reference.h"

using namespace slab;

namespace {

std::vector<float> random_vector(size_t n, std::mt19937& rng, float scale = 1.0f) {
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Dense causal attention of one query over keys/values laid out [pos][kv_head][head_dim].
std::vector<float> dense_attention(const std::vector<float>& q, const std::vector<float>& keys,
                                   const std::vector<float>& values, int n_heads, int n_kv_heads, int head_dim, int pos,
                                   int window) {
  std::vector<float> out(static_cast<size_t>(n_heads) * head_dim, 0.0f);
  const int first = window > 0 ? std::max(0, pos - window + 1) : 0;
  for (int h = 0; h < n_heads; ++h) {
    const int kvh = h / (n_heads / n_kv_heads);
    std::vector<double> w;
    for (int p = first; p <= pos; ++p) {
      double dot = 0;
      for (int d = 0; d < head_dim; ++d)
        dot += q[h * head_dim + d] * keys[(static_cast<size_t>(p) * n_kv_heads + kvh) * head_dim + d];
      w.push_back(dot / std::sqrt(static_cast<double>(head_dim)));
    }
    const double mx = *std::max_element(w.begin(), w.end());
    double total = 0;
    for (double& x : w) total += (x = std::exp(x - mx));
    for (int p = first; p <= pos; ++p) {
      for (int d = 0; d < head_dim; ++d) {
        out[h * head_dim + d] += static_cast<float>(w[p - first] / total *
                                                    values[(static_cast<size_t>(p) * n_kv_heads + kvh) * head_dim + d]);
      }
    }
  }
  return out;
}

}  // namespace

TEST_CASE("paged attention equals dense attention for any block order, GQA and window", "[kernels][reference]") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 12; ++trial) {
    const int n_kv_heads = 1 + trial % 3;
    const int n_heads = n_kv_heads * (1 + trial % 4);
    const int head_dim = 8 + 4 * (trial % 5);
    const int block_size = 16;
    const int pos = 3 + 11 * trial;  // ragged against the block size
    const int window = trial % 3 == 0 ? 5 + trial : 0;
    const int n_layers = 2;
    const int layer = trial % 2;
    const int n_blocks = pos / block_size + 1;

    std::vector<float> keys = random_vector(static_cast<size_t>(pos + 1) * n_kv_heads * head_dim, rng);
    std::vector<float> values = random_vector(keys.size(), rng);
    std::vector<float> q = random_vector(static_cast<size_t>(n_heads) * head_dim, rng);

    // Scatter into blocks in a shuffled order, with spare blocks in the pool.
    const size_t head_stride = static_cast<size_t>(block_size) * head_dim;
    const size_t kv_stride = head_stride * n_kv_heads;
    const size_t layer_stride = 2 * kv_stride;
    const size_t block_stride = layer_stride * n_layers;
    std::vector<int32_t> table(n_blocks);
    std::iota(table.begin(), table.end(), 0);
    for (int32_t& b : table) b = b * 2 + 1;
    std::shuffle(table.begin(), table.end(), rng);
    std::vector<float> pool(block_stride * (2 * n_blocks + 1), std::nanf(""));
    for (int p = 0; p <= pos; ++p) {
      for (int h = 0; h < n_kv_heads; ++h) {
        float* base = pool.data() + table[p / block_size] * block_stride + layer * layer_stride + h * head_stride +
                      (p % block_size) * head_dim;
        std::copy_n(&keys[(static_cast<size_t>(p) * n_kv_heads + h) * head_dim], head_dim, base);
        std::copy_n(&values[(static_cast<size_t>(p) * n_kv_heads + h) * head_dim], head_dim, base + kv_stride);
      }
    }
    ref::PagedKv kv{pool.data(),  table.data(),         block_size,
                    block_stride, layer * layer_stride, layer * layer_stride + kv_stride,
                    head_stride};
    std::vector<float> out(q.size());
    ref::attention(out.data(), q.data(), kv, n_heads, n_kv_heads, head_dim, pos, window,
                   1.0f / std::sqrt(static_cast<float>(head_dim)));
    std::vector<float> expected = dense_attention(q, keys, values, n_heads, n_kv_heads, head_dim, pos, window);
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(out[i] == Approx(expected[i]).margin(1e-5));
  }
}

TEST_CASE("interleaved RoPE is rotate-half RoPE on de-interleaved lanes", "[kernels][reference]") {
  std::mt19937 rng(3);
  const int head_dim = 16;
  const int n_heads = 3;
  std::vector<float> inv_freq(head_dim / 2);
  ref::rope_inverse_frequencies(inv_freq.data(), head_dim, {});
  std::vector<float> x = random_vector(static_cast<size_t>(n_heads) * head_dim, rng);
  // Permute (0,1),(2,3).. pairs into (i, i+half) positions.
  std::vector<float> halves(x.size());
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < head_dim / 2; ++i) {
      halves[h * head_dim + i] = x[h * head_dim + 2 * i];
      halves[h * head_dim + i + head_dim / 2] = x[h * head_dim + 2 * i + 1];
    }
  }
  ref::rope(x.data(), n_heads, head_dim, 37, inv_freq.data(), ref::RopeStyle::interleaved);
  ref::rope(halves.data(), n_heads, head_dim, 37, inv_freq.data(), ref::RopeStyle::rotate_half);
  for (int h = 0; h < n_heads; ++h) {
    for (int i = 0; i < head_dim / 2; ++i) {
      REQUIRE(x[h * head_dim + 2 * i] == Approx(halves[h * head_dim + i]));
      REQUIRE(x[h * head_dim + 2 * i + 1] == Approx(halves[h * head_dim + i + head_dim / 2]));
    }
  }
}

TEST_CASE("RoPE keeps norms and position 0 is the identity", "[kernels][reference]") {
  std::mt19937 rng(5);
  std::vector<float> inv_freq(32);
  ref::rope_inverse_frequencies(inv_freq.data(), 64, {500000.0f, ref::RopeScalingKind::llama3, 8.0f, 1.0f, 4.0f, 8192});
  std::vector<float> x = random_vector(64, rng);
  std::vector<float> y = x;
  ref::rope(y.data(), 1, 64, 0, inv_freq.data(), ref::RopeStyle::rotate_half);
  REQUIRE(y == x);
  ref::rope(y.data(), 1, 64, 1000, inv_freq.data(), ref::RopeStyle::rotate_half);
  auto norm = [](const std::vector<float>& v) {
    return std::sqrt(std::inner_product(v.begin(), v.end(), v.begin(), 0.0));
  };
  REQUIRE(norm(y) == Approx(norm(x)).epsilon(1e-5));
}

TEST_CASE("llama3 RoPE scaling slows long wavelengths only", "[kernels][reference]") {
  const int dim = 128;
  std::vector<float> plain(dim / 2), scaled(dim / 2);
  ref::rope_inverse_frequencies(plain.data(), dim, {500000.0f});
  ref::rope_inverse_frequencies(scaled.data(), dim, {500000.0f, ref::RopeScalingKind::llama3, 8.0f, 1.0f, 4.0f, 8192});
  const float pi = 3.14159265f;
  for (int i = 0; i < dim / 2; ++i) {
    const float wavelen = 2 * pi / plain[i];
    if (wavelen < 8192.0f / 4.0f) REQUIRE(scaled[i] == plain[i]);
    if (wavelen > 8192.0f) REQUIRE(scaled[i] == Approx(plain[i] / 8.0f));
    REQUIRE(scaled[i] <= plain[i]);
    REQUIRE(scaled[i] >= plain[i] / 8.0f * (1 - 1e-6f));
  }
}

TEST_CASE("rmsnorm, linear and silu_mul match hand computation", "[kernels][reference]") {
  const float x[4] = {1, -2, 3, -4};
  const float w[4] = {1, 0.5f, 2, 1};
  float out[4];
  ref::rmsnorm(out, x, w, 4, 0.0f);
  const float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  for (int i = 0; i < 4; ++i) REQUIRE(out[i] == Approx(x[i] / rms * w[i]));

  const float a[2 * 3] = {1, 2, 3, 4, 5, 6};            // [m=2, k=3]
  const float b[2 * 3] = {1, 0, -1, 0.5f, 0.5f, 0.5f};  // [n=2, k=3]
  const float bias[2] = {10, 20};
  float y[4];
  ref::linear(y, a, b, bias, 2, 2, 3);
  REQUIRE(y[0] == Approx(1 - 3 + 10));
  REQUIRE(y[1] == Approx(3 + 20));
  REQUIRE(y[2] == Approx(4 - 6 + 10));
  REQUIRE(y[3] == Approx(7.5 + 20));

  const float g[2] = {0.0f, 2.0f};
  const float u[2] = {3.0f, 5.0f};
  float s[2];
  ref::silu_mul(s, g, u, 2);
  REQUIRE(s[0] == Approx(0.0f));
  REQUIRE(s[1] == Approx(2.0f / (1.0f + std::exp(-2.0f)) * 5.0f));
}
