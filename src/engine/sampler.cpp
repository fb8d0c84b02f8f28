#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include "kernels/sampling_rows.h"

namespace slab {
namespace {

// log_softmax of one logit, given the row's max and log-sum-exp (one max pass, one exp pass).
struct LogSoftmax {
  float max = 0.0f;
  double log_total = 0.0;
  LogSoftmax(std::span<const float> logits, kern::Isa isa) {
    max = kern::row_max(logits.data(), logits.size(), isa);
    log_total = std::log(kern::sum_exp(logits.data(), logits.size(), max, 1.0f, nullptr, isa));
  }
  // Tokens of zero probability (masked, banned) report -9999 as vLLM does: JSON has no -inf.
  float operator()(float logit) const { return std::max(-9999.0f, static_cast<float>(logit - max - log_total)); }
};

// Logits per partial sum of the whole-vocabulary draw's walk: the walk adds whole blocks until
// the one holding the target, then steps through that block alone.
constexpr size_t kWalkBlock = 512;

static_assert(kWalkBlock % 16 == 0);

// Vocabulary-sized scratch per thread, not per Sampler (one per sequence): the model's logits
// when processing changes them, and a whole-vocabulary draw's weights.
std::vector<float>& raw_logits_scratch() {
  thread_local std::vector<float> v;
  return v;
}
std::vector<float>& weights_scratch() {
  thread_local std::vector<float> v;
  return v;
}

float block_sum(const float* w) {
  float lanes[16] = {};  // independent lanes: the compiler vectorises without reassociating
  for (size_t i = 0; i < kWalkBlock; i += 16) {
    for (size_t j = 0; j < 16; ++j) lanes[j] += w[i + j];
  }
  float sum = 0.0f;
  for (float l : lanes) sum += l;
  return sum;
}

// Tokens whose bit is clear in `allowed` get no probability. Words of all ones (inside a JSON
// string most of the vocabulary is allowed) and of all zeros take no per-bit work.
void mask_disallowed(std::span<float> logits, std::span<const uint64_t> allowed) {
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  const size_t n = logits.size();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < allowed.size() ? allowed[w] : 0;
    if (bits == ~uint64_t{0}) continue;
    const size_t end = std::min(n, w * 64 + 64);
    if (bits == 0) {
      std::fill(logits.begin() + static_cast<std::ptrdiff_t>(w * 64), logits.begin() + static_cast<std::ptrdiff_t>(end),
                kNone);
      continue;
    }
    for (size_t t = w * 64; t < end; ++t) {
      if (!((bits >> (t - w * 64)) & 1)) logits[t] = kNone;
    }
  }
}

}  // namespace

Sampler::Sampler(const SamplingParams& params, kern::Isa isa) : params_(params), rng_(params.seed), selector_(isa) {}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

void Sampler::apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                              std::span<const int32_t> output) {
  const bool repetition = params_.repetition_penalty != 1.0f;
  const bool additive = params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
  if (!repetition && !additive) return;
  counts_.assign(logits.size(), 0);
  for (int32_t t : output) ++counts_[static_cast<size_t>(t)];
  if (repetition) {
    auto penalise = [&](int32_t t) {
      float& l = logits[static_cast<size_t>(t)];
      l = l > 0.0f ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    };
    // Each distinct token once, whether it appears in the prompt, the output or both.
    std::vector<bool> seen(logits.size(), false);
    for (auto span : {prompt, output}) {
      for (int32_t t : span) {
        if (!seen[static_cast<size_t>(t)]) {
          seen[static_cast<size_t>(t)] = true;
          penalise(t);
        }
      }
    }
  }
  if (additive) {
    for (int32_t t : output) {
      const int c = counts_[static_cast<size_t>(t)];
      if (c == 0) continue;  // already applied for this token
      logits[static_cast<size_t>(t)] -= params_.frequency_penalty * c + params_.presence_penalty;
      counts_[static_cast<size_t>(t)] = 0;
    }
  }
}

SampledToken Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> banned, std::span<const uint64_t> allowed) {
  return choose(logits, prompt, output, banned, allowed, nullptr, nullptr);
}

SampledToken Sampler::verify(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> banned, std::span<const uint64_t> allowed, int32_t draft,
                             bool& accepted) {
  return choose(logits, prompt, output, banned, allowed, &draft, &accepted);
}

