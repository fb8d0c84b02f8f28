#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

namespace slab {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

int32_t argmax(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t Sampler::sample(std::span<float> logits) {
  if (params_.temperature <= 0.0f || params_.top_k == 1) return argmax(logits);

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
    cut = static_cast<size_t>(std::find_if(probs.begin(), probs.end(),
                                           [&](double p) { return p < floor; }) - probs.begin());
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
