#include "kv/contiguous_kv_cache.h"

#include <numeric>
#include <stdexcept>
#include <string>

namespace slab {
namespace {

int blocks_per_slot(const KvGeometry& geometry, int num_slots, int max_tokens) {
  if (geometry.block_size <= 0 || num_slots <= 0 || max_tokens <= 0) {
    throw std::invalid_argument("ContiguousKvCache: block_size, slots and max_tokens must be > 0");
  }
  return (max_tokens + geometry.block_size - 1) / geometry.block_size;
}

}  // namespace

ContiguousKvCache::ContiguousKvCache(const KvGeometry& geometry, int num_slots, int max_tokens, KvDtype dtype,
                                     int numa_node)
    : KvCache(geometry, num_slots * blocks_per_slot(geometry, num_slots, max_tokens), dtype, numa_node),
      num_slots_(num_slots), blocks_per_slot_(blocks_per_slot(geometry, num_slots, max_tokens)) {
  block_ids_.resize(static_cast<size_t>(num_slots) * blocks_per_slot_);
  std::iota(block_ids_.begin(), block_ids_.end(), 0);
}

std::span<const int32_t> ContiguousKvCache::block_table(int slot) const {
  if (slot < 0 || slot >= num_slots_) {
    throw std::out_of_range("ContiguousKvCache: no slot " + std::to_string(slot));
  }
  return {block_ids_.data() + static_cast<size_t>(slot) * blocks_per_slot_, static_cast<size_t>(blocks_per_slot_)};
}

}  // namespace slab
