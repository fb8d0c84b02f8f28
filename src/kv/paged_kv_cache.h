#pragma once
// The SLAB KV cache memory: one pool of blocks allocated once at start, read and written by the
// forward pass through the block tables the KvCacheManager keeps.
#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "runtime/aligned_buffer.h"

namespace slab {

class PagedKvCache final : public KvCache {
 public:
  // numa_node >= 0 binds the pool's memory to that node (the instance's, with --numa-node).
  PagedKvCache(const KvGeometry& geometry, const KvCacheManager& manager, KvDtype dtype = KvDtype::f32,
               int numa_node = -1);

  const KvGeometry& geometry() const override { return geometry_; }
  KvDtype dtype() const override { return dtype_; }
  void* pool_bytes() override { return pool_.data(); }
  std::span<const int32_t> block_table(int64_t seq_id) const override { return manager_.block_table(seq_id); }

  // Bytes one token's K and V take over all layers; sizes the pool from a memory budget.
  static size_t bytes_per_token(const KvGeometry& geometry, KvDtype dtype) { return geometry.bytes_per_token(dtype); }
  size_t bytes() const { return pool_.size(); }

 private:
  KvGeometry geometry_;
  KvDtype dtype_;
  const KvCacheManager& manager_;
  AlignedBuffer pool_;  // 64-byte aligned for the attention kernels' vector loads
};

}  // namespace slab
