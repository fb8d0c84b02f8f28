#include "kv/paged_kv_cache.h"

#include <stdexcept>

namespace slab {

PagedKvCache::PagedKvCache(const KvGeometry& geometry, const KvCacheManager& manager)
    : geometry_(geometry), manager_(manager) {
  if (geometry.block_size != manager.block_size()) {
    throw std::invalid_argument("PagedKvCache: block size differs from the manager's");
  }
  pool_.assign(static_cast<size_t>(manager.num_blocks()) * geometry.block_stride(), 0.0f);
}

size_t PagedKvCache::bytes_per_token(const KvGeometry& geometry) {
  return static_cast<size_t>(geometry.num_layers) * 2 * geometry.num_kv_heads * geometry.head_dim * sizeof(float);
}

}  // namespace slab
