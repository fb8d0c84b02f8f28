#include "kernels/kv_block.h"

#include <algorithm>
#include <stdexcept>

namespace slab::kern {
namespace {

constexpr int kMaxTiledHeadDim = 256;  // the row buffer of the tiled K write (any head_dim works)

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
  if (!layout.k_tiled) {
    for_each_kv_row(layout, block_table, pos, k, v, n_kv_heads, [&](size_t dst, const float* src) {
      convert_f32_to_bf16(pool + dst, src, static_cast<size_t>(layout.head_dim), isa);
    });
    return;
  }
  if (layout.block_size % 16 != 0 || layout.head_dim % 2 != 0) {
    throw std::invalid_argument("kv_write: the tiled K needs block_size % 16 == 0 and an even head_dim");
  }
  const int32_t block = block_table[pos / layout.block_size];
  const int in_block = pos % layout.block_size;
  const auto hd = static_cast<size_t>(layout.head_dim);
  bf16_t row[kMaxTiledHeadDim];
  for (int h = 0; h < n_kv_heads; ++h) {
    const float* src = k + static_cast<size_t>(h) * hd;
    bf16_t* head_k = pool + kv_block_offset(block, layout.block_stride, layout.k_offset, h, layout.head_stride, 0, 0);
    for (size_t d0 = 0; d0 < hd; d0 += kMaxTiledHeadDim) {  // rounded as the row form rounds
      const size_t n = std::min(hd - d0, static_cast<size_t>(kMaxTiledHeadDim));
      convert_f32_to_bf16(row, src + d0, n, isa);
      for (size_t d = 0; d < n; ++d) {
        head_k[kv_tiled_k_offset(in_block, static_cast<int>(d0 + d), layout.head_dim)] = row[d];
      }
    }
    convert_f32_to_bf16(pool + kv_block_offset(block, layout.block_stride, layout.v_offset, h, layout.head_stride,
                                               in_block, layout.head_dim),
                        v + static_cast<size_t>(h) * hd, hd, isa);
  }
}

}  // namespace slab::kern
