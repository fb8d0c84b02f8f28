#include "engine/draft_acceptance.h"

#include <stdexcept>

namespace slab {

DraftVerdict accept_or_resample(std::span<const int32_t> tokens, std::span<const double> weights, int32_t draft,
                                std::mt19937_64& rng) {
  if (!tokens.empty() && tokens.size() != weights.size()) {
    throw std::logic_error("accept_or_resample: tokens and weights differ in length");
  }
  const auto token_at = [&](size_t i) { return tokens.empty() ? static_cast<int32_t>(i) : tokens[i]; };
  double total = 0.0;
  double draft_weight = 0.0;
  for (size_t i = 0; i < weights.size(); ++i) {
    total += weights[i];
    if (token_at(i) == draft) draft_weight += weights[i];
  }
  if (!(total > 0.0)) throw std::logic_error("accept_or_resample: a distribution with no mass");
  // u < p(d) accepts with probability exactly p(d): p = 0 never, p = 1 always.
  const double u = std::generate_canonical<double, 53>(rng);
  const double residual = total - draft_weight;
  if (u * total < draft_weight || !(residual > 0.0)) return {true, draft};
  // Inverse CDF over the residual: the draft's weight is skipped, the rest renormalised.
  const double target = std::generate_canonical<double, 53>(rng) * residual;
  double cumulative = 0.0;
  size_t last = weights.size();  // the last token with residual weight (rounding fallback)
  for (size_t i = 0; i < weights.size(); ++i) {
    if (token_at(i) == draft || !(weights[i] > 0.0)) continue;
    cumulative += weights[i];
    last = i;
    if (cumulative > target) return {false, token_at(i)};
  }
  return {false, token_at(last)};
}

}  // namespace slab
