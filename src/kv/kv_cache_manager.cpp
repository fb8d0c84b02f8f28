#include "kv/kv_cache_manager.h"

#include <stdexcept>
#include <string>

namespace slab {

KvCacheManager::KvCacheManager(int num_blocks, int block_size, bool enable_prefix_caching)
    : pool_(num_blocks, block_size), prefix_caching_(enable_prefix_caching) {}

int KvCacheManager::adopt_cached_prefix(int64_t seq_id, std::span<const int32_t> tokens) {
  Table& table = tables_[seq_id];
  if (!table.blocks.empty()) throw std::logic_error("adopt_cached_prefix: sequence already has blocks");
  if (!prefix_caching_) return 0;
  const int bs = pool_.block_size();
  // The last token is always computed, so a prompt of exactly k full blocks reuses k - 1.
  const int max_blocks = (static_cast<int>(tokens.size()) - 1) / bs;
  BlockHash parent = 0;
  for (int i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i) * bs, bs);
    const BlockHash hash = hash_block(parent, block_tokens);
    std::optional<int32_t> hit = pool_.find_cached(hash, parent, block_tokens);
    if (!hit) break;
    pool_.acquire(*hit);
    table.blocks.push_back(*hit);
    table.hashes.push_back(hash);
    parent = hash;
  }
  const int hit_tokens = static_cast<int>(table.blocks.size()) * bs;
  prefix_query_tokens_ += static_cast<int64_t>(tokens.size());
  prefix_hit_tokens_ += hit_tokens;
  return hit_tokens;
}

int KvCacheManager::blocks_needed(int64_t seq_id, int num_tokens) const {
  auto it = tables_.find(seq_id);
  const int have = it == tables_.end() ? 0 : static_cast<int>(it->second.blocks.size());
  const int want = (num_tokens + pool_.block_size() - 1) / pool_.block_size();
  return std::max(0, want - have);
}

bool KvCacheManager::reserve(int64_t seq_id, int num_tokens) {
  const int needed = blocks_needed(seq_id, num_tokens);
  if (needed > pool_.num_free()) return false;
  Table& table = tables_[seq_id];
  for (int i = 0; i < needed; ++i) table.blocks.push_back(*pool_.allocate());
  return true;
}

void KvCacheManager::cache_computed(int64_t seq_id, std::span<const int32_t> tokens, int num_computed) {
  if (!prefix_caching_) return;
  Table& table = tables_.at(seq_id);
  const int bs = pool_.block_size();
  const size_t full_blocks = static_cast<size_t>(num_computed / bs);
  while (table.hashes.size() < full_blocks && table.hashes.size() < table.blocks.size()) {
    const size_t i = table.hashes.size();
    const BlockHash parent = i == 0 ? 0 : table.hashes[i - 1];
    std::span<const int32_t> block_tokens = tokens.subspan(i * bs, bs);
    const BlockHash hash = hash_block(parent, block_tokens);
    pool_.cache_full_block(table.blocks[i], hash, parent, block_tokens);
    table.hashes.push_back(hash);
  }
}

void KvCacheManager::free(int64_t seq_id) {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) return;
  const std::vector<int32_t>& blocks = it->second.blocks;
  for (auto b = blocks.rbegin(); b != blocks.rend(); ++b) pool_.release(*b);
  tables_.erase(it);
}

std::span<const int32_t> KvCacheManager::block_table(int64_t seq_id) const {
  auto it = tables_.find(seq_id);
  if (it == tables_.end()) throw std::out_of_range("KvCacheManager: no sequence " + std::to_string(seq_id));
  return it->second.blocks;
}

}  // namespace slab
