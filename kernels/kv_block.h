#pragma once
// Where K and V live in the paged KV pool, and the one kernel that writes them.
//
// A block holds block_size tokens of K and V for every layer and KV head, laid out
// [layer][K then V][kv_head][token][head_dim]; blocks are block_stride elements apart. A
// sequence's positions map to blocks through its block table (block ids in position order).
// Every address into the pool (the writes below, the SLAB attention kernel, the scalar reference
// attention) comes from kv_block_offset.
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"

namespace slab::kern {

// One layer's K and V in the pool. Offsets and strides count elements of the pool's dtype.
struct KvBlockLayout {
  int block_size = 0;
  int head_dim = 0;
  size_t block_stride = 0;  // block -> block
  size_t head_stride = 0;   // KV head -> KV head inside a block: block_size * head_dim
  size_t k_offset = 0;      // the layer's K inside a block
  size_t v_offset = 0;      // the layer's V inside a block
};

// Element offset of token `token_in_block` (0 for the start of the run) of one KV head in `block`;
// part_offset is the layer's k_offset or v_offset.
inline size_t kv_block_offset(int32_t block, size_t block_stride, size_t part_offset, int kv_head, size_t head_stride,
                              int token_in_block, int head_dim) {
  return static_cast<size_t>(block) * block_stride + part_offset + static_cast<size_t>(kv_head) * head_stride +
         static_cast<size_t>(token_in_block) * static_cast<size_t>(head_dim);
}

// Writes one token's K and V ([n_kv_heads][head_dim] FP32 each) for one layer at position `pos`
// of the sequence whose block table is given: copied into an FP32 pool, rounded into a BF16 one.
void kv_write(float* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads);
void kv_write(bf16_t* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads, Isa isa);

}  // namespace slab::kern
