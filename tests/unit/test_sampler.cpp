#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <vector>

#include "engine/sampler.h"

using namespace slab;

TEST_CASE("greedy picks the first maximum", "[engine][sampler]") {
  std::vector<float> logits = {0.1f, 3.0f, -1.0f, 3.0f};
  Sampler s(SamplingParams{0.0f});
  REQUIRE(s.sample(logits) == 1);
  REQUIRE(argmax(std::vector<float>{-5.0f, -4.0f}) == 1);
}

TEST_CASE("sampling follows the softmax at temperature and the filters", "[engine][sampler]") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto frequencies = [&](SamplingParams p) {
    Sampler s(p);
    std::vector<double> count(logits.size());
    const int n = 20000;
    for (int i = 0; i < n; ++i) {
      std::vector<float> l = logits;
      count[s.sample(l)] += 1.0 / n;
    }
    return count;
  };
  auto plain = frequencies({1.0f, 1.0f, 0, 0.0f, 42});
  CHECK(plain[0] == Approx(0.5).margin(0.02));
  CHECK(plain[1] == Approx(0.3).margin(0.02));
  CHECK(plain[3] == Approx(0.05).margin(0.01));

  auto top_k2 = frequencies({1.0f, 1.0f, 2, 0.0f, 42});
  CHECK(top_k2[0] == Approx(0.625).margin(0.02));
  CHECK(top_k2[2] == 0.0);

  auto top_p = frequencies({1.0f, 0.7f, 0, 0.0f, 42});  // 0.5 + 0.3 reaches 0.7
  CHECK(top_p[0] == Approx(0.625).margin(0.02));
  CHECK(top_p[2] == 0.0);

  auto min_p = frequencies({1.0f, 1.0f, 0, 0.25f, 42});  // keeps p >= 0.125
  CHECK(min_p[2] == Approx(0.15 / 0.95).margin(0.02));
  CHECK(min_p[3] == 0.0);
}

TEST_CASE("the same seed gives the same tokens", "[engine][sampler]") {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  auto run = [&](uint64_t seed) {
    Sampler s({0.9f, 0.95f, 0, 0.0f, seed});
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) {
      std::vector<float> l = logits;
      out.push_back(s.sample(l));
    }
    return out;
  };
  REQUIRE(run(1234) == run(1234));
  REQUIRE(run(1234) != run(4321));
}
