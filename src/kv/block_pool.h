#pragma once
// Bookkeeping of the SLAB KV cache's blocks: reference counts, the free list and the prefix
// cache. It holds no KV data; it decides which block id a sequence gets.
//
// A free block that once held a full, hashed block of tokens keeps its hash: until it is handed
// out again, a new request with the same prefix can take it back (a prefix-cache hit). The free
// list is in LRU order (released longest ago first), so the blocks reused soonest are the ones
// least likely to be wanted again.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

namespace slab {

using BlockHash = uint64_t;

// Hash of a full block: its parent's hash (0 for the first block) and its token ids.
BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens);

class BlockPool {
 public:
  BlockPool(int num_blocks, int block_size);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int block_size() const { return block_size_; }
  int num_free() const { return num_free_; }
  int num_used() const { return num_blocks() - num_free_; }

  // Takes the least recently released free block (dropping whatever it cached) with one
  // reference; nullopt when none is free.
  std::optional<int32_t> allocate();
  // One more reference to a block, taking it off the free list if it was there (a cache hit).
  void acquire(int32_t block);
  // One reference less; at zero the block goes to the end of the free list, keeping its hash.
  void release(int32_t block);
  // Gives back a block that allocate() handed out and that never held K/V anyone may reuse (a
  // speculative step's rejected positions): it goes to the front of the free list, where
  // allocate() took it from, so the pool's order is as if it had not been taken.
  void release_unused(int32_t block);
  int ref_count(int32_t block) const { return blocks_[block].ref_count; }

  // The cached block holding exactly these tokens after this parent, if any (in use or free).
  std::optional<int32_t> find_cached(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) const;
  // Records that `block` now holds a full block of `tokens` after `parent`. A block already
  // cached under the same hash stays the canonical one.
  void cache_full_block(int32_t block, BlockHash hash, BlockHash parent, std::span<const int32_t> tokens);
  bool is_cached(int32_t block) const { return blocks_[block].cached; }
  // Drops the block's hash from the prefix cache (its K/V turned out never to be written).
  void uncache(int32_t block);
  int num_cached() const { return static_cast<int>(cache_.size()); }

  // Drops every cached hash (e.g. after the cache memory was reset).
  void clear_cache();

 private:
  struct Block {
    int ref_count = 0;
    bool cached = false;
    BlockHash hash = 0;
    BlockHash parent = 0;
    int32_t prev_free = -1;  // free-list links; -1 ends the list
    int32_t next_free = -1;
    bool on_free_list = false;
  };
  void unlink_free(int32_t block);
  void push_free_back(int32_t block);
  void push_free_front(int32_t block);

  int block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;  // [block][block_size]: the token ids a cached block holds
  int32_t free_head_ = -1;
  int32_t free_tail_ = -1;
  int num_free_ = 0;
  std::unordered_map<BlockHash, int32_t> cache_;
};

}  // namespace slab
