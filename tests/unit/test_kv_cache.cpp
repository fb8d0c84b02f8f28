// Block pool and KV cache manager: reference counts, the LRU free list and prefix caching; the KV
// memory's dtype.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kv/block_pool.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/kv_cache.h"
#include "kv/kv_cache_manager.h"

using namespace slab;

namespace {
std::vector<int32_t> iota_tokens(int n, int start = 0) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), start);
  return t;
}
}  // namespace

TEST_CASE("block pool hands out each block once and reuses the least recently released first", "[kv]") {
  BlockPool pool(4, 16);
  std::vector<int32_t> got;
  while (auto b = pool.allocate()) got.push_back(*b);
  REQUIRE(got.size() == 4);
  REQUIRE(pool.num_free() == 0);
  pool.release(got[2]);
  pool.release(got[0]);
  REQUIRE(pool.allocate() == got[2]);
  REQUIRE(pool.allocate() == got[0]);
  REQUIRE_FALSE(pool.allocate().has_value());
  pool.release(got[1]);
  REQUIRE_THROWS(pool.release(got[1]));
}

TEST_CASE("a released cached block can be taken back until it is reallocated", "[kv]") {
  BlockPool pool(2, 16);
  const auto tokens = iota_tokens(16);
  const BlockHash h = hash_block(0, tokens);
  const int32_t b = *pool.allocate();
  pool.cache_full_block(b, h, 0, tokens);
  pool.release(b);
  REQUIRE(pool.num_free() == 2);
  REQUIRE(pool.find_cached(h, 0, tokens) == b);
  pool.acquire(b);  // a hit: off the free list again
  REQUIRE(pool.num_free() == 1);
  REQUIRE(pool.ref_count(b) == 1);
  pool.release(b);
  // Reallocating both blocks evicts the cached one.
  pool.allocate();
  pool.allocate();
  REQUIRE_FALSE(pool.find_cached(h, 0, tokens).has_value());
}

TEST_CASE("a hash match with different tokens or parent is not a hit", "[kv]") {
  BlockPool pool(2, 16);
  const auto tokens = iota_tokens(16);
  const BlockHash h = hash_block(7, tokens);
  const int32_t b = *pool.allocate();
  pool.cache_full_block(b, h, 7, tokens);
  auto other = iota_tokens(16, 1);
  REQUIRE_FALSE(pool.find_cached(h, 7, other).has_value());
  REQUIRE_FALSE(pool.find_cached(h, 8, tokens).has_value());
  REQUIRE(pool.find_cached(h, 7, tokens) == b);
  REQUIRE(hash_block(7, tokens) != hash_block(8, tokens));
  REQUIRE(hash_block(7, tokens) != hash_block(7, other));
}

TEST_CASE("prefix caching shares full prompt blocks by reference count and leaves the last token to compute", "[kv]") {
  KvCacheManager kv(8, 16, /*enable_prefix_caching=*/true);
  const auto prompt = iota_tokens(40);  // two full blocks and 8 tokens
  REQUIRE(kv.find_cached_prefix(prompt).blocks.empty());
  REQUIRE(kv.allocate(1, prompt, 40));
  REQUIRE(kv.block_table(1).size() == 3);
  REQUIRE(kv.pool().num_cached() == 2);  // hashed at allocation: the tokens are known

  // Same prompt: the two full blocks are shared.
  const PrefixHit hit = kv.find_cached_prefix(prompt);
  REQUIRE(hit.num_tokens(16) == 32);
  REQUIRE(kv.allocate(2, prompt, 40, hit));
  const auto t1 = kv.block_table(1);
  const auto t2 = kv.block_table(2);
  REQUIRE(t1[0] == t2[0]);
  REQUIRE(t1[1] == t2[1]);
  REQUIRE(t1[2] != t2[2]);
  REQUIRE(kv.pool().ref_count(t1[0]) == 2);

  // A prompt of exactly two blocks reuses only the first: its last token must be computed.
  const auto exact = iota_tokens(32);
  const PrefixHit exact_hit = kv.find_cached_prefix(exact);
  REQUIRE(exact_hit.num_tokens(16) == 16);
  REQUIRE(kv.allocate(3, exact, 32, exact_hit));

  kv.free(1, 40);
  kv.free(2, 40);
  kv.free(3, 32);
  REQUIRE(kv.num_free_blocks() == 8);
  // Freed but cached: a later request still hits.
  const PrefixHit later = kv.find_cached_prefix(prompt);
  REQUIRE(later.num_tokens(16) == 32);
  REQUIRE(kv.allocate(4, prompt, 40, later));
  REQUIRE(kv.prefix_query_tokens() == 40 + 40 + 32 + 40);
  REQUIRE(kv.prefix_hit_tokens() == 32 + 16 + 32);
  kv.free(4, 40);
}

