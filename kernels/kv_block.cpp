#include "kernels/kv_block.h"

#include <algorithm>

namespace slab::kern {
namespace {

// Calls store(dst_offset, src) for the K and V row of every KV head of the token at `pos`.
template <typename Store>
void for_each_kv_row(const KvBlockLayout& l, const int32_t* block_table, int pos, const float* k, const float* v,
                     int n_kv_heads, Store store) {
  const int32_t block = block_table[pos / l.block_size];
  const int in_block = pos % l.block_size;
  for (int h = 0; h < n_kv_heads; ++h) {
    const size_t row = static_cast<size_t>(h) * static_cast<size_t>(l.head_dim);
    store(kv_block_offset(block, l.block_stride, l.k_offset, h, l.head_stride, in_block, l.head_dim), k + row);
    store(kv_block_offset(block, l.block_stride, l.v_offset, h, l.head_stride, in_block, l.head_dim), v + row);
  }
}

}  // namespace

void kv_write(float* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads) {
  for_each_kv_row(layout, block_table, pos, k, v, n_kv_heads,
                  [&](size_t dst, const float* src) { std::copy(src, src + layout.head_dim, pool + dst); });
}

void kv_write(bf16_t* pool, const KvBlockLayout& layout, const int32_t* block_table, int pos, const float* k,
              const float* v, int n_kv_heads, Isa isa) {
  for_each_kv_row(layout, block_table, pos, k, v, n_kv_heads, [&](size_t dst, const float* src) {
    convert_f32_to_bf16(pool + dst, src, static_cast<size_t>(layout.head_dim), isa);
  });
}

}  // namespace slab::kern
