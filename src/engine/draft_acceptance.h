#pragma once
// The speculative-sampling acceptance rule for a deterministic proposer (Leviathan et al. 2023,
// Chen et al. 2023, with the draft distribution q a point mass on the proposed token d): accept
// d with probability p(d); on rejection draw from p with d removed, renormalised. The token this
// yields is distributed exactly as p, whatever d was: P(t) = p(d)·[t = d] + (1 - p(d))·p(t)/(1 -
// p(d))·[t != d] = p(t). Greedy decoding is the point-mass p: accepted iff d is the argmax.
#include <cstdint>
#include <random>
#include <span>

namespace slab {

struct DraftVerdict {
  bool accepted = false;
  int32_t token = 0;  // the draft when accepted, else the replacement drawn from the residual
};

// `weights` are p up to a constant (non-negative, not all zero) over `tokens`, or over token
// ids 0 .. weights.size() - 1 when `tokens` is empty (the whole vocabulary).
DraftVerdict accept_or_resample(std::span<const int32_t> tokens, std::span<const double> weights, int32_t draft,
                                std::mt19937_64& rng);

}  // namespace slab
