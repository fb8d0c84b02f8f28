#pragma once
// The KV cache the model tests run a forward pass on: one slot of 64 tokens in blocks of 16,
// shaped for the model, in the dtype the runner (or the reference forward) needs.
#include "kv/contiguous_kv_cache.h"
#include "model/model_config.h"

namespace slab::test {

inline ContiguousKvCache one_slot_cache(const ModelConfig& c, KvDtype dtype) {
  KvGeometry g;
  g.num_layers = c.num_layers;
  g.num_kv_heads = c.num_kv_heads;
  g.head_dim = c.head_dim;
  g.block_size = 16;
  return ContiguousKvCache(g, 1, 64, dtype);
}

}  // namespace slab::test
