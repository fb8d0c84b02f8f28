#include "kv/kv_cache.h"

#include <stdexcept>

namespace slab {

KvCache::KvCache(const KvGeometry& geometry, int num_blocks, KvDtype dtype, int numa_node)
    : geometry_(geometry), dtype_(dtype), num_blocks_(num_blocks) {
  if (geometry.block_size <= 0 || num_blocks <= 0) {
    throw std::invalid_argument("KvCache: block_size and the number of blocks must be > 0");
  }
  AllocOptions o;
  o.zero = true;  // 0 is 0.0 in both dtypes; also faults the pages in, on the bound node
  o.numa_node = numa_node;
  pool_ = AlignedBuffer(static_cast<size_t>(num_blocks) * geometry.block_stride() * kv_dtype_bytes(dtype), o);
}

float* KvCache::pool_f32() {
  if (dtype_ != KvDtype::f32) throw std::logic_error("KV cache holds bf16, not float32");
  return static_cast<float*>(pool_bytes());
}

kern::bf16_t* KvCache::pool_bf16() {
  if (dtype_ != KvDtype::bf16) throw std::logic_error("KV cache holds float32, not bf16");
  return static_cast<kern::bf16_t*>(pool_bytes());
}

}  // namespace slab
