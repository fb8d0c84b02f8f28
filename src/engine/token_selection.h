#pragma once
// The tokens a draw chooses among, found without sorting the vocabulary. top-k and the logprobs'
// top n stream through the row keeping the best k seen so far (a vector pass skips everything
// below the current k-th value); top-p brackets the nucleus with tail masses at a few logit
// thresholds (one pass for eight thresholds, refined while the bracket holds thousands), and
// min-p is a logit threshold outright. Only the survivors are sorted.
//
// Rank order everywhere: larger logit first, ties to the lower token id (a stable sort's order).
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/bf16.h"

namespace slab {

// The best set of sampling row kernels (kernels/sampling_rows.h) this CPU runs.
kern::Isa best_sampling_isa();

struct DrawCandidates {
  bool whole_vocab = false;     // no filter asked for: every token, weight e^((l - max) / T)
  std::vector<int32_t> tokens;  // otherwise what the filters keep, in rank order
  std::vector<double> weights;  // their draw weights, proportional to their probabilities
};

// Results (top_k's list, candidates) live in per-thread scratch shared by every selector on the
// thread, valid until that thread's next call: each sequence owns a Sampler, and vocabulary-sized
// buffers per sequence would pin ~1 GB at 256 sequences of a 262k vocabulary.
class TokenSelector {
 public:
  explicit TokenSelector(kern::Isa isa) : isa_(isa) {}

  // The min(k, size) largest logits' ids in rank order.
  const std::vector<int32_t>& top_k(std::span<const float> logits, size_t k);

  // What vLLM's order of filters keeps at `temperature` (> 0): top_k (0: off) first, then min_p
  // (probability >= min_p times the top one), then top_p (the shortest rank-order prefix whose
  // probability, under the softmax of what top_k kept, reaches top_p; all of it if none does).
  const DrawCandidates& candidates(std::span<const float> logits, float temperature, int top_k, float top_p,
                                   float min_p);

  kern::Isa isa() const { return isa_; }

 private:
  // A logit threshold at or below which the nucleus ends, and the softmax denominator.
  float nucleus_threshold(std::span<const float> logits, float max, float temperature, float top_p, double* total);

  kern::Isa isa_;
};

}  // namespace slab
