#pragma once
// The interface between the forward pass and whatever owns KV memory. Memory is cut into blocks
// of `block_size` tokens; one block holds K and V of every layer and KV head for its tokens, laid
// out [layer][K then V][kv_head][token][head_dim], so attention reads one contiguous run of
// block_size * head_dim values per (layer, K/V, head, block). A sequence's cache is the list of
// its block ids in position order (its block table).
//
// The pool carries a dtype: FP32 for the scalar reference forward (the oracle in tests), BF16 for
// the fast runner (half the memory and bandwidth; the SLAB attention kernels read BF16 K/V).
// Whoever allocates a cache asks the runner which one it needs (ModelRunner::kv_dtype()).
#include <cstddef>
#include <cstdint>
#include <span>
#include <stdexcept>

#include "kernels/bf16.h"

namespace slab {

enum class KvDtype { f32, bf16 };

inline size_t kv_dtype_bytes(KvDtype dtype) { return dtype == KvDtype::bf16 ? sizeof(kern::bf16_t) : sizeof(float); }
inline const char* kv_dtype_name(KvDtype dtype) { return dtype == KvDtype::bf16 ? "bf16" : "float32"; }

struct KvGeometry {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 32;

  size_t head_stride() const { return static_cast<size_t>(block_size) * head_dim; }
  size_t kv_stride() const { return head_stride() * num_kv_heads; }     // K -> V
  size_t layer_stride() const { return 2 * kv_stride(); }                // layer -> layer
  size_t block_stride() const { return layer_stride() * num_layers; }    // block -> block
  // Bytes one token's K and V take over all layers.
  size_t bytes_per_token(KvDtype dtype) const {
    return static_cast<size_t>(num_layers) * 2 * num_kv_heads * head_dim * kv_dtype_bytes(dtype);
  }
};

class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual const KvGeometry& geometry() const = 0;
  virtual KvDtype dtype() const = 0;
  // Base of the block pool; strides (KvGeometry) count elements of dtype().
  virtual void* pool_bytes() = 0;
  // Typed views; asking for the wrong dtype is a wiring bug (a runner fed the other cache).
  float* pool_f32() {
    if (dtype() != KvDtype::f32) throw std::logic_error("KV cache holds bf16, not float32");
    return static_cast<float*>(pool_bytes());
  }
  kern::bf16_t* pool_bf16() {
    if (dtype() != KvDtype::bf16) throw std::logic_error("KV cache holds float32, not bf16");
    return static_cast<kern::bf16_t*>(pool_bytes());
  }
  // Block ids of a sequence, in position order. The owner guarantees they cover every position
  // the next forward pass writes.
  virtual std::span<const int32_t> block_table(int64_t seq_id) const = 0;
};

}  // namespace slab
