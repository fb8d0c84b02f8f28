// Block pool and KV cache manager: reference counts, the LRU free list and prefix caching; the KV
// memory's dtype.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>
#include <stdexcept>
#include <vector>

#include "kv/block_pool.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "kv/paged_kv_cache.h"

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
  REQUIRE(kv.adopt_cached_prefix(1, prompt) == 0);
  REQUIRE(kv.reserve(1, 40));
  REQUIRE(kv.block_table(1).size() == 3);
  kv.cache_computed(1, prompt, 40);
  REQUIRE(kv.pool().num_cached() == 2);

  // Same prompt: the two full blocks are shared.
  REQUIRE(kv.adopt_cached_prefix(2, prompt) == 32);
  REQUIRE(kv.reserve(2, 40));
  const auto t1 = kv.block_table(1);
  const auto t2 = kv.block_table(2);
  REQUIRE(t1[0] == t2[0]);
  REQUIRE(t1[1] == t2[1]);
  REQUIRE(t1[2] != t2[2]);
  REQUIRE(kv.pool().ref_count(t1[0]) == 2);

  // A prompt of exactly two blocks reuses only the first: its last token must be computed.
  const auto exact = iota_tokens(32);
  REQUIRE(kv.adopt_cached_prefix(3, exact) == 16);

  kv.free(1);
  kv.free(2);
  kv.free(3);
  REQUIRE(kv.num_free_blocks() == 8);
  // Freed but cached: a later request still hits.
  REQUIRE(kv.adopt_cached_prefix(4, prompt) == 32);
  REQUIRE(kv.prefix_hit_tokens() == 32 + 16 + 32);
  kv.free(4);
}

TEST_CASE("reserve is all or nothing and prefix caching can be switched off", "[kv]") {
  KvCacheManager kv(3, 16, /*enable_prefix_caching=*/false);
  REQUIRE(kv.reserve(1, 33));
  REQUIRE(kv.num_free_blocks() == 0);
  REQUIRE_FALSE(kv.reserve(2, 1));
  REQUIRE_FALSE(kv.has(2));
  kv.cache_computed(1, iota_tokens(33), 33);
  REQUIRE(kv.pool().num_cached() == 0);
  kv.free(1);
  REQUIRE(kv.adopt_cached_prefix(3, iota_tokens(33)) == 0);
  REQUIRE(kv.usage() == 0.0);
}

TEST_CASE("KV memory carries its dtype: BF16 halves the bytes and only the matching typed view is given", "[kv]") {
  const KvGeometry g{2, 2, 16, 16};
  REQUIRE(g.bytes_per_token(KvDtype::f32) == 2 * 2 * 2 * 16 * sizeof(float));
  REQUIRE(g.bytes_per_token(KvDtype::bf16) * 2 == g.bytes_per_token(KvDtype::f32));

  KvCacheManager manager(3, 16, false);
  PagedKvCache f32(g, manager, KvDtype::f32), bf16(g, manager, KvDtype::bf16);
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
}
