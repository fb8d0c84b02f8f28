// Speculative decoding's two pure pieces: the n-gram proposer, and the acceptance rule that keeps
// sampled output distributed exactly as without speculation (checked by total variation over
// many draws, with a bound that the two classic wrong rules fail by a wide margin).
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "engine/draft_acceptance.h"
#include "engine/ngram_proposer.h"
#include "engine/sampler.h"

using namespace slab;

TEST_CASE("the n-gram proposer continues the latest earlier occurrence of the longest recurring suffix",
          "[speculative]") {
  // ... 1 2 3 [4 5 6 7] ... 9 2 3 [8 9] ... 1 2 3: the 3-gram "1 2 3" recurs at 0; "2 3" more recently at 9.
  const std::vector<int32_t> tokens = {1, 2, 3, 4, 5, 6, 7, 0, 9, 2, 3, 8, 9, 1, 2, 3};
  CHECK(propose_ngram(tokens, 1, 3, 4) == std::vector<int32_t>{4, 5, 6, 7});  // n = 3 wins over the later "2 3"
  CHECK(propose_ngram(tokens, 1, 2, 4) == std::vector<int32_t>{8, 9, 1, 2});  // n = 2: the latest "2 3"
  CHECK(propose_ngram(tokens, 1, 3, 2) == std::vector<int32_t>{4, 5});        // at most k tokens
  CHECK(propose_ngram(tokens, 1, 3, 0).empty());
  // The match's continuation runs into the end of the context: fewer than k tokens.
  const std::vector<int32_t> tail = {5, 6, 7, 5, 6};
  CHECK(propose_ngram(tail, 1, 2, 4) == std::vector<int32_t>{7, 5, 6});
  // Nothing recurs at n >= min.
  const std::vector<int32_t> fresh = {1, 2, 3, 4, 1};
  CHECK(propose_ngram(fresh, 2, 3, 4).empty());
  CHECK(propose_ngram(fresh, 1, 3, 4) == std::vector<int32_t>{2, 3, 4, 1});
  CHECK(propose_ngram(std::vector<int32_t>{7}, 1, 3, 4).empty());
}

namespace {

double total_variation(const std::vector<double>& p, const std::vector<int>& counts, int draws) {
  double tv = 0.0;
  for (size_t t = 0; t < p.size(); ++t) tv += std::abs(p[t] - static_cast<double>(counts[t]) / draws);
  return tv / 2;
}

}  // namespace

TEST_CASE("accept-or-resample yields the target distribution whatever the draft, and wrong rules do not",
          "[speculative]") {
  const std::vector<double> p = {0.05, 0.3, 0.0, 0.15, 0.4, 0.1};
  const std::vector<double> weights = {0.5, 3.0, 0.0, 1.5, 4.0, 1.0};  // p up to a constant
  const int draws = 200000;
  // With 200k draws over 6 outcomes the sampling TV is ~0.003; every wrong rule below is >= 0.09 off.
  const double bound = 0.01;
  std::mt19937_64 rng(1234);
  for (int32_t draft = 0; draft < 6; ++draft) {
    INFO("draft " << draft);
    std::vector<int> counts(6, 0), accept_always(6, 0), resample_from_p(6, 0);
    int accepted = 0;
    std::discrete_distribution<int> from_p(p.begin(), p.end());
    for (int i = 0; i < draws; ++i) {
      const DraftVerdict v = accept_or_resample({}, weights, draft, rng);
      REQUIRE((v.accepted == (v.token == draft)));
      ++counts[static_cast<size_t>(v.token)];
      accepted += v.accepted ? 1 : 0;
      ++accept_always[static_cast<size_t>(draft)];
      // Wrong: on rejection draw from p itself, the draft included.
      const bool keep = std::generate_canonical<double, 53>(rng) < p[static_cast<size_t>(draft)];
      ++resample_from_p[static_cast<size_t>(keep ? draft : from_p(rng))];
    }
    CHECK(total_variation(p, counts, draws) < bound);
    CHECK(std::abs(static_cast<double>(accepted) / draws - p[static_cast<size_t>(draft)]) < bound);
    CHECK(total_variation(p, accept_always, draws) > 0.5);
    if (p[static_cast<size_t>(draft)] > 0.0) CHECK(total_variation(p, resample_from_p, draws) > 0.04);
  }
  // Explicit token lists: ids are the listed ones, not the indices.
  const std::vector<int32_t> ids = {40, 7, 93};
  const std::vector<double> w = {1.0, 1.0, 2.0};
  std::map<int32_t, int> seen;
  for (int i = 0; i < 40000; ++i) ++seen[accept_or_resample(ids, w, 7, rng).token];
  CHECK(seen.size() == 3);
  CHECK(std::abs(seen[93] / 40000.0 - 0.5) < 0.02);
}

