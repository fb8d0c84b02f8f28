#include "kv/contiguous_kv_cache.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace slab {

ContiguousKvCache::ContiguousKvCache(const KvGeometry& geometry, int num_slots, int max_tokens, KvDtype dtype,
                                     int numa_node)
    : geometry_(geometry), dtype_(dtype), num_slots_(num_slots) {
  if (geometry.block_size <= 0 || num_slots <= 0 || max_tokens <= 0) {
    throw std::invalid_argument("ContiguousKvCache: block_size, slots and max_tokens must be > 0");
  }
  blocks_per_slot_ = (max_tokens + geometry.block_size - 1) / geometry.block_size;
  block_ids_.resize(static_cast<size_t>(num_slots) * blocks_per_slot_);
  std::iota(block_ids_.begin(), block_ids_.end(), 0);
  AllocOptions o;
  o.zero = true;  // 0 is 0.0 in both dtypes
  o.numa_node = numa_node;
  pool_ = AlignedBuffer(block_ids_.size() * geometry.block_stride() * kv_dtype_bytes(dtype), o);
}

std::span<const int32_t> ContiguousKvCache::block_table(int64_t seq_id) const {
  if (seq_id < 0 || seq_id >= num_slots_) {
    throw std::out_of_range("ContiguousKvCache: no slot " + std::to_string(seq_id));
  }
  return {block_ids_.data() + static_cast<size_t>(seq_id) * blocks_per_slot_,
          static_cast<size_t>(blocks_per_slot_)};
}

}  // namespace slab
