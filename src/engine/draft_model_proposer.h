#pragma once
// Speculative decoding's draft-model proposer: a smaller model of the same vocabulary proposes
// each speculating sequence's next k tokens greedily (argmax), k decode passes per step over the
// batch of those sequences. It owns the draft's ModelRunner pass state, its own paged KV memory
// and its own block bookkeeping (no prefix cache): the target's blocks, hashes and preemptions
// never reach it.
//
// Per sequence it remembers the tokens whose K/V its cache holds, by position. Tokens only ever
// grow at the end of a sequence, so the part of that record still equal to seq.tokens is valid
// K/V, and everything after it (rejected drafts) is rolled back: verified() does that right after
// verification, and propose() checks again. The first pass of a step catches the draft's cache up
// on the sequence's tokens since (1 or 2 tokens in steady state: the bonus token, and the last
// accepted draft when all k were accepted); a sequence new to the proposer (just admitted,
// resumed after preemption, or served from the target's prefix cache) computes its whole context
// there, in chunks of at most catch_up_budget tokens per step over all sequences, and drafts
// once it is caught up.
//
// Draft tokens are the argmax of the draft's logits, so the draft distribution q is a point mass
// and the verification rule (engine/draft_acceptance.h) keeps the output exactly the target's,
// greedy or sampled.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/proposer.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "model/model_runner.h"

namespace slab {

class DraftModelProposer : public Proposer {
 public:
  // `runner` (the draft model; must outlive the proposer) gets a KV cache of `num_blocks` blocks
  // of `block_size` tokens in the dtype it needs. catch_up_budget: context tokens the draft
  // computes per step, over all sequences, besides the drafts themselves. Drafts are ids below
  // both the draft's vocabulary size and `target_vocab_size` (tables padded differently).
  DraftModelProposer(ModelRunner& runner, int target_vocab_size, int num_blocks, int block_size, int catch_up_budget);

  void propose(std::span<DraftSlot> slots) override;
  void verified(const Sequence& seq) override;
  void forget(int64_t seq_id) override;

  // For tests and logs: positions the draft's cache holds for a sequence (0: none), free blocks.
  int cached_tokens(int64_t seq_id) const;
  int num_free_blocks() const { return blocks_.num_free_blocks(); }
  size_t kv_cache_bytes() const { return memory_.bytes(); }

 private:
  // The tokens whose K/V are in the cache for one sequence, position by position.
  struct DraftState {
    std::vector<int32_t> tokens;
  };
  // Drops the part of the record that is not seq.tokens any more (and the blocks it used).
  void roll_back(int64_t seq_id, DraftState& state, std::span<const int32_t> tokens);
  // Blocks for `positions` positions of the sequence, freeing other sequences' draft caches
  // (those not in `keep`) when the pool is short. False: not even then.
  bool reserve(int64_t seq_id, const DraftState& state, int positions, std::span<const DraftSlot> keep);

  ModelRunner& runner_;
  size_t proposal_vocab_;  // drafts are ids below it
  KvCache memory_;
  KvCacheManager blocks_;
  int catch_up_budget_;
  std::unordered_map<int64_t, DraftState> states_;
};

}  // namespace slab
