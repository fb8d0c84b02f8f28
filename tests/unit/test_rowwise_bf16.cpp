// The runner's per-row ops against the scalar references: RMSNorm and SiLU·up rounded to BF16
// (within one BF16 rounding, 2^-8 relative, of the reference value), RoPE from tables (exactly
// the reference: same float angle, same cos/sin).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/reference.h"
#include "kernels/rowwise_bf16.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

std::vector<kern::Isa> isas() {
  std::vector<kern::Isa> v{kern::Isa::scalar};
  if (cpu_features().has_avx2_kernels()) v.push_back(kern::Isa::avx2);
  if (cpu_features().has_avx512_bf16_kernels()) v.push_back(kern::Isa::avx512_bf16);
  return v;
}

std::vector<float> random_vec(std::mt19937& rng, int n, float scale) {
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = d(rng);
  return v;
}

void check_bf16_close(const std::vector<kern::bf16_t>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("element " << i);
    CHECK(std::fabs(kern::bf16_to_f32(got[i]) - want[i]) <= std::ldexp(std::fabs(want[i]), -8) + 1e-30f);
  }
}

}  // namespace

TEST_CASE("rmsnorm_to_bf16 and silu_mul_to_bf16 equal the reference within one BF16 rounding", "[kernels][rowwise]") {
  std::mt19937 rng(5);
  for (kern::Isa isa : isas()) {
    for (int n : {1, 7, 64, 255, 256, 257, 2048, 5633}) {
      auto x = random_vec(rng, n, 3.0f);
      const auto w = random_vec(rng, n, 1.0f), up = random_vec(rng, n, 2.0f);
      // The vector exp's clamps and tails: far-negative and far-positive gates, zero, subnormal.
      const float extremes[] = {-100.0f, 100.0f, -88.5f, 0.0f, -20.0f, 1e-40f, 30.0f};
      for (size_t i = 0; i < std::size(extremes) && 3 * i < x.size(); ++i) x[3 * i] = extremes[i];
      std::vector<float> want(static_cast<size_t>(n));
      std::vector<kern::bf16_t> got(static_cast<size_t>(n));
      ref::rmsnorm(want.data(), x.data(), w.data(), n, 1e-5f);
      kern::rmsnorm_to_bf16(got.data(), x.data(), w.data(), n, 1e-5f, isa);
      check_bf16_close(got, want);  // sums in a different order: a few ulps of FP32, far below BF16's
      ref::silu_mul(want.data(), x.data(), up.data(), n);
      kern::silu_mul_to_bf16(got.data(), x.data(), up.data(), n, isa);
      check_bf16_close(got, want);
    }
  }
}

TEST_CASE("rope from tables equals the reference rotate-half rope", "[kernels][rowwise]") {
  std::mt19937 rng(9);
  const int head_dim = 64, half = 32, heads = 3, positions = 300;
  std::vector<float> inv_freq(half);
  ref::RopeFrequencyParams p;
  p.theta = 500000.0f;
  p.scaling = ref::RopeScalingKind::llama3;
  p.factor = 8.0f;
  ref::rope_inverse_frequencies(inv_freq.data(), head_dim, p);
  std::vector<float> cos(static_cast<size_t>(positions) * half), sin(cos.size());
  kern::rope_tables(cos.data(), sin.data(), inv_freq.data(), half, 0, 100);  // built in two pieces
  kern::rope_tables(cos.data(), sin.data(), inv_freq.data(), half, 100, positions);
  for (int pos : {0, 1, 99, 100, 299}) {
    const auto x = random_vec(rng, heads * head_dim, 1.0f);
    std::vector<float> want = x, got = x;
    ref::rope(want.data(), heads, head_dim, pos, inv_freq.data(), ref::RopeStyle::rotate_half);
    kern::rope_rotate_half(got.data(), heads, head_dim, head_dim, cos.data() + pos * half, sin.data() + pos * half);
    CHECK(got == want);
  }
}