TEST_CASE("a prefix-cache query has no side effects", "[kv]") {
  KvCacheManager kv(6, 16, true);
  const auto prompt = iota_tokens(50);
  REQUIRE(kv.allocate(1, prompt, 50));
  kv.free(1, 50);  // its three full blocks stay cached on the free list
  const int free_before = kv.num_free_blocks();
  for (int i = 0; i < 3; ++i) {
    const PrefixHit hit = kv.find_cached_prefix(prompt);
    REQUIRE(hit.blocks.size() == 3);
    REQUIRE(hit.hashes.size() == 3);
  }
  REQUIRE(kv.num_free_blocks() == free_before);
  for (int32_t b = 0; b < kv.num_blocks(); ++b) REQUIRE(kv.pool().ref_count(b) == 0);
  REQUIRE_FALSE(kv.has(2));
  REQUIRE(kv.prefix_query_tokens() == 50);  // only the committed allocation counted
  REQUIRE(kv.prefix_hit_tokens() == 0);
}

TEST_CASE("committing a prefix hit is all or nothing, counting hit blocks taken off the free list", "[kv]") {
  KvCacheManager kv(4, 16, true);
  const auto prompt = iota_tokens(40);
  REQUIRE(kv.allocate(1, prompt, 40));
  kv.free(1, 40);                                     // 4 free, two of them cached
  REQUIRE(kv.allocate(9, iota_tokens(16, 500), 16));  // an unrelated sequence holds one block: 3 free
  const PrefixHit hit = kv.find_cached_prefix(prompt);
  REQUIRE(hit.blocks.size() == 2);
  // 2 hit blocks (both on the free list) + 2 fresh for 64 tokens = 4 > 3 free: refused, nothing moves.
  auto longer = iota_tokens(64);
  REQUIRE(kv.find_cached_prefix(longer).blocks.size() == 2);
  REQUIRE_FALSE(kv.allocate(2, longer, 64, hit));
  REQUIRE_FALSE(kv.has(2));
  REQUIRE(kv.num_free_blocks() == 3);
  for (int32_t b : hit.blocks) REQUIRE(kv.pool().ref_count(b) == 0);
  REQUIRE(kv.prefix_hit_tokens() == 0);
  REQUIRE(kv.find_cached_prefix(prompt).blocks == hit.blocks);  // still cached
  // 2 hit + 1 fresh fits the 3 free blocks.
  REQUIRE(kv.allocate(2, prompt, 40, hit));
  REQUIRE(kv.num_free_blocks() == 0);
  REQUIRE(kv.prefix_hit_tokens() == 32);
}

TEST_CASE("a block is cached when an allocation fills it, generated tokens included, and found by a later request",
          "[kv]") {
  KvCacheManager kv(8, 16, true);
  auto tokens = iota_tokens(20);  // a 20-token prompt: one full block
  REQUIRE(kv.allocate(1, tokens, 20));
  REQUIRE(kv.pool().num_cached() == 1);
  // Decode: the step that computes position 31 fills the second block with generated tokens.
  while (tokens.size() < 31) {
    tokens.push_back(static_cast<int32_t>(1000 + tokens.size()));
    REQUIRE(kv.allocate(1, tokens, static_cast<int>(tokens.size())));
    REQUIRE(kv.pool().num_cached() == 1);
  }
  tokens.push_back(2000);
  REQUIRE(kv.allocate(1, tokens, 32));
  REQUIRE(kv.pool().num_cached() == 2);
  kv.free(1, 32);

  auto follow_up = tokens;  // a later request continuing the conversation
  follow_up.push_back(7);
  const PrefixHit hit = kv.find_cached_prefix(follow_up);
  REQUIRE(hit.num_tokens(16) == 32);
  // A different generated token in the second block misses it.
  auto other = follow_up;
  other[25] = 3;
  REQUIRE(kv.find_cached_prefix(other).num_tokens(16) == 16);
}

