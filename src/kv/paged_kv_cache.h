#pragma once
// The SLAB KV cache memory: one pool of blocks allocated once at start, read and written by the
// forward pass through the block tables the KvCacheManager keeps.
#include <vector>

#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"

namespace slab {

class PagedKvCache final : public KvCache {
 public:
  PagedKvCache(const KvGeometry& geometry, const KvCacheManager& manager);

  const KvGeometry& geometry() const override { return geometry_; }
  float* pool() override { return pool_.data(); }
  std::span<const int32_t> block_table(int64_t seq_id) const override { return manager_.block_table(seq_id); }

  // Bytes one token's K and V take over all layers; sizes the pool from a memory budget.
  static size_t bytes_per_token(const KvGeometry& geometry);
  size_t bytes() const { return pool_.size() * sizeof(float); }

 private:
  KvGeometry geometry_;
  const KvCacheManager& manager_;
  std::vector<float> pool_;
};

}  // namespace slab
