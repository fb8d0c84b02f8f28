#pragma once
// Block tables of the running sequences over one BlockPool, with automatic prefix caching: full
// blocks are keyed by a hash chain of (parent hash, token ids), and a new sequence takes every
// cached block its prompt starts with instead of computing it again.
#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kv/block_pool.h"

namespace slab {

class KvCacheManager {
 public:
  KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching);

  // For a sequence with no blocks yet: takes the cached full blocks matching the start of
  // `tokens`, leaving at least one token to compute (its logits are needed), and returns the
  // number of tokens they hold. 0 when prefix caching is off.
  int adopt_cached_prefix(int64_t seq_id, std::span<const int32_t> tokens);
  // Grows the sequence's table to hold `num_tokens` positions. Returns false and changes nothing
  // when the free blocks do not suffice.
  bool reserve(int64_t seq_id, int num_tokens);
  // Blocks reserve() would need to take for the sequence to hold `num_tokens`.
  int blocks_needed(int64_t seq_id, int num_tokens) const;
  // After tokens [0, num_computed) of the sequence are in its blocks: caches the full ones.
  void cache_computed(int64_t seq_id, std::span<const int32_t> tokens, int num_computed);
  // Releases the sequence's blocks, tail first, so its prefix stays cached the longest.
  void free(int64_t seq_id);

  std::span<const int32_t> block_table(int64_t seq_id) const;
  bool has(int64_t seq_id) const { return tables_.count(seq_id) != 0; }
  int block_size() const { return pool_.block_size(); }
  bool prefix_caching() const { return prefix_caching_; }
  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free(); }
  // Fraction of blocks referenced by some sequence (vLLM's kv_cache_usage_perc, 0..1).
  double usage() const { return static_cast<double>(pool_.num_used()) / pool_.num_blocks(); }
  const BlockPool& pool() const { return pool_; }

  // Prompt tokens looked up in, and found in, the prefix cache since start.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

 private:
  struct Table {
    std::vector<int32_t> blocks;
    std::vector<BlockHash> hashes;  // of the first hashes.size() blocks, which are full and cached
  };

  BlockPool pool_;
  bool prefix_caching_;
  std::unordered_map<int64_t, Table> tables_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace slab