TEST_CASE("Sampler::verify emits what sample() would draw: temperature, top-k, penalties, greedy", "[speculative]") {
  // 8 tokens; temperature 0.7, top_k 4, repetition penalty on token 1 (it is in the output).
  std::vector<float> base = {2.0f, 1.8f, -1.0f, 1.5f, 0.2f, 1.0f, -3.0f, 0.9f};
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_k = 4;
  params.repetition_penalty = 1.5f;
  params.seed = 99;
  const std::vector<int32_t> prompt = {4};
  const std::vector<int32_t> output = {1};
  // Independent reference: penalise 4 and 1 (positive: divide), keep the top 4, softmax at T.
  std::vector<double> expected(base.size(), 0.0);
  {
    std::vector<float> l = base;
    l[4] /= 1.5f;
    l[1] /= 1.5f;  // 1.2
    // Top 4 of {2.0, 1.2, -1, 1.5, 0.133, 1.0, -3, 0.9}: tokens 0, 3, 1, 5.
    double total = 0.0;
    for (int t : {0, 3, 1, 5}) total += expected[static_cast<size_t>(t)] = std::exp((l[static_cast<size_t>(t)] - 2.0) / 0.7);
    for (double& e : expected) e /= total;
  }
  Sampler sampler(params);
  const int draws = 100000;
  for (int32_t draft : {0, 5, 6}) {  // the favourite, a tail candidate, a token top-k removes
    INFO("draft " << draft);
    std::vector<int> counts(base.size(), 0);
    int accepted = 0;
    for (int i = 0; i < draws; ++i) {
      std::vector<float> row = base;
      bool ok = false;
      const SampledToken s = sampler.verify(row, prompt, output, {}, {}, draft, ok);
      ++counts[static_cast<size_t>(s.token)];
      accepted += ok ? 1 : 0;
    }
    CHECK(total_variation(expected, counts, draws) < 0.01);
    CHECK(std::abs(static_cast<double>(accepted) / draws - expected[static_cast<size_t>(draft)]) < 0.01);
  }

  // No filter: the whole-vocabulary path, with a logit bias; p = softmax((l + bias) / 1.3).
  SamplingParams whole;
  whole.temperature = 1.3f;
  whole.logit_bias = {{6, 4.0f}};
  std::vector<double> softmax(base.size());
  double total = 0.0;
  for (size_t t = 0; t < base.size(); ++t) total += softmax[t] = std::exp((base[t] + (t == 6 ? 4.0 : 0.0)) / 1.3);
  for (double& e : softmax) e /= total;
  Sampler vocab_sampler(whole);
  std::vector<int> whole_counts(base.size(), 0);
  for (int i = 0; i < draws; ++i) {
    std::vector<float> row = base;
    bool ok = false;
    ++whole_counts[static_cast<size_t>(vocab_sampler.verify(row, prompt, output, {}, {}, 3, ok).token)];
  }
  CHECK(total_variation(softmax, whole_counts, draws) < 0.01);

  // Greedy: accepted exactly when the draft is the argmax, which is what is emitted either way.
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  Sampler g(greedy);
  for (int32_t draft : {0, 3}) {
    std::vector<float> row = base;
    bool ok = false;
    CHECK(g.verify(row, prompt, {}, {}, {}, draft, ok).token == 0);
    CHECK(ok == (draft == 0));
  }
  // Banned (min_tokens) and logit_bias apply before the rule, as in sample().
  std::vector<float> row = base;
  bool ok = true;
  const std::vector<int32_t> banned = {0};
  CHECK(g.verify(row, prompt, {}, banned, {}, 0, ok).token == 1);
  CHECK_FALSE(ok);
}