SampledToken Sampler::choose(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                             std::span<const int32_t> banned, std::span<const uint64_t> allowed, const int32_t* draft,
                             bool* accepted) {
  SampledToken result;
  const kern::Isa isa = selector_.isa();
  if (!allowed.empty()) mask_disallowed(logits, allowed);
  // Log probabilities are reported from the model's own distribution, before any processing:
  // the top n and the normaliser now, the chosen token's raw logit afterwards (from a copy only
  // when processing will change the row).
  std::span<const float> raw = logits;
  std::optional<LogSoftmax> log_softmax;
  if (params_.logprobs >= 0) {
    const bool processed = !params_.logit_bias.empty() || !banned.empty() || params_.repetition_penalty != 1.0f ||
                           params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f;
    if (processed) {
      raw_logits_scratch().assign(logits.begin(), logits.end());
      raw = raw_logits_scratch();
    }
    log_softmax.emplace(raw, isa);
    if (params_.logprobs > 0) {
      for (int32_t t : selector_.top_k(raw, static_cast<size_t>(params_.logprobs))) {
        result.top.emplace_back(t, (*log_softmax)(raw[static_cast<size_t>(t)]));
      }
    }
  }

  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[static_cast<size_t>(token)] += bias;
  }
  for (int32_t t : banned) {
    if (t >= 0 && static_cast<size_t>(t) < logits.size())
      logits[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
  }
  apply_penalties(logits, prompt, output);
  const bool is_greedy = params_.temperature <= 0.0f || params_.top_k == 1;
  if (draft == nullptr) {
    result.token = is_greedy ? greedy(logits) : draw(logits);
  } else if (is_greedy) {
    result.token = greedy(logits);
    *accepted = result.token == *draft;
  } else {
    const DraftVerdict verdict = verify_draw(logits, *draft);
    result.token = verdict.token;
    *accepted = verdict.accepted;
  }

  if (log_softmax) result.logprob = (*log_softmax)(raw[static_cast<size_t>(result.token)]);
  return result;
}

// argmax() in two vector passes: the max, then its first occurrence.
int32_t Sampler::greedy(std::span<const float> logits) const {
  const float max = kern::row_max(logits.data(), logits.size(), selector_.isa());
  const size_t first = kern::first_at_or_above(logits.data(), logits.size(), max, selector_.isa());
  return first < logits.size() ? static_cast<int32_t>(first) : argmax(logits);  // NaNs: the scalar rule
}

int32_t Sampler::draw(std::span<const float> logits) {
  const DrawCandidates& c =
      selector_.candidates(logits, params_.temperature, params_.top_k, params_.top_p, params_.min_p);
  if (c.whole_vocab) return draw_from_whole_vocab(logits);
  std::discrete_distribution<size_t> pick(c.weights.begin(), c.weights.end());
  return c.tokens[pick(rng_)];
}

// The distribution draw() samples from, handed to the acceptance rule.
DraftVerdict Sampler::verify_draw(std::span<const float> logits, int32_t draft) {
  const DrawCandidates& c =
      selector_.candidates(logits, params_.temperature, params_.top_k, params_.top_p, params_.min_p);
  if (!c.whole_vocab) return accept_or_resample(c.tokens, c.weights, draft, rng_);
  const size_t n = logits.size();
  std::vector<float>& weights = weights_scratch();
  weights.resize(n);
  const float max = kern::row_max(logits.data(), n, selector_.isa());
  (void)kern::sum_exp(logits.data(), n, max, 1.0f / params_.temperature, weights.data(), selector_.isa());
  thread_local std::vector<double> wide;
  wide.assign(weights.begin(), weights.end());
  return accept_or_resample({}, wide, draft, rng_);
}

// No filter: the inverse CDF over the vocabulary in token-id order (the same distribution as in
// rank order, with no sort); the weights come from one vectorised exp pass.
int32_t Sampler::draw_from_whole_vocab(std::span<const float> logits) {
  const size_t n = logits.size();
  std::vector<float>& weights = weights_scratch();
  weights.resize(n);
  const float max = kern::row_max(logits.data(), n, selector_.isa());
  const double total =
      kern::sum_exp(logits.data(), n, max, 1.0f / params_.temperature, weights.data(), selector_.isa());
  const double target = std::generate_canonical<double, 53>(rng_) * total;
  double cumulative = 0.0;
  size_t block = 0;
  for (; block + kWalkBlock < n; block += kWalkBlock) {
    const double next = cumulative + block_sum(weights.data() + block);
    if (next > target) break;
    cumulative = next;
  }
  for (size_t i = block; i < n; ++i) {
    cumulative += weights[i];
    if (cumulative > target && weights[i] > 0.0f) return static_cast<int32_t>(i);
  }
  // Rounding left the target just past the end (block sums are float): the top token, which
  // surely has weight.
  return greedy(logits);
}

}  // namespace slab
