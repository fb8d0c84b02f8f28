#pragma once
// The interface between the forward pass and whatever owns KV memory. Memory is cut into blocks
// of `block_size` tokens; one block holds K and V of every layer and KV head for its tokens, laid
// out [layer][K then V][kv_head][token][head_dim], so attention reads one contiguous run of
// block_size * head_dim values per (layer, K/V, head, block). A sequence's cache is the list of
// its block ids in position order (its block table).
#include <cstddef>
#include <cstdint>
#include <span>

namespace slab {

struct KvGeometry {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 32;

  size_t head_stride() const { return static_cast<size_t>(block_size) * head_dim; }
  size_t kv_stride() const { return head_stride() * num_kv_heads; }     // K -> V
  size_t layer_stride() const { return 2 * kv_stride(); }                // layer -> layer
  size_t block_stride() const { return layer_stride() * num_layers; }    // block -> block
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual const KvGeometry& geometry() const = 0;
  // Base of the block pool (FP32 values in the reference path).
  virtual float* pool() = 0;
  // Block ids of a sequence, in position order. The owner guarantees they cover every position
  // the next forward pass writes.
  virtual std::span<const int32_t> block_table(int64_t seq_id) const = 0;
};

}  // namespace slab
