#pragma once
// The simplest KV memory for callers without a scheduler: a fixed number of sequence slots, each
// owning a contiguous run of blocks long enough for `max_tokens` positions. Used by `slabserve
// bench` and the model tests; the engine's scheduler hands out blocks of a plain KvCache instead.
#include <span>
#include <vector>

#include "kv/kv_cache.h"

namespace slab {

class ContiguousKvCache final : public KvCache {
 public:
  // numa_node >= 0 binds the memory to that node, as KvCache does.
  ContiguousKvCache(const KvGeometry& geometry, int num_slots, int max_tokens, KvDtype dtype = KvDtype::f32,
                    int numa_node = -1);

  // The block table of slot `slot`, for a BatchSequence.
  std::span<const int32_t> block_table(int slot) const;
  int max_tokens() const { return blocks_per_slot_ * geometry().block_size; }

 private:
  int num_slots_;
  int blocks_per_slot_;
  std::vector<int32_t> block_ids_;  // slot s owns block_ids_[s * blocks_per_slot_ ...]
};

}  // namespace slab
