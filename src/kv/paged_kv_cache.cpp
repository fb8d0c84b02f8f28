#include "kv/paged_kv_cache.h"

#include <stdexcept>

namespace slab {

PagedKvCache::PagedKvCache(const KvGeometry& geometry, const KvCacheManager& manager, KvDtype dtype, int numa_node)
    : geometry_(geometry), dtype_(dtype), manager_(manager) {
  if (geometry.block_size != manager.block_size()) {
    throw std::invalid_argument("PagedKvCache: block size differs from the manager's");
  }
  // Zeroed: 0 is 0.0 in both dtypes.
  AllocOptions o;
  o.zero = true;  // also faults the pages in, on the bound node
  o.numa_node = numa_node;
  pool_ = AlignedBuffer(static_cast<size_t>(manager.num_blocks()) * geometry.block_stride() * kv_dtype_bytes(dtype), o);
}

}  // namespace slab
