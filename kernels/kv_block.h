#pragma once
// Where K and V live in the paged KV pool, and the one kernel that writes them.
//
// A block holds block_size tokens of K and V for every layer and KV head; blocks are block_stride
// elements apart. The strides and offsets below say where each (layer, K or V, head) run is: the
// engine's layout is [layer][kv_head][K then V][token][head_dim] (src/kv/kv_cache.h, KvGeometry). A
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
  size_t head_stride = 0;   // KV head -> KV head inside a block (KvGeometry: 2 * block_size * head_dim)
  size_t k_offset = 0;      // the layer's K inside a block
  size_t v_offset = 0;      // the layer's V inside a block
  // K in the tiled order (kv_tiled_k_offset) instead of a row per token: what the AVX-512 and
  // AMX attention blocks read (kernels/attention.h, attention_k_tiled). BF16 pools only.
  bool k_tiled = false;
};

// The tiled order of one (block, KV head)'s K: the K of token t, dims 2c and 2c + 1, is the
// dword (t / 16 · head_dim / 2 + c) · 16 + t % 16 from the start of that K. Each 16-token group is
// head_dim / 2 rows of 16 BF16 pairs: the operand vdpbf16ps takes with tokens in lanes, and 16
// of its rows one AMX B tile, written once here instead of transposed at every read. Needs
// block_size a multiple of 16 and head_dim even. Element (not dword) offset of K[t][d]:
inline size_t kv_tiled_k_offset(int token_in_block, int dim, int head_dim) {
  const size_t pair_row =
      static_cast<size_t>(token_in_block / 16) * static_cast<size_t>(head_dim / 2) + static_cast<size_t>(dim / 2);
  return 2 * (pair_row * 16 + static_cast<size_t>(token_in_block % 16)) + static_cast<size_t>(dim % 2);
}

// Element offset of token `token_in_block` (0 for the start of the run) of one KV head in `block`;
// part_offset is the layer's k_offset or v_offset.
inline size_t kv_block_offset(int32_t block, size_t block_stride, size_t part_offset, int kv_head, size_t head_stride,
                              int token_in_block, int head_dim) {
  return static_cast<size_t>(block) * block_stride + part_offset + static_cast<size_t>(kv_head) * head_stride +
         static_cast<size_t>(token_in_block) * static_cast<size_t>(head_dim);
}

// Writes one token's K and V ([n_kv_heads][head_dim] FP32 each) for one layer at position `pos`
// of the sequence whose block table is given: copied into an FP32 pool, rounded into a BF16 one
// (K in the tiled order when layout.k_tiled).
void kv_write(float* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads);
void kv_write(bf16_t* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads, Isa isa);

}  // namespace slab::kern
