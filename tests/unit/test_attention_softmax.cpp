// The online-softmax step of the AVX-512 and AMX attention blocks (softmax16,
// kernels/attention_avx512_ops.h) against a scalar reference in double precision: new maxima,
// rescale factors, sums and the weights P, for vectors that see whole 16-token groups, parts of
// groups or nothing. With the AMX block's BF16 rows (PRows) every element of the block's steps
// must be written, so the rows start as NaN.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/attention_avx512_ops.h"
#include "kernels/bf16.h"
#include "runtime/cpu_features.h"

using namespace slab;
using namespace slab::kern;

namespace {

constexpr int kTokens = 64;  // the block's steps [0, 64): two of 32
constexpr bf16_t kBf16NaN = 0x7fc0;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

struct Vector {
  int lo, hi;
  float old_max, old_sum;
};

struct Case {
  std::vector<Vector> vectors;  // at most 16
  bool split = false;           // P as hi + lo parts (round_p_to_bf16 off)
};

void check_case(const Case& c, uint32_t seed) {
  const int n = static_cast<int>(c.vectors.size());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> score(-12.0f, 12.0f);
  std::vector<float> s(static_cast<size_t>(n) * kTokens), mx(16), l(16), alphas(16);
  std::vector<int> lo(16), hi(16);
  for (int j = 0; j < n; ++j) {
    const Vector& v = c.vectors[static_cast<size_t>(j)];
    lo[j] = v.lo;
    hi[j] = v.hi;
    mx[j] = v.old_max;
    l[j] = v.old_sum;
    // Scores outside [lo, hi) are whatever the tiles left there: NaN must not leak in.
    for (int t = 0; t < kTokens; ++t) {
      s[static_cast<size_t>(j) * kTokens + t] =
          t >= v.lo && t < v.hi ? score(rng) : std::numeric_limits<float>::quiet_NaN();
    }
  }
  const std::vector<float> scores = s;
  std::vector<bf16_t> p(static_cast<size_t>(n) * kTokens, kBf16NaN), p_lo(p.size(), kBf16NaN);
  detail::AttnBlock b;
  b.s = s.data();
  b.lds = kTokens;
  b.mx = mx.data();
  b.l = l.data();
  b.lo = lo.data();
  b.hi = hi.data();
  b.m = n;
  b.nt = kTokens;
  const detail::PRows rows{p.data(), p_lo.data(), kTokens, 0, kTokens, c.split};
  detail::softmax16<true>(b, 0, n, alphas.data(), &rows);

  for (int j = 0; j < n; ++j) {
    const Vector& v = c.vectors[static_cast<size_t>(j)];
    INFO("vector " << j << " of " << n << ": tokens [" << v.lo << ", " << v.hi << "), old max " << v.old_max
                   << ", P split " << c.split);
    const float* sj = scores.data() + static_cast<size_t>(j) * kTokens;
    double new_max = v.old_max;
    for (int t = v.lo; t < v.hi; ++t) new_max = std::fmax(new_max, sj[t]);
    const bool seen = v.old_max != kNegInf;
    const double alpha = v.lo >= v.hi ? 1.0 : seen ? std::exp(static_cast<double>(v.old_max) - new_max) : 0.0;
    double sum = 0;
    for (int t = 0; t < kTokens; ++t) {
      const size_t at = static_cast<size_t>(j) * kTokens + t;
      if (t < v.lo || t >= v.hi) {
        CHECK(p[at] == 0);
        if (c.split) CHECK(p_lo[at] == 0);
        continue;
      }
      const double want = std::exp(static_cast<double>(sj[t]) - new_max);
      sum += want;
      const double hi_part = bf16_to_f32(p[at]);
      // Rounded to 8 significant bits (relative error <= 2^-8); weights below 1e-30 count for nothing.
      CHECK(std::fabs(hi_part - want) <= want * (1.0 / 256 + 2e-6) + 1e-30);
      if (c.split) CHECK(std::fabs(hi_part + bf16_to_f32(p_lo[at]) - want) <= want * (1.0 / 65536 + 2e-6) + 1e-30);
    }
    CHECK(mx[j] == static_cast<float>(new_max));  // a maximum is exact
    CHECK(std::fabs(alphas[j] - alpha) <= alpha * 2e-6);
    CHECK(std::fabs(l[j] - (v.old_sum * alpha + sum)) <= (v.old_sum * alpha + sum) * 1e-5 + 1e-30);
  }
}

}  // namespace

TEST_CASE("softmax16 matches the scalar online softmax and writes whole BF16 P rows", "[attention]") {
  if (!cpu_features().has_avx512_bf16_kernels()) {
    WARN("AVX-512 attention softmax not tested: no AVX-512 BF16 kernels on this CPU (" << cpu_features().summary()
                                                                                       << ")");
    return;
  }
  uint32_t seed = 1;
  for (bool split : {false, true}) {
    // Sixteen vectors over the same whole groups (the unmasked pass), starting past the first
    // step and ending before the last: the rows' other tokens are zeroed, not left as they were.
    for (Vector v : {Vector{16, 48, kNegInf, 0.0f}, Vector{0, 64, 3.0f, 2.5f}, Vector{32, 48, 20.0f, 1.0f}}) {
      check_case({std::vector<Vector>(16, v), split}, seed++);
      check_case({std::vector<Vector>(5, v), split}, seed++);
    }
    // Mixed ranges (the masked pass): a causal diagonal, ranges inside one group, a vector that
    // sees nothing, an old maximum above every new score.
    Case mixed{{}, split};
    for (int j = 0; j < 16; ++j) mixed.vectors.push_back({0, 1 + 4 * j, j % 3 == 0 ? kNegInf : 1.0f, 0.5f});
    mixed.vectors[3] = {17, 30, 0.0f, 1.0f};
    mixed.vectors[7] = {40, 40, 2.0f, 3.0f};
    mixed.vectors[9] = {5, 6, 100.0f, 1.0f};
    check_case(mixed, seed++);
    mixed.vectors.resize(11);
    check_case(mixed, seed++);
  }
}
