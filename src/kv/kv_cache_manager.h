#pragma once
// Block tables of the running sequences over one BlockPool, with automatic prefix caching: full
// blocks are keyed by a hash chain of (parent hash, token ids), and a new sequence takes every
// cached block its prompt starts with instead of computing it again.
//
// Owned by the Scheduler. A block is hashed into the prefix cache when it is allocated for a step
// that fills it (its tokens are known then: prompt tokens, and generated tokens once sampled), as
// vLLM v1 does; the forward pass writes a layer's K/V before any token of the batch attends, so a
// sequence admitted in the same step may already share it. Blocks whose K/V were never computed
// (a preempted or failed sequence) leave the cache when they are freed.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace slab {

// The cached full blocks a token sequence starts with: the result of a pure query.
struct PrefixHit {
  std::vector<int32_t> blocks;
  std::vector<BlockHash> hashes;  // hashes[i] is the hash of blocks[i]
  int num_tokens(int block_size) const { return static_cast<int>(blocks.size()) * block_size; }
};

class KvCacheManager {
 public:
  KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching);

  // The cached full blocks `tokens` starts with, leaving at least one token to compute (its
  // logits are needed). Changes nothing, counts nothing; empty when prefix caching is off.
  PrefixHit find_cached_prefix(std::span<const int32_t> tokens) const;
  // Grows the sequence's table to hold `num_tokens` positions and hashes every block full within
  // them into the prefix cache (`tokens` holds at least num_tokens ids). For a sequence without
  // a table, `hit` (from find_cached_prefix, with no allocation in between) is taken first and
  // counted in the prefix-cache statistics. `num_speculative` more positions get blocks too
  // (a speculative step's draft tokens) but nothing past num_tokens is hashed: drafts are not
  // verified yet. All or nothing: false changes nothing.
  bool allocate(int64_t seq_id, std::span<const int32_t> tokens, int num_tokens, const PrefixHit& hit = {},
                int num_speculative = 0);
  // After a speculative step: the sequence keeps the blocks its first `num_computed` positions
  // (verified) need, gives the rest back unused (BlockPool::release_unused), and hashes the
  // blocks the verified tokens (`tokens` holds at least num_computed) filled, leaving the table,
  // the free blocks and the prefix cache as if the rejected drafts had never been allocated.
  void truncate(int64_t seq_id, std::span<const int32_t> tokens, int num_computed);
  // Blocks allocate() would need to take for the sequence to hold `num_tokens`.
  int blocks_needed(int64_t seq_id, int num_tokens) const;
  // Releases the sequence's blocks, tail first, so its prefix stays cached the longest. Blocks
  // past its first `num_computed` tokens hold no valid K/V and leave the prefix cache.
  void free(int64_t seq_id, int num_computed);

  std::span<const int32_t> block_table(int64_t seq_id) const;
  bool has(int64_t seq_id) const { return tables_.count(seq_id) != 0; }
  int block_size() const { return pool_.block_size(); }
  bool prefix_caching() const { return prefix_caching_; }
  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free(); }
  // Fraction of blocks referenced by some sequence (vLLM's kv_cache_usage_perc, 0..1).
  double usage() const { return static_cast<double>(pool_.num_used()) / pool_.num_blocks(); }
  const BlockPool& pool() const { return pool_; }

  // Prompt tokens looked up in, and found in, the prefix cache by committed allocations.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  struct Table {
    std::vector<int32_t> blocks;
    std::vector<BlockHash> hashes;  // of the first hashes.size() blocks, which are full and cached
  };
  void cache_full_blocks(Table& table, std::span<const int32_t> tokens, int num_tokens);

  BlockPool pool_;
  bool prefix_caching_;
  std::unordered_map<int64_t, Table> tables_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace slab
