#pragma once
// Speculative decoding's proposers behind one small interface: the scheduler asks the proposer
// once per step for the drafts of every decode that may speculate, after it has decided how many
// tokens each may take (its room), and tells it when a sequence's tokens are settled or gone.
// The n-gram proposer (engine/ngram_proposer.h) keeps no state; the draft-model proposer
// (engine/draft_model_proposer.h) keeps a small model's KV cache per sequence and uses the hooks.
#include <cstdint>
#include <span>
#include <vector>

#include "engine/sequence.h"

namespace slab {

// One decode's request for a draft: at most max_tokens (> 0) tokens to follow seq->tokens.
struct DraftSlot {
  const Sequence* seq = nullptr;
  int max_tokens = 0;
  std::vector<int32_t> draft;  // the proposer's answer; empty: no draft this step
};

class Proposer {
 public:
  virtual ~Proposer() = default;
  // Fills every slot's draft (at most max_tokens each, possibly none), all slots at once so a
  // model proposer runs them as one batch.
  virtual void propose(std::span<DraftSlot> slots) = 0;
  // After verification: seq.tokens holds the accepted drafts and the token after them; state
  // built on rejected drafts can go.
  virtual void verified(const Sequence& seq) { (void)seq; }
  // The sequence finished, was aborted or preempted: whatever is held for it is freed.
  virtual void forget(int64_t seq_id) { (void)seq_id; }
};

// Prompt lookup (propose_ngram) for each slot, n from ngram_max down to ngram_min.
class NgramProposer : public Proposer {
 public:
  NgramProposer(int ngram_min, int ngram_max) : ngram_min_(ngram_min), ngram_max_(ngram_max) {}
  void propose(std::span<DraftSlot> slots) override;

 private:
  int ngram_min_;
  int ngram_max_;
};

}  // namespace slab
