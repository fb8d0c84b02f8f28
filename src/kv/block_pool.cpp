#include "kv/block_pool.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace slab {

BlockHash hash_block(BlockHash parent, std::span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the token ids, then a final avalanche (splitmix64) so that
  // nearby inputs spread over the hash table.
  uint64_t h = 1469598103934665603ull;
  auto mix_in = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  mix_in(parent);
  for (int32_t t : tokens) mix_in(static_cast<uint32_t>(t));
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ull;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebull;
  h ^= h >> 31;
  return h;
}

BlockPool::BlockPool(int num_blocks, int block_size)
    : block_size_(block_size), blocks_(static_cast<size_t>(num_blocks)),
      tokens_(static_cast<size_t>(num_blocks) * block_size) {
  if (num_blocks <= 0 || block_size <= 0)
    throw std::invalid_argument("BlockPool: needs at least one block of at least one token");
  for (int32_t b = 0; b < num_blocks; ++b) push_free_back(b);
}

void BlockPool::unlink_free(int32_t block) {
  Block& b = blocks_[block];
  if (b.prev_free >= 0)
    blocks_[b.prev_free].next_free = b.next_free;
  else
    free_head_ = b.next_free;
  if (b.next_free >= 0)
    blocks_[b.next_free].prev_free = b.prev_free;
  else
    free_tail_ = b.prev_free;
  b.prev_free = b.next_free = -1;
  b.on_free_list = false;
  --num_free_;
}

void BlockPool::push_free_back(int32_t block) {
  Block& b = blocks_[block];
  b.prev_free = free_tail_;
  b.next_free = -1;
  if (free_tail_ >= 0)
    blocks_[free_tail_].next_free = block;
  else
    free_head_ = block;
  free_tail_ = block;
  b.on_free_list = true;
  ++num_free_;
}

void BlockPool::push_free_front(int32_t block) {
  Block& b = blocks_[block];
  b.prev_free = -1;
  b.next_free = free_head_;
  if (free_head_ >= 0)
    blocks_[free_head_].prev_free = block;
  else
    free_tail_ = block;
  free_head_ = block;
  b.on_free_list = true;
  ++num_free_;
}

void BlockPool::uncache(int32_t block) {
  Block& b = blocks_[block];
  if (!b.cached) return;
  auto it = cache_.find(b.hash);
  if (it != cache_.end() && it->second == block) cache_.erase(it);
  b.cached = false;
}

std::optional<int32_t> BlockPool::allocate() {
  if (free_head_ < 0) return std::nullopt;
  const int32_t block = free_head_;
  unlink_free(block);
  uncache(block);
  blocks_[block].ref_count = 1;
  return block;
}

void BlockPool::acquire(int32_t block) {
  Block& b = blocks_[block];
  if (b.on_free_list) unlink_free(block);
  ++b.ref_count;
}

void BlockPool::release(int32_t block) {
  Block& b = blocks_[block];
  if (b.ref_count <= 0)
    throw std::logic_error("BlockPool: block " + std::to_string(block) + " released more often than acquired");
  if (--b.ref_count == 0) push_free_back(block);
}

void BlockPool::release_unused(int32_t block) {
  Block& b = blocks_[block];
  if (b.ref_count != 1 || b.cached)
    throw std::logic_error("BlockPool: block " + std::to_string(block) + " is shared or cached, not unused");
  b.ref_count = 0;
  push_free_front(block);
}

std::optional<int32_t> BlockPool::find_cached(BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) const {
  auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  const int32_t block = it->second;
  // Compare the content too: a hash collision must never hand out someone else's KV.
  const Block& b = blocks_[block];
  if (b.parent != parent || tokens.size() != static_cast<size_t>(block_size_) ||
      !std::equal(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_)) {
    return std::nullopt;
  }
  return block;
}

void BlockPool::cache_full_block(int32_t block, BlockHash hash, BlockHash parent, std::span<const int32_t> tokens) {
  if (tokens.size() != static_cast<size_t>(block_size_))
    throw std::logic_error("BlockPool: only full blocks are cached");
  Block& b = blocks_[block];
  if (b.cached || cache_.count(hash) != 0) return;
  b.cached = true;
  b.hash = hash;
  b.parent = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<std::ptrdiff_t>(block) * block_size_);
  cache_.emplace(hash, block);
}

void BlockPool::clear_cache() {
  for (Block& b : blocks_) b.cached = false;
  cache_.clear();
}

}  // namespace slab
