#pragma once
// Continuous batching: every step picks what runs under two limits, max_num_seqs running
// sequences and max_num_batched_tokens new tokens. Running decodes first (1 token each), then
// partially prefilled sequences, then waiting ones in arrival order, chunking long prompts to the
// token budget. When a step cannot get a block, the most recently admitted running sequence is
// preempted: its blocks are freed and it goes back to the front of the waiting queue, to be
// recomputed (mostly from the prefix cache) later. Nothing fails because the cache is full.
// With speculative decoding, decodes also carry draft tokens (SpeculativeConfig).
#include <cstdint>
#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "engine/proposer.h"
#include "engine/sequence.h"
#include "kv/kv_cache_manager.h"

namespace slab {

// Speculative decoding (engine/proposer.h: prompt lookup, or a draft model the engine gives the
// scheduler); off at k = 0. ngram_min/max configure the n-gram proposer only.
// Policy (docs/ARCHITECTURE.md, "Speculative decoding"): a step speculates only while at most
// disable_by_batch_size sequences run (0: any number), because a bigger batch already makes
// each weight read serve many tokens and drafts would only add compute. Drafts are proposed
// after the running sequences (decodes, prefill chunks) have their tokens and blocks, from what
// is left of the step's token budget and of the free blocks, before waiting sequences are
// admitted; a draft that does not fit is cut or dropped, never the cause of a preemption.
struct SpeculativeConfig {
  int num_speculative_tokens = 0;  // k
  int ngram_min = 1;
  int ngram_max = 0;
  int disable_by_batch_size = 0;
};

struct SchedulerConfig {
  int max_num_seqs = 128;
  int max_num_batched_tokens = 2048;
  // > 0 (longrope models: original_max_position_embeddings): a sequence whose cached K/V were
  // computed while it held at most this many tokens is recomputed from scratch (preempted, not
  // for memory) the first time it holds more, as transformers' Phi-3 generate() drops its cache
  // there: its earlier keys were rotated with the short factors.
  int recompute_past_length = 0;
  SpeculativeConfig speculative;
};

// One sequence's share of a step: num_tokens new tokens starting at seq->num_computed, then the
// draft tokens proposed to follow them (a speculative decode), and the sequence's block table,
// which covers them all (the runner writes and reads K/V through it).
struct ScheduledChunk {
  Sequence* seq = nullptr;
  int num_tokens = 0;
  std::vector<int32_t> block_ids;
  std::vector<int32_t> draft;
};

struct SchedulerStep {
  std::vector<ScheduledChunk> chunks;
  // Sequences that cannot go on because they alone need more blocks than the cache has; the
  // engine finishes them with reason "length".
  std::vector<Sequence*> out_of_cache;
  int num_preempted = 0;
  bool empty() const { return chunks.empty(); }
};

class Scheduler {
 public:
  // The scheduler owns the KV bookkeeping: block tables, reference counts and the prefix cache.
  // With speculation on, drafts come from `proposer` (which must outlive the scheduler), or
  // from an n-gram proposer of the config's ngram_min/max when it is null.
  Scheduler(const SchedulerConfig& config, int num_kv_blocks, int block_size, bool enable_prefix_caching,
            Proposer* proposer = nullptr);

  void add(Sequence* seq);
  SchedulerStep schedule();
  // The sequence leaves the scheduler (finished, aborted, failed): its blocks are freed now.
  void remove(Sequence* seq);
  // After a speculative step's verification (seq->num_computed counts the accepted drafts): the
  // blocks of rejected drafts go back, as if they had never been allocated, and the proposer
  // drops what it built on them.
  void drop_rejected_drafts(Sequence* seq);

  size_t num_running() const { return running_.size(); }
  size_t num_waiting() const { return waiting_.size(); }
  int64_t num_preemptions() const { return num_preemptions_; }
  const SchedulerConfig& config() const { return config_; }
  const KvCacheManager& kv() const { return kv_; }

 private:
  // Gives `seq` blocks for `num_tokens` more tokens, preempting later-admitted sequences as
  // needed. False if `seq` itself had to be preempted or cannot fit at all.
  bool reserve_or_preempt(Sequence* seq, int num_tokens, SchedulerStep& step);
  // for_memory: the step ran out of blocks (admission stops for this step).
  void preempt(Sequence* victim, SchedulerStep& step, bool for_memory = true);
  bool sibling_prefilling(const Sequence& seq) const;
  // Draft tokens for the step's decodes from what is left of `budget` (reduced by the drafts
  // taken), each with blocks for its positions allocated; a draft is cut to the free blocks.
  void propose_drafts(SchedulerStep& step, int& budget);
  // Draft tokens the sequence may take: 0 if it does not speculate or stands at a limit.
  int draft_room(const Sequence& seq, int budget) const;
  // The client call a sequence belongs to, for fair admission.
  static uint64_t fairness_key(const Sequence& seq);
  // Index in waiting_ of the sequence to admit next (waiting_.size(): none), skipping `passed`.
  size_t next_to_admit(const std::unordered_map<uint64_t, int>& running_per_call,
                       const std::vector<size_t>& passed) const;
  void make_room_for_a_new_call(std::unordered_map<uint64_t, int>& running_per_call, SchedulerStep& step);

  SchedulerConfig config_;
  KvCacheManager kv_;
  std::unique_ptr<Proposer> own_proposer_;  // the n-gram proposer when none was given
  Proposer* proposer_ = nullptr;
  std::vector<Sequence*> running_;  // in admission order
  std::deque<Sequence*> waiting_;   // arrival order; preempted sequences go to the front
  int64_t num_preemptions_ = 0;
};

}  // namespace slab
