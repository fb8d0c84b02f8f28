// The sampler's selection without sorting (engine/token_selection.h, engine/sampler.h) against a
// straightforward full-sort reference written here: stable-sort the whole vocabulary, softmax
// in double at temperature, then top-k, min-p and top-p as vLLM applies them. On random logits
// of many vocabulary sizes (ragged ones included), with ties, -inf entries, temperature extremes,
// top_p = 1 and tiny, min_p edge cases, for every ISA path this CPU has.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "engine/sampler.h"
#include "engine/token_selection.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

std::vector<kern::Isa> isas() {
  std::vector<kern::Isa> v{kern::Isa::scalar};
  if (cpu_features().has_avx2_kernels())
    v.push_back(kern::Isa::avx2);
  else
    WARN("AVX2 path skipped: this CPU lacks avx2/fma");
  if (cpu_features().has_avx512_bf16_kernels())
    v.push_back(kern::Isa::avx512_bf16);
  else
    WARN("AVX-512 path skipped: this CPU lacks it");
  return v;
}

struct Filters {
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
};

// What the filters keep, by full sort: tokens in rank order, each one's probability under the
// softmax of what top_k kept, and whether nothing was filtered at all.
struct Kept {
  std::vector<int32_t> tokens;
  std::vector<double> probs;
  bool unfiltered = false;
};