TEST_CASE("freeing a sequence drops the hashes of blocks whose K/V were never computed", "[kv]") {
  KvCacheManager kv(4, 16, true);
  const auto prompt = iota_tokens(40);
  REQUIRE(kv.allocate(1, prompt, 40));
  REQUIRE(kv.pool().num_cached() == 2);
  kv.free(1, 20);  // e.g. preempted before the step ran past position 20: block 1 was never written
  REQUIRE(kv.pool().num_cached() == 1);
  REQUIRE(kv.find_cached_prefix(prompt).num_tokens(16) == 16);
}

TEST_CASE("allocation is all or nothing and prefix caching can be switched off", "[kv]") {
  KvCacheManager kv(3, 16, /*enable_prefix_caching=*/false);
  REQUIRE(kv.allocate(1, iota_tokens(33), 33));
  REQUIRE(kv.num_free_blocks() == 0);
  REQUIRE_FALSE(kv.allocate(2, iota_tokens(1), 1));
  REQUIRE_FALSE(kv.has(2));
  REQUIRE(kv.pool().num_cached() == 0);
  kv.free(1, 33);
  REQUIRE(kv.find_cached_prefix(iota_tokens(33)).blocks.empty());
  REQUIRE(kv.usage() == 0.0);
}

TEST_CASE("KV memory carries its dtype: BF16 halves the bytes and only the matching typed view is given", "[kv]") {
  const KvGeometry g{2, 2, 16, 16};
  REQUIRE(g.bytes_per_token(KvDtype::f32) == 2 * 2 * 2 * 16 * sizeof(float));
  REQUIRE(g.bytes_per_token(KvDtype::bf16) * 2 == g.bytes_per_token(KvDtype::f32));

  KvCache f32(g, 3, KvDtype::f32), bf16(g, 3, KvDtype::bf16);
  REQUIRE(f32.bytes() == 3 * g.block_stride() * sizeof(float));
  REQUIRE(bf16.bytes() * 2 == f32.bytes());
  REQUIRE(f32.pool_f32() != nullptr);
  REQUIRE_THROWS_AS(f32.pool_bf16(), std::logic_error);
  REQUIRE_THROWS_AS(bf16.pool_f32(), std::logic_error);
  REQUIRE(bf16.pool_bf16()[3 * g.block_stride() - 1] == 0);  // zeroed, whole pool addressable

  ContiguousKvCache c(g, 2, 20, KvDtype::bf16);
  REQUIRE(c.dtype() == KvDtype::bf16);
  REQUIRE(reinterpret_cast<uintptr_t>(c.pool_bytes()) % 64 == 0);  // the attention kernels' vector loads
  REQUIRE(ContiguousKvCache(g, 1, 16).dtype() == KvDtype::f32);    // the reference forward's default
  REQUIRE(c.num_blocks() == 4);                                    // 2 slots of ceil(20 / 16) blocks
  REQUIRE(c.block_table(1)[0] == 2);
  REQUIRE_THROWS_AS(c.block_table(2), std::out_of_range);
}

TEST_CASE("KV geometry lays a block out [layer][kv_head][K then V][token][head_dim]", "[kv]") {
  // Attention reads each (layer, head)'s K and V as one run: the strides must put V right after K
  // and the next head after that V. Every element's address, written out longhand here.
  const KvGeometry g{3, 2, 16, 32};
  const int layers = 3, heads = 2, hd = 16, bs = 32;
  std::vector<int> seen(2 * g.block_stride(), 0);
  for (int block = 0; block < 2; ++block) {
    for (int layer = 0; layer < layers; ++layer) {
      const kern::KvBlockLayout l = g.layer_layout(layer);
      for (int head = 0; head < heads; ++head) {
        for (int part = 0; part < 2; ++part) {
          for (int t = 0; t < bs; ++t) {
            for (int d = 0; d < hd; ++d) {
              const size_t want =
                  ((((static_cast<size_t>(block) * layers + layer) * heads + head) * 2 + part) * bs + t) * hd + d;
              const size_t got = kern::kv_block_offset(block, l.block_stride, part == 0 ? l.k_offset : l.v_offset, head,
                                                       l.head_stride, t, hd) +
                                 static_cast<size_t>(d);
              REQUIRE(got == want);
              ++seen[got];
            }
          }
        }
      }
    }
  }
  REQUIRE(std::count(seen.begin(), seen.end(), 1) == static_cast<long>(seen.size()));  // each slot once
}
