#pragma once
// The KV memory the forward pass writes and attention reads: geometry + dtype + one pool of
// blocks, allocated once. Which block holds which positions of a sequence (its block table) is
// bookkeeping the scheduler owns (KvCacheManager); each forward batch carries the tables.
//
// Memory is cut into blocks of `block_size` tokens; one block holds K and V of every layer and KV
// head for its tokens, laid out [layer][kv_head][K then V][token][head_dim], so attention reads
// one contiguous run of 2 * block_size * head_dim values per (layer, head, block): K then V. Blocks
// are scattered through the pool, and a run of 8 KB (TinyLlama's heads, blocks of 32) streams at
// ~1.2-1.4x the rate of runs of 4 KB (bench/results/2026-11-27-epyc-zen5-2c-kv-head-runs). Within
// the K half the fast runner keeps K in the tiled order the AVX-512 attention block reads
// (kern::kv_tiled_k_offset). Addresses inside the pool come from kern::kv_block_offset
// (kernels/kv_block.h), the one place that knows.
//
// The pool carries a dtype: FP32 for the scalar reference forward (the oracle in tests), BF16 for
// the fast runner (half the memory and bandwidth; the SLAB attention kernels read BF16 K/V).
// Whoever allocates a cache asks the runner which one it needs (ModelRunner::kv_dtype()).
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/kv_block.h"
#include "runtime/aligned_buffer.h"

namespace slab {

enum class KvDtype { f32, bf16 };

inline size_t kv_dtype_bytes(KvDtype dtype) { return dtype == KvDtype::bf16 ? sizeof(kern::bf16_t) : sizeof(float); }
inline const char* kv_dtype_name(KvDtype dtype) { return dtype == KvDtype::bf16 ? "bf16" : "float32"; }

struct KvGeometry {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 32;

  size_t kv_stride() const { return static_cast<size_t>(block_size) * head_dim; }  // K -> V
  size_t head_stride() const { return 2 * kv_stride(); }                           // KV head -> KV head
  size_t layer_stride() const { return head_stride() * num_kv_heads; }             // layer -> layer
  size_t block_stride() const { return layer_stride() * num_layers; }              // block -> block
  // Bytes one token's K and V take over all layers.
  size_t bytes_per_token(KvDtype dtype) const {
    return static_cast<size_t>(num_layers) * 2 * num_kv_heads * head_dim * kv_dtype_bytes(dtype);
  }
  // One layer's K and V in the kernels' terms.
  kern::KvBlockLayout layer_layout(int layer) const {
    const size_t k_offset = static_cast<size_t>(layer) * layer_stride();
    return {block_size, head_dim, block_stride(), head_stride(), k_offset, k_offset + kv_stride()};
  }
};

class KvCache {
 public:
  // numa_node >= 0 binds the pool's memory to that node (the instance's, with --numa-node).
  KvCache(const KvGeometry& geometry, int num_blocks, KvDtype dtype = KvDtype::f32, int numa_node = -1);

  const KvGeometry& geometry() const { return geometry_; }
  KvDtype dtype() const { return dtype_; }
  int num_blocks() const { return num_blocks_; }
  size_t bytes() const { return pool_.size(); }
  // Base of the block pool; strides (KvGeometry) count elements of dtype().
  void* pool_bytes() { return pool_.data(); }
  // Typed views; asking for the wrong dtype is a wiring bug (a runner fed the other cache).
  float* pool_f32();
  kern::bf16_t* pool_bf16();

 private:
  KvGeometry geometry_;
  KvDtype dtype_;
  int num_blocks_;
  AlignedBuffer pool_;  // 64-byte aligned for the attention kernels' vector loads
};

}  // namespace slab
