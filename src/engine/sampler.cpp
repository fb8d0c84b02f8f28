#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>

namespace slab {
namespace {

// log_softmax of one logit, given the row's max and log-sum-exp.
struct LogSoftmax {
  float max = 0.0f;
  double log_total = 0.0;
  explicit LogSoftmax(std::span<const float> logits) {
    max = *std::max_element(logits.begin(), logits.end());
    double total = 0.0;
    for (float l : logits) total += std::exp(static_cast<double>(l - max));
    log_total = std::log(total);
  }
  float operator()(float logit) const { return static_cast<float>(logit - max - log_total); }
};

}  // namespace

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

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

SampledToken Sampler::sample(std::span<float> logits, std::span<const int32_t> prompt,
                             std::span<const int32_t> output, std::span<const int32_t> banned) {
  SampledToken result;
  // Log probabilities are reported from the model's own distribution, before any processing.
  std::optional<LogSoftmax> raw;
  std::vector<float> raw_logits;
  if (params_.logprobs >= 0) {
    raw.emplace(logits);
    raw_logits.assign(logits.begin(), logits.end());
  }

  for (const auto& [token, bias] : params_.logit_bias) {
    if (token >= 0 && static_cast<size_t>(token) < logits.size()) logits[static_cast<size_t>(token)] += bias;
  }
  for (int32_t t : banned) {
    if (t >= 0 && static_cast<size_t>(t) < logits.size()) logits[static_cast<size_t>(t)] = -std::numeric_limits<float>::infinity();
  }
  apply_penalties(logits, prompt, output);
  result.token = params_.temperature <= 0.0f || params_.top_k == 1 ? argmax(logits) : draw(logits);

  if (raw) {
    result.logprob = (*raw)(raw_logits[static_cast<size_t>(result.token)]);
    if (params_.logprobs > 0) {
      const size_t n = std::min(static_cast<size_t>(params_.logprobs), raw_logits.size());
      std::vector<int32_t> order(raw_logits.size());
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(n), order.end(),
                        [&](int32_t a, int32_t b) { return raw_logits[a] > raw_logits[b]; });
      for (size_t i = 0; i < n; ++i) result.top.emplace_back(order[i], (*raw)(raw_logits[order[i]]));
    }
  }
  return result;
}

int32_t Sampler::draw(std::span<const float> logits) {
  // Softmax at temperature over the candidates, sorted by probability.
  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  size_t keep = order.size();
  if (params_.top_k > 0) keep = std::min(keep, static_cast<size_t>(params_.top_k));
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(keep), order.end(),
                    [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  order.resize(keep);

  const float max_logit = logits[order[0]];
  std::vector<double> probs(keep);
  double total = 0.0;
  for (size_t i = 0; i < keep; ++i) {
    probs[i] = std::exp(static_cast<double>(logits[order[i]] - max_logit) / params_.temperature);
    total += probs[i];
  }
  for (double& p : probs) p /= total;

  // min_p: drop tokens below min_p times the top probability; top_p: smallest nucleus reaching it.
  size_t cut = keep;
  if (params_.min_p > 0.0f) {
    const double floor = params_.min_p * probs[0];
    cut = static_cast<size_t>(std::find_if(probs.begin(), probs.end(), [&](double p) { return p < floor; }) - probs.begin());
    cut = std::max<size_t>(cut, 1);
  }
  if (params_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (size_t i = 0; i < cut; ++i) {
      cumulative += probs[i];
      if (cumulative >= params_.top_p) {
        cut = i + 1;
        break;
      }
    }
  }
  std::discrete_distribution<size_t> pick(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(cut));
  return order[pick(rng_)];
}

}  // namespace slab
