#pragma once
// The simplest KvCache: a fixed number of sequence slots, each owning a contiguous run of blocks
// long enough for `max_tokens` positions. Used by `slabserve generate` and the model tests; the
// paged SLAB cache with sharing and eviction replaces it in the engine.
#include <vector>

#include "kv/kv_cache.h"
#include "runtime/aligned_buffer.h"

namespace slab {

class ContiguousKvCache final : public KvCache {
 public:
  // numa_node >= 0 binds the memory to that node, as PagedKvCache does.
  ContiguousKvCache(const KvGeometry& geometry, int num_slots, int max_tokens, KvDtype dtype = KvDtype::f32,
                    int numa_node = -1);

  const KvGeometry& geometry() const override { return geometry_; }
  KvDtype dtype() const override { return dtype_; }
  void* pool_bytes() override { return pool_.data(); }
  std::span<const int32_t> block_table(int64_t seq_id) const override;
  int max_tokens() const { return blocks_per_slot_ * geometry_.block_size; }

 private:
  KvGeometry geometry_;
  KvDtype dtype_;
  int num_slots_;
  int blocks_per_slot_;
  std::vector<int32_t> block_ids_;  // slot s owns block_ids_[s * blocks_per_slot_ ...]
  AlignedBuffer pool_;
};

}  // namespace slab