TEST_CASE("partial rotary rope with longrope factors and cos/sin scale equals the reference", "[kernels][rowwise]") {
  std::mt19937 rng(10);
  const int head_dim = 24, rotary_dim = 18, half = 9, heads = 2, positions = 50;
  const float scale = 1.19f;
  std::vector<float> factors(half);
  for (int i = 0; i < half; ++i) factors[i] = 1.0f + 0.37f * static_cast<float>(i);
  ref::RopeFrequencyParams p;
  p.scaling = ref::RopeScalingKind::longrope;
  p.ext_factors = factors.data();
  std::vector<float> inv_freq(half);
  ref::rope_inverse_frequencies(inv_freq.data(), rotary_dim, p);
  // inv_freq[i] = 1 / (factor_i * theta^(2i / rotary_dim)).
  CHECK(inv_freq[0] == 1.0f);
  CHECK(inv_freq[4] == Approx(1.0 / (factors[4] * std::pow(10000.0, 8.0 / 18.0))).epsilon(1e-6));
  std::vector<float> cos(static_cast<size_t>(positions) * half), sin(cos.size());
  kern::rope_tables(cos.data(), sin.data(), inv_freq.data(), half, 0, positions, scale);
  for (int pos : {0, 7, 49}) {
    const auto x = random_vec(rng, heads * head_dim, 1.0f);
    std::vector<float> want = x, got = x;
    ref::rope(want.data(), heads, head_dim, pos, inv_freq.data(), ref::RopeStyle::rotate_half, rotary_dim, scale);
    kern::rope_rotate_half(got.data(), heads, head_dim, rotary_dim, cos.data() + pos * half, sin.data() + pos * half);
    CHECK(got == want);
    for (int h = 0; h < heads; ++h) {
      // The values past rotary_dim pass through; the rotated ones are scaled by `scale` at pos 0.
      for (int d = rotary_dim; d < head_dim; ++d) CHECK(want[h * head_dim + d] == x[h * head_dim + d]);
      if (pos == 0) CHECK(want[h * head_dim] == Approx(x[h * head_dim] * scale));
    }
  }
}

// Gemma's GeLU-tanh gated activation and logit soft-capping on every kernel path against the
// scalar references, on ragged lengths (tails of the 8- and 16-lane loops, several 256 chunks)
// and inputs reaching both saturated ends of tanh.
TEST_CASE("gelu_tanh·up to BF16 and softcap match the references on every path", "[kernels][rowwise]") {
  std::mt19937 rng(11);
  for (int n : {1, 7, 8, 15, 17, 33, 255, 256, 600}) {
    auto gate = random_vec(rng, n, 3.0f);
    const auto up = random_vec(rng, n, 1.0f);
    gate[0] = -30.0f;  // gelu -> -0 · up; tanh saturated at -1
    if (n > 1) gate[1] = 25.0f;  // gelu -> g
    std::vector<float> want(static_cast<size_t>(n));
    ref::gelu_tanh_mul(want.data(), gate.data(), up.data(), n);
    std::vector<float> logits = random_vec(rng, n, 40.0f);
    std::vector<float> capped = logits;
    ref::softcap(capped.data(), capped.size(), 30.0f);
    for (kern::Isa isa : isas()) {
      INFO("isa " << kern::isa_name(isa) << " n " << n);
      std::vector<kern::bf16_t> got(static_cast<size_t>(n), 0x4242);
      kern::gelu_tanh_mul_to_bf16(got.data(), gate.data(), up.data(), n, isa);
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("element " << i);
        // One BF16 rounding, plus the vector tanh's ~1e-7 absolute error scaled by g·up.
        CHECK(std::fabs(kern::bf16_to_f32(got[i]) - want[i]) <=
              std::ldexp(std::fabs(want[i]), -8) + 1e-6f * std::fabs(gate[i] * up[i]) + 1e-30f);
      }
      std::vector<float> sc = logits;
      kern::softcap(sc.data(), sc.size(), 30.0f, isa);
      for (size_t i = 0; i < sc.size(); ++i) {
        INFO("logit " << i);
        CHECK(std::fabs(sc[i] - capped[i]) <= 30.0f * 2e-6f);
        CHECK(std::fabs(sc[i]) <= 30.0f);
      }
    }
  }
}
