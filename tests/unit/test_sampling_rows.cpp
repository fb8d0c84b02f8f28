// The sampling row kernels (kernels/sampling_rows.h) of every ISA this CPU has against double
// references written here from their definitions: std::exp in double, exact counts and index
// lists. Ragged lengths around the 8/16-lane and 1024-term block edges, -inf entries, ties, and
// scales from temperature 0.01 to 100.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/sampling_rows.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Every ISA path this CPU runs; the ones it lacks are named as skipped.
std::vector<kern::Isa> isas() {
  std::vector<kern::Isa> v{kern::Isa::scalar};
  if (cpu_features().has_avx2_kernels())
    v.push_back(kern::Isa::avx2);
  else
    WARN("AVX2 sampling kernels skipped: this CPU lacks avx2/fma");
  if (cpu_features().has_avx512_bf16_kernels())
    v.push_back(kern::Isa::avx512_bf16);
  else
    WARN("AVX-512 sampling kernels skipped: this CPU lacks them");
  return v;
}

const size_t kLengths[] = {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 1023, 1024, 1025, 2049, 4097, 32000, 50257};

// Logits of spread sigma; every 97th is -inf (a banned token), every 5th repeats its neighbour.
std::vector<float> random_logits(std::mt19937& rng, size_t n, float sigma) {
  std::normal_distribution<float> d(0.0f, sigma);
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = i % 97 == 96 ? kNegInf : (i % 5 == 4 ? v[i - 1] : d(rng));
  }
  return v;
}

double exp_term(float x, float shift, float scale) { return std::exp(static_cast<double>(x - shift) * scale); }

// e^a with a = (x - shift)·scale rounded to float: the kernels' 2e-7 plus the argument's own
// rounding, 6e-8·|a|. Terms below 2^-126 may flush to 0 on the vector paths (1e-37 absolute).
void check_term(double got, double want, float x, float shift, float scale) {
  const double arg = std::fabs(static_cast<double>(x - shift) * scale);
  const double relative = want > 0.0 ? (1e-6 + 1.2e-7 * arg) * want : 0.0;  // -inf logits: exactly 0
  CHECK(std::fabs(got - want) <= relative + 1e-37);
}

}  // namespace

TEST_CASE("row max, sum of exp and softmax match double references on every ISA", "[kernels][sampling_rows]") {
  std::mt19937 rng(7);
  for (kern::Isa isa : isas()) {
    for (size_t n : kLengths) {
      for (float temperature : {0.01f, 0.8f, 1.0f, 100.0f}) {
        INFO("isa " << kern::isa_name(isa) << ", n " << n << ", temperature " << temperature);
        const std::vector<float> x = random_logits(rng, n, 3.0f);
        float want_max = kNegInf;
        for (float v : x) want_max = std::max(want_max, v);
        const float max = kern::row_max(x.data(), n, isa);
        REQUIRE(max == want_max);
        if (max == kNegInf) continue;

        const float scale = 1.0f / temperature;
        double want_total = 0.0;
        for (float v : x) want_total += exp_term(v, max, scale);
        std::vector<float> terms(n, -1.0f);
        const double total = kern::sum_exp(x.data(), n, max, scale, terms.data(), isa);
        CHECK(total == Approx(want_total).epsilon(1e-6));
        CHECK(kern::sum_exp(x.data(), n, max, scale, nullptr, isa) == total);
        for (size_t i = 0; i < n; ++i) check_term(terms[i], exp_term(x[i], max, scale), x[i], max, scale);

        std::vector<float> probs(n, -1.0f);
        kern::softmax(x.data(), n, scale, probs.data(), isa);
        for (size_t i = 0; i < n; ++i) check_term(probs[i], exp_term(x[i], max, scale) / want_total, x[i], max, scale);
      }
    }
  }
}

TEST_CASE("a shift above the row keeps every term below 1 and the sum exact", "[kernels][sampling_rows]") {
  // The logprobs normaliser: shift = max, scale 1, on a row with one dominant logit.
  for (kern::Isa isa : isas()) {
    std::vector<float> x(1000, -30.0f);
    x[517] = 12.5f;
    const double total = kern::sum_exp(x.data(), x.size(), 12.5f, 1.0f, nullptr, isa);
    CHECK(total == Approx(1.0 + 999 * std::exp(-42.5)).epsilon(1e-7));
    const std::vector<float> all_banned(33, kNegInf);
    CHECK(kern::row_max(all_banned.data(), all_banned.size(), isa) == kNegInf);
  }
}

TEST_CASE("tail masses count and weigh exactly the logits at or above each threshold", "[kernels][sampling_rows]") {
  std::mt19937 rng(11);
  for (kern::Isa isa : isas()) {
    for (size_t n : kLengths) {
      for (int n_thresholds : {1, 3, kern::kMaxThresholds}) {
        INFO("isa " << kern::isa_name(isa) << ", n " << n << ", thresholds " << n_thresholds);
        const std::vector<float> x = random_logits(rng, n, 2.0f);
        const float max = *std::max_element(x.begin(), x.end());
        if (max == kNegInf) continue;
        // Thresholds at some of the row's own values (ties at the boundary), below the row, and -inf.
        std::vector<float> thresholds(static_cast<size_t>(n_thresholds));
        std::uniform_int_distribution<size_t> pick(0, n - 1);
        for (float& t : thresholds) t = x[pick(rng)];
        thresholds[0] = max;
        if (n_thresholds > 2) thresholds[1] = kNegInf;
        if (n_thresholds > 3) thresholds[2] = max - 100.0f;
        const float scale = 1.0f / 0.7f;

        std::vector<size_t> counts(thresholds.size());
        std::vector<double> masses(thresholds.size());
        const double total = kern::tail_masses(x.data(), n, max, scale, thresholds.data(), n_thresholds, counts.data(),
                                               masses.data(), isa);
        double want_total = 0.0;
        for (float v : x) want_total += exp_term(v, max, scale);
        CHECK(total == Approx(want_total).epsilon(1e-6));
        for (size_t j = 0; j < thresholds.size(); ++j) {
          size_t want_count = 0;
          double want_mass = 0.0;
          for (float v : x) {
            if (v >= thresholds[j]) {
              ++want_count;
              want_mass += exp_term(v, max, scale);
            }
          }
          INFO("threshold " << thresholds[j]);
          CHECK(counts[j] == want_count);
          CHECK(std::fabs(masses[j] - want_mass) <= 1e-6 * want_total);
        }
      }
    }
  }
}

TEST_CASE("indices at or above a threshold, and the first of them, are exactly the reference's",
          "[kernels][sampling_rows]") {
  std::mt19937 rng(13);
  for (kern::Isa isa : isas()) {
    for (size_t n : kLengths) {
      const std::vector<float> x = random_logits(rng, n, 2.0f);
      std::uniform_int_distribution<size_t> pick(0, n - 1);
      for (float threshold : {x[pick(rng)], x[pick(rng)], kNegInf, 1e30f}) {
        INFO("isa " << kern::isa_name(isa) << ", n " << n << ", threshold " << threshold);
        std::vector<int32_t> want;
        for (size_t i = 0; i < n; ++i) {
          if (x[i] >= threshold) want.push_back(static_cast<int32_t>(i));
        }
        std::vector<int32_t> got(n, -1);
        got.resize(kern::indices_at_or_above(x.data(), n, threshold, got.data(), isa));
        CHECK(got == want);
        CHECK(kern::first_at_or_above(x.data(), n, threshold, isa) ==
              (want.empty() ? n : static_cast<size_t>(want[0])));
      }
    }
  }
}
