#include "kv/kv_cache_manager.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace slab {

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : pool_(num_blocks, block_size), prefix_caching_(enable_prefix_caching) {}

PrefixHit KvCacheManager::find_cached_prefix(std::span<const int32_t> tokens) const {
  PrefixHit hit;
  if (!prefix_caching_ || tokens.empty()) return hit;
  const int bs = pool_.block_size();
  // The last token is always computed, so a prompt of exactly k full blocks reuses k - 1.
  const int max_blocks = (static_cast<int>(tokens.size()) - 1) / bs;
  BlockHash parent = 0;
  for (int i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const BlockHash hash = hash_block(parent, block_tokens);
    std::optional<int32_t> block = pool_.find_cached(hash, parent, block_tokens);
    if (!block) break;
    hit.blocks.push_back(*block);
    hit.hashes.push_back(hash);
    parent = hash;
  }
  return hit;
}

int KvCacheManager::blocks_needed(int64_t seq_id, int num_tokens) const {
  auto it = tables_.find(seq_id);
  const int have = it == tables_.end() ? 0 : static_cast<int>(it->second.blocks.size());
  const int want = (num_tokens + pool_.block_size() - 1) / pool_.block_size();
  return std::max(0, want - have);
}

bool KvCacheManager::allocate(int64_t seq_id, std::span<const int32_t> tokens, int num_tokens, const PrefixHit& hit,
                              int num_speculative) {
  if (static_cast<size_t>(num_tokens) > tokens.size())
    throw std::logic_error("KvCacheManager::allocate: tokens shorter than num_tokens");
  const bool is_new = !has(seq_id);
  if (!is_new && !hit.blocks.empty())
    throw std::logic_error("KvCacheManager::allocate: a prefix hit for a sequence that has blocks");
  const int bs = pool_.block_size();
  if (hit.num_tokens(bs) > num_tokens) throw std::logic_error("KvCacheManager::allocate: prefix hit beyond num_tokens");
  // Hit blocks nobody references sit on the free list: taking them leaves fewer to allocate.
  int hit_free = 0;
  for (int32_t b : hit.blocks) {
    if (!pool_.is_cached(b)) throw std::logic_error("KvCacheManager::allocate: prefix hit went stale");
    hit_free += pool_.ref_count(b) == 0 ? 1 : 0;
  }
  if (num_speculative < 0) throw std::logic_error("KvCacheManager::allocate: negative num_speculative");
  const int fresh = blocks_needed(seq_id, num_tokens + num_speculative) - static_cast<int>(hit.blocks.size());
  if (fresh > pool_.num_free() - hit_free) return false;

  Table& table = tables_[seq_id];
  for (size_t i = 0; i < hit.blocks.size(); ++i) {
    pool_.acquire(hit.blocks[i]);
    table.blocks.push_back(hit.blocks[i]);
    table.hashes.push_back(hit.hashes[i]);
  }
  for (int i = 0; i < fresh; ++i) table.blocks.push_back(*pool_.allocate());
  if (is_new && prefix_caching_) {
    prefix_query_tokens_ += static_cast<int64_t>(tokens.size());
    prefix_hit_tokens_ += hit.num_tokens(bs);
  }
  cache_full_blocks(table, tokens, num_tokens);
  return true;
}

void KvCacheManager::cache_full_blocks(Table& table, std::span<const int32_t> tokens, int num_tokens) {
  if (!prefix_caching_) return;
  const int bs = pool_.block_size();
  const size_t full_blocks = std::min(static_cast<size_t>(num_tokens / bs), table.blocks.size());
  while (table.hashes.size() < full_blocks) {
    const size_t i = table.hashes.size();
    const BlockHash parent = i == 0 ? 0 : table.hashes[i - 1];
    std::span<const int32_t> block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash hash = hash_block(parent, block_tokens);
    pool_.cache_full_block(table.blocks[i], hash, parent, block_tokens);
    table.hashes.push_back(hash);
  }
}

void KvCacheManager::truncate(int64_t seq_id, std::span<const int32_t> tokens, int num_computed) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw std::out_of_range("KvCacheManager: no sequence " + std::to_string(seq_id));
  Table& table = it->second;
  const size_t keep = static_cast<size_t>((num_computed + pool_.block_size() - 1) / pool_.block_size());
  if (keep < table.hashes.size()) throw std::logic_error("KvCacheManager::truncate: below hashed (verified) blocks");
  while (table.blocks.size() > keep) {
    pool_.release_unused(table.blocks.back());  // the last taken goes back first: the pool's order returns
    table.blocks.pop_back();
  }
  cache_full_blocks(table, tokens, num_computed);
}

void KvCacheManager::free(int64_t seq_id, int num_computed) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  const Table& table = it->second;
  // Hashed at allocation but never written: another request must not find them.
  for (size_t i = static_cast<size_t>(std::max(0, num_computed) / pool_.block_size()); i < table.hashes.size(); ++i) {
    pool_.uncache(table.blocks[i]);
  }
  for (auto b = table.blocks.rbegin(); b != table.blocks.rend(); ++b) pool_.release(*b);
  tables_.erase(it);
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw std::out_of_range("KvCacheManager: no sequence " + std::to_string(seq_id));
  return it->second.blocks;
}

}  // namespace slab
