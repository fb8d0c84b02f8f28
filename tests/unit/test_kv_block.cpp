// kv_write against positions computed here from the engine's block layout
// ([block][layer][kv_head][K then V][token][head_dim], src/kv/kv_cache.h): every value lands in its slot, nothing
// else in the pool changes, and the BF16 pool holds the round-to-nearest-even value.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "kernels/kv_block.h"

using namespace slab::kern;

namespace {

struct Shape {
  int layers = 3, kv_heads = 2, head_dim = 16, block_size = 16;
  size_t part_stride() const { return static_cast<size_t>(block_size) * head_dim; }  // K -> V
  size_t head_stride() const { return 2 * part_stride(); }
  size_t layer_stride() const { return head_stride() * kv_heads; }
  size_t block_stride() const { return layer_stride() * layers; }
  KvBlockLayout layout(int layer) const {
    const size_t k = static_cast<size_t>(layer) * layer_stride();
    return {block_size, head_dim, block_stride(), head_stride(), k, k + part_stride()};
  }
  // Index of (block, layer, K=0/V=1, head, token, dim), written out longhand.
  size_t index(int block, int layer, int part, int head, int token, int dim) const {
    return ((((static_cast<size_t>(block) * layers + layer) * kv_heads + head) * 2 + part) * block_size + token) *
               head_dim +
           dim;
  }
};

}  // namespace

TEST_CASE("kv_write stores one token's K and V at the block-table slot of its position", "[kv][kernels]") {
  const Shape s;
  const int n_blocks = 5;
  const std::vector<int32_t> table = {3, 0, 4};  // positions 0-15 in block 3, 16-31 in block 0, ...
  const size_t n = s.block_stride() * n_blocks;
  std::vector<float> k(static_cast<size_t>(s.kv_heads) * s.head_dim), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 0.1f + static_cast<float>(i) * 1.001f;
    v[i] = -0.3f - static_cast<float>(i) * 0.997f;
  }
  for (const int layer : {0, 2}) {
    for (const int pos : {0, 17, 47}) {
      INFO("layer " << layer << " position " << pos);
      std::vector<float> pool(n, -7.0f);
      std::vector<bf16_t> pool_b(n, bf16_t{0x7fc1});  // a NaN pattern: untouched slots stay it
      kv_write(pool.data(), s.layout(layer), table.data(), pos, k.data(), v.data(), s.kv_heads);
      kv_write(pool_b.data(), s.layout(layer), table.data(), pos, k.data(), v.data(), s.kv_heads, Isa::scalar);
      std::vector<bool> written(n, false);
      const int block = table[static_cast<size_t>(pos / s.block_size)];
      for (int h = 0; h < s.kv_heads; ++h) {
        for (int d = 0; d < s.head_dim; ++d) {
          const size_t src = static_cast<size_t>(h) * s.head_dim + d;
          const size_t ki = s.index(block, layer, 0, h, pos % s.block_size, d);
          const size_t vi = s.index(block, layer, 1, h, pos % s.block_size, d);
          REQUIRE(pool[ki] == k[src]);
          REQUIRE(pool[vi] == v[src]);
          REQUIRE(pool_b[ki] == f32_to_bf16(k[src]));
          REQUIRE(pool_b[vi] == f32_to_bf16(v[src]));
          REQUIRE(ki == kv_block_offset(block, s.block_stride(), s.layout(layer).k_offset, h, s.head_stride(),
                                        pos % s.block_size, s.head_dim) +
                            static_cast<size_t>(d));
          written[ki] = written[vi] = true;
        }
      }
      for (size_t i = 0; i < n; ++i) {
        if (written[i]) continue;
        REQUIRE(pool[i] == -7.0f);
        REQUIRE(pool_b[i] == bf16_t{0x7fc1});
      }
    }
  }
}

// The tiled K (KvBlockLayout::k_tiled): within a block and head, K[t][d] is element
// 2 · ((t / 16 · head_dim / 2 + d / 2) · 16 + t % 16) + d % 2 from the head's K start, written out
// longhand here from the documented order; V keeps its rows, nothing else changes. head_dim 48:
// three pair rows past a 32-dim tile row, block 32: two token groups.
TEST_CASE("kv_write stores K in the tiled order when the layout says so", "[kv][kernels]") {
  Shape s;
  s.head_dim = 48;
  s.block_size = 32;
  const int n_blocks = 3;
  const std::vector<int32_t> table = {2, 0};
  const size_t n = s.block_stride() * n_blocks;
  std::vector<float> k(static_cast<size_t>(s.kv_heads) * s.head_dim), v(k.size());
  for (size_t i = 0; i < k.size(); ++i) {
    k[i] = 0.25f + static_cast<float>(i) * 1.013f;
    v[i] = -0.5f - static_cast<float>(i) * 0.991f;
  }
  for (const int pos : {0, 15, 16, 33, 63}) {
    INFO("position " << pos);
    KvBlockLayout layout = s.layout(1);
    layout.k_tiled = true;
    std::vector<bf16_t> pool(n, bf16_t{0x7fc1});
    kv_write(pool.data(), layout, table.data(), pos, k.data(), v.data(), s.kv_heads, Isa::scalar);
    std::vector<bool> written(n, false);
    const int block = table[static_cast<size_t>(pos / s.block_size)];
    const int t = pos % s.block_size;
    for (int h = 0; h < s.kv_heads; ++h) {
      const size_t head_k = s.index(block, 1, 0, h, 0, 0);
      for (int d = 0; d < s.head_dim; ++d) {
        const size_t src = static_cast<size_t>(h) * s.head_dim + d;
        const size_t dword = (static_cast<size_t>(t / 16) * (s.head_dim / 2) + d / 2) * 16 + t % 16;
        const size_t ki = head_k + 2 * dword + d % 2;
        const size_t vi = s.index(block, 1, 1, h, t, d);
        REQUIRE(ki == head_k + kv_tiled_k_offset(t, d, s.head_dim));
        REQUIRE(pool[ki] == f32_to_bf16(k[src]));
        REQUIRE(pool[vi] == f32_to_bf16(v[src]));
        written[ki] = written[vi] = true;
      }
    }
    for (size_t i = 0; i < n; ++i) {
      if (!written[i]) REQUIRE(pool[i] == bf16_t{0x7fc1});
    }
  }
  KvBlockLayout odd = s.layout(0);
  odd.k_tiled = true;
  odd.block_size = 24;
  CHECK_THROWS_AS(
      kv_write(std::vector<bf16_t>(n).data(), odd, table.data(), 0, k.data(), v.data(), s.kv_heads, Isa::scalar),
      std::invalid_argument);
}