Kept reference_keep(const std::vector<float>& logits, const Filters& f) {
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (f.top_k > 0 && static_cast<size_t>(f.top_k) < order.size()) order.resize(static_cast<size_t>(f.top_k));
  Kept kept;
  kept.unfiltered = order.size() == logits.size() && f.top_p >= 1.0f && f.min_p <= 0.0f;
  std::vector<double> probs(order.size());
  double total = 0.0;
  for (size_t i = 0; i < order.size(); ++i) {
    probs[i] = std::exp(static_cast<double>(logits[order[i]] - logits[order[0]]) / f.temperature);
    total += probs[i];
  }
  for (double& p : probs) p /= total;
  size_t cut = order.size();
  if (f.min_p > 0.0f) {
    cut = 1;
    while (cut < order.size() && probs[cut] >= f.min_p * probs[0]) ++cut;
  }
  if (f.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      cumulative += probs[i];
      if (cumulative >= f.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  kept.tokens.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(cut));
  kept.probs.assign(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(cut));
  return kept;
}

// Where the two lists may end differently because a cut sits within rounding of its limit: the
// reference's cumulative probability within 2e-5 of top_p, or a probability ratio within 1e-9
// of min_p (the kernel's softmax denominator differs from the double one by ~1e-6).
bool cut_is_borderline(const std::vector<float>& logits, const Filters& f, size_t at) {
  Filters open = f;
  open.top_p = 1.0f;
  open.min_p = 0.0f;
  const Kept all = reference_keep(logits, open);
  if (at >= all.tokens.size()) return false;
  const double cumulative =
      std::accumulate(all.probs.begin(), all.probs.begin() + static_cast<std::ptrdiff_t>(at), 0.0);
  const double ratio = all.probs[at] / all.probs[0];
  return (f.top_p < 1.0f && std::fabs(cumulative - f.top_p) < 2e-5) ||
         (f.min_p > 0.0f && std::fabs(ratio - f.min_p) < 1e-9 * f.min_p);
}

// Compares the selection with the reference; returns false on a borderline cut (counted apart).
bool check_selection(TokenSelector& selector, const std::vector<float>& logits, const Filters& f) {
  const Kept want = reference_keep(logits, f);
  const DrawCandidates& got = selector.candidates(logits, f.temperature, f.top_k, f.top_p, f.min_p);
  if (want.unfiltered) {
    CHECK(got.whole_vocab);
    return true;
  }
  REQUIRE_FALSE(got.whole_vocab);
  REQUIRE(got.tokens.size() == got.weights.size());
  const size_t common = std::min(got.tokens.size(), want.tokens.size());
  REQUIRE(common > 0);
  CHECK(std::equal(got.tokens.begin(), got.tokens.begin() + static_cast<std::ptrdiff_t>(common), want.tokens.begin()));
  if (got.tokens.size() != want.tokens.size()) {
    CHECK(cut_is_borderline(logits, f, common));
    return false;
  }
  // The draw's distribution: both renormalised over what was kept.
  const double got_sum = std::accumulate(got.weights.begin(), got.weights.end(), 0.0);
  const double want_sum = std::accumulate(want.probs.begin(), want.probs.end(), 0.0);
  for (size_t i = 0; i < common; ++i) {
    CHECK(got.weights[i] / got_sum == Approx(want.probs[i] / want_sum).epsilon(1e-9).margin(1e-15));
  }
  return true;
}

enum class Shape { peaked, flat, quantised, dominant };

// Logit rows: peaked (sigma 3, like a model's), flat (sigma 0.3), quantised to quarters (many
// ties), dominant (one logit far above the rest); every 61st -inf (banned).
std::vector<float> make_logits(std::mt19937& rng, size_t n, Shape shape) {
  std::normal_distribution<float> d(0.0f, shape == Shape::flat ? 0.3f : 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  if (shape == Shape::quantised) {
    for (float& x : v) x = std::round(x * 4.0f) / 4.0f;
  }
  if (shape == Shape::dominant) v[n / 3] = 40.0f;
  for (size_t i = 60; i < n; i += 61) v[i] = kNegInf;
  return v;
}

const size_t kVocabs[] = {1, 2, 3, 17, 100, 1000, 4095, 4097, 8193, 32000, 50257, 128256};

}  // namespace

TEST_CASE("top-k, top-p and min-p keep what a full sort keeps, on every ISA", "[engine][sampler][token_selection]") {
  const float temperatures[] = {1e-3f, 0.05f, 0.8f, 1.0f, 2.0f, 100.0f};
  const float top_ps[] = {1.0f, 0.999f, 0.95f, 0.5f, 1e-6f};
  const int top_ks[] = {0, 1, 5, 40, 4096, 1 << 30};
  const float min_ps[] = {0.0f, 1e-7f, 0.05f, 0.5f, 1.0f};
  for (kern::Isa isa : isas()) {
    TokenSelector selector(isa);
    std::mt19937 rng(2024);
    size_t cases = 0, borderline = 0;
    for (size_t vocab : kVocabs) {
      for (Shape shape : {Shape::peaked, Shape::flat, Shape::quantised, Shape::dominant}) {
        const std::vector<float> logits = make_logits(rng, vocab, shape);
        // The whole grid on small rows, 12 random combinations on the large ones.
        const int combos = vocab <= 1000 ? 6 * 5 * 6 * 5 : 12;
        for (int c = 0; c < combos; ++c) {
          Filters f;
          const int k = vocab <= 1000 ? c : static_cast<int>(rng() % (6 * 5 * 6 * 5));
          f.temperature = temperatures[k % 6];
          f.top_p = top_ps[k / 6 % 5];
          f.top_k = top_ks[k / 30 % 6];
          f.min_p = min_ps[k / 180 % 5];
          INFO("isa " << kern::isa_name(isa) << ", vocab " << vocab << ", shape " << static_cast<int>(shape) << ", T "
                      << f.temperature << ", top_k " << f.top_k << ", top_p " << f.top_p << ", min_p " << f.min_p);
          ++cases;
          if (!check_selection(selector, logits, f)) ++borderline;
        }
      }
    }
    INFO("isa " << kern::isa_name(isa) << ": " << borderline << " borderline cuts of " << cases);
    CHECK(borderline * 1000 <= cases);
  }
}

TEST_CASE("selection edge cases: ties, tiny top_p, min_p 1, top_k past the vocabulary, all but one banned",
          "[engine][sampler][token_selection]") {
  for (kern::Isa isa : isas()) {
    TokenSelector selector(isa);
    INFO("isa " << kern::isa_name(isa));
    std::vector<float> ties(5000, 1.0f);
    ties[4000] = 2.0f;
    ties[4001] = 2.0f;
    ties[17] = 2.0f;
    // Tiny top_p: the first of the tied best (lowest id); min_p 1: exactly the tied best.
    auto c = selector.candidates(ties, 1.0f, 0, 1e-6f, 0.0f);
    CHECK(c.tokens == std::vector<int32_t>{17});
    c = selector.candidates(ties, 1.0f, 0, 1.0f, 1.0f);
    CHECK(c.tokens == std::vector<int32_t>{17, 4000, 4001});
    c = selector.candidates(ties, 0.5f, 2, 1.0f, 0.0f);
    CHECK(c.tokens == std::vector<int32_t>{17, 4000});
    CHECK(selector.top_k(ties, 4) == std::vector<int32_t>{17, 4000, 4001, 0});
    // top_k at or past the vocabulary is no filter.
    CHECK(selector.candidates(ties, 1.0f, 5000, 1.0f, 0.0f).whole_vocab);
    // Every token but one banned: that one, under any filter.
    std::vector<float> banned(70000, kNegInf);
    banned[69999] = -3.0f;
    CHECK(selector.candidates(banned, 0.8f, 0, 0.95f, 0.0f).tokens == std::vector<int32_t>{69999});
    CHECK(selector.candidates(banned, 0.8f, 0, 1.0f, 0.05f).tokens == std::vector<int32_t>{69999});
    CHECK(selector.candidates(banned, 0.8f, 40, 0.95f, 0.0f).tokens.front() == 69999);
  }
}

TEST_CASE("seeded draws equal the full-sort reference's draws from the same generator",
          "[engine][sampler][token_selection]") {
  // The old sampler drew with std::discrete_distribution over the kept probabilities in rank
  // order: the same seed must give the same tokens.
  std::mt19937 rng(99);
  for (kern::Isa isa : isas()) {
    for (size_t vocab : {1000u, 32000u, 128256u}) {
      const std::vector<float> logits = make_logits(rng, vocab, Shape::peaked);
      for (Filters f : {Filters{0.8f, 0, 0.95f, 0.0f}, Filters{1.0f, 40, 1.0f, 0.0f}, Filters{1.0f, 0, 1.0f, 0.05f},
                        Filters{0.7f, 50, 0.9f, 0.02f}}) {
        INFO("isa " << kern::isa_name(isa) << ", vocab " << vocab << ", T " << f.temperature << ", top_k " << f.top_k);
        SamplingParams p;
        p.temperature = f.temperature;
        p.top_k = f.top_k;
        p.top_p = f.top_p;
        p.min_p = f.min_p;
        p.seed = 1234 + vocab;
        Sampler sampler(p, isa);
        const Kept want = reference_keep(logits, f);
        std::mt19937_64 reference_rng(p.seed);
        for (int draw = 0; draw < 50; ++draw) {
          std::vector<float> row = logits;
          std::discrete_distribution<size_t> pick(want.probs.begin(), want.probs.end());
          CHECK(sampler.sample(row, {}, {}).token == want.tokens[pick(reference_rng)]);
        }
      }
    }
  }
}

TEST_CASE("a draw over the whole vocabulary follows the softmax and repeats per seed",
          "[engine][sampler][token_selection]") {
  // 3000 tokens (several walk blocks): 0.3 on token 2999, 0.2 on 1500, the rest spread evenly.
  std::vector<float> logits(3000, std::log(0.5f / 2998));
  logits[2999] = std::log(0.3f);
  logits[1500] = std::log(0.2f);
  for (kern::Isa isa : isas()) {
    INFO("isa " << kern::isa_name(isa));
    SamplingParams p;
    p.seed = 5;
    Sampler sampler(p, isa), again(p, isa);
    const int n = 20000;
    std::vector<double> freq(logits.size());
    for (int i = 0; i < n; ++i) {
      std::vector<float> row = logits, row2 = logits;
      const int32_t t = sampler.sample(row, {}, {}).token;
      REQUIRE(again.sample(row2, {}, {}).token == t);
      freq[static_cast<size_t>(t)] += 1.0 / n;
    }
    CHECK(freq[2999] == Approx(0.3).margin(0.015));
    CHECK(freq[1500] == Approx(0.2).margin(0.015));
    CHECK(std::accumulate(freq.begin(), freq.begin() + 1500, 0.0) == Approx(0.25).margin(0.015));
  }
}

TEST_CASE("greedy picks torch.argmax's token (first of tied maxima) on every ISA",
          "[engine][sampler][token_selection]") {
  std::mt19937 rng(17);
  for (kern::Isa isa : isas()) {
    for (size_t vocab : kVocabs) {
      for (Shape shape : {Shape::peaked, Shape::quantised}) {
        INFO("isa " << kern::isa_name(isa) << ", vocab " << vocab);
        const std::vector<float> logits = make_logits(rng, vocab, shape);
        SamplingParams greedy;
        greedy.temperature = 0.0f;
        Sampler sampler(greedy, isa);
        std::vector<float> row = logits;
        CHECK(sampler.sample(row, {}, {}).token ==
              static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
      }
    }
  }
}

TEST_CASE("logprobs' top n and the chosen token's logprob match a full-sort log-softmax",
          "[engine][sampler][token_selection]") {
  std::mt19937 rng(3);
  for (kern::Isa isa : isas()) {
    for (size_t vocab : {1u, 7u, 100u, 4097u, 32000u, 151936u}) {
      for (Shape shape : {Shape::peaked, Shape::quantised}) {
        const std::vector<float> logits = make_logits(rng, vocab, shape);
        std::vector<int32_t> order(vocab);
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
        double total = 0.0;
        for (float l : logits) total += std::exp(static_cast<double>(l) - logits[order[0]]);
        auto logprob = [&](int32_t t) { return static_cast<double>(logits[t]) - logits[order[0]] - std::log(total); };
        for (int n : {0, 1, 5, 20}) {
          INFO("isa " << kern::isa_name(isa) << ", vocab " << vocab << ", logprobs " << n);
          SamplingParams p;
          p.temperature = 0.0f;
          p.logprobs = n;
          p.logit_bias = {{0, 100.0f}};  // processing changes the choice, not the logprobs
          Sampler sampler(p, isa);
          std::vector<float> row = logits;
          const SampledToken got = sampler.sample(row, {}, {});
          CHECK(got.token == 0);
          CHECK(got.logprob == Approx(logprob(0)).margin(1e-5));
          REQUIRE(got.top.size() == std::min<size_t>(static_cast<size_t>(n), vocab));
          for (size_t i = 0; i < got.top.size(); ++i) {
            CHECK(got.top[i].first == order[i]);
            CHECK(got.top[i].second == Approx(logprob(order[i])).margin(1e-5));
          }
        }
      }
    }
  }
}
