#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "engine/sampler.h"

using namespace slab;

namespace {

SamplingParams params(float temperature, float top_p = 1.0f, int top_k = 0, float min_p = 0.0f, uint64_t seed = 42) {
  SamplingParams p;
  p.temperature = temperature;
  p.top_p = top_p;
  p.top_k = top_k;
  p.min_p = min_p;
  p.seed = seed;
  return p;
}

int32_t sample_once(Sampler& s, std::vector<float> logits, std::vector<int32_t> prompt = {},
                    std::vector<int32_t> output = {}, std::vector<int32_t> banned = {}) {
  return s.sample(logits, prompt, output, banned).token;
}

}  // namespace

TEST_CASE("greedy picks the first maximum", "[engine][sampler]") {
  Sampler s(params(0.0f));
  REQUIRE(sample_once(s, {0.1f, 3.0f, -1.0f, 3.0f}) == 1);
  REQUIRE(argmax(std::vector<float>{-5.0f, -4.0f}) == 1);
}

TEST_CASE("sampling follows the softmax at temperature and the filters", "[engine][sampler]") {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  auto frequencies = [&](SamplingParams p) {
    Sampler s(p);
    std::vector<double> count(logits.size());
    const int n = 20000;
    for (int i = 0; i < n; ++i) count[sample_once(s, logits)] += 1.0 / n;
    return count;
  };
  auto plain = frequencies(params(1.0f));
  CHECK(plain[0] == Approx(0.5).margin(0.02));
  CHECK(plain[1] == Approx(0.3).margin(0.02));
  CHECK(plain[3] == Approx(0.05).margin(0.01));

  auto hot = frequencies(params(2.0f));  // p ~ sqrt(p): flatter
  CHECK(hot[3] ==
        Approx(std::sqrt(0.05) / (std::sqrt(0.5) + std::sqrt(0.3) + std::sqrt(0.15) + std::sqrt(0.05))).margin(0.02));

  auto top_k2 = frequencies(params(1.0f, 1.0f, 2));
  CHECK(top_k2[0] == Approx(0.625).margin(0.02));
  CHECK(top_k2[2] == 0.0);

  auto top_p = frequencies(params(1.0f, 0.7f));  // 0.5 + 0.3 reaches 0.7
  CHECK(top_p[0] == Approx(0.625).margin(0.02));
  CHECK(top_p[2] == 0.0);

  auto min_p = frequencies(params(1.0f, 1.0f, 0, 0.25f));  // keeps p >= 0.125
  CHECK(min_p[2] == Approx(0.15 / 0.95).margin(0.02));
  CHECK(min_p[3] == 0.0);
}

TEST_CASE("the same seed gives the same tokens", "[engine][sampler]") {
  std::vector<float> logits(50);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = std::sin(static_cast<float>(i));
  auto run = [&](uint64_t seed) {
    Sampler s(params(0.9f, 0.95f, 0, 0.0f, seed));
    std::vector<int> out;
    for (int i = 0; i < 64; ++i) out.push_back(sample_once(s, logits));
    return out;
  };
  REQUIRE(run(1234) == run(1234));
  REQUIRE(run(1234) != run(4321));
}

TEST_CASE("penalties, logit bias and banned tokens change the greedy choice as vLLM defines them",
          "[engine][sampler]") {
  const std::vector<float> logits = {2.0f, 1.9f, -1.0f, 1.0f};
  SamplingParams p = params(0.0f);
  p.repetition_penalty = 1.2f;  // 2.0 / 1.2 < 1.9: token 0 loses if seen in the prompt
  Sampler rep(p);
  CHECK(sample_once(rep, logits, {0}, {}) == 1);
  CHECK(sample_once(rep, logits, {2}, {}) == 0);

  p = params(0.0f);
  p.frequency_penalty = 0.06f;  // twice in the output: 2.0 - 0.12 < 1.9
  Sampler freq(p);
  CHECK(sample_once(freq, logits, {}, {0}) == 0);
  CHECK(sample_once(freq, logits, {}, {0, 0}) == 1);
  CHECK(sample_once(freq, logits, {0, 0, 0}, {}) == 0);  // the prompt does not count

  p = params(0.0f);
  p.presence_penalty = 0.5f;
  Sampler presence(p);
  CHECK(sample_once(presence, logits, {}, {0}) == 1);

  p = params(0.0f);
  p.logit_bias = {{2, 5.0f}};
  Sampler bias(p);
  CHECK(sample_once(bias, logits) == 2);

  Sampler plain(params(0.0f));
  CHECK(sample_once(plain, logits, {}, {}, {0, 1}) == 3);
}

TEST_CASE("logprobs come from the model's distribution before processing", "[engine][sampler]") {
  std::vector<float> logits = {1.0f, 2.0f, 3.0f};
  SamplingParams p = params(0.0f);
  p.logprobs = 2;
  p.logit_bias = {{0, 10.0f}};
  Sampler s(p);
  SampledToken t = s.sample(logits, {}, {});
  const double lse = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(t.token == 0);
  CHECK(t.logprob == Approx(1.0 - lse));
  REQUIRE(t.top.size() == 2);
  CHECK(t.top[0].first == 2);
  CHECK(t.top[0].second == Approx(3.0 - lse));
  CHECK(t.top[1].first == 1);
}
