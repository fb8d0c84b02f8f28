#pragma once
// Owned, aligned, optionally NUMA-bound memory for weights, activations and the KV pool.
// Small buffers are 64-byte aligned (one cache line, one zmm). Buffers of 2 MiB or more are
// 2 MiB aligned and their whole 2 MiB pages advised as transparent huge pages, which cuts TLB
// misses when kernels stream hundreds of MB of packed weights; the partly used last 2 MiB stays
// in 4 KiB pages, so that only the bytes asked for become resident.
#include <cstddef>
#include <utility>

namespace slab {

inline constexpr size_t kCacheLine = 64;
inline constexpr size_t kHugePage = size_t{2} << 20;

struct AllocOptions {
  int numa_node = -1;      // OS index of the node to bind to; -1: first touch decides
  bool huge_pages = true;  // 2 MiB alignment + MADV_HUGEPAGE for buffers >= 2 MiB
  bool zero = false;       // fill with zeros (also faults the pages in, on the binding node)
};

// Raw form: returns nullptr only for bytes == 0; throws std::bad_alloc when memory is short.
// Free with aligned_free(ptr). Alignment is at least 64 bytes.
void* aligned_alloc_bytes(size_t bytes, const AllocOptions& options = {});
void aligned_free(void* ptr) noexcept;

// RAII owner of one such allocation.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes, const AllocOptions& options = {})
      : data_(aligned_alloc_bytes(bytes, options)), size_(bytes) {}
  ~AlignedBuffer() { aligned_free(data_); }
  AlignedBuffer(AlignedBuffer&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  AlignedBuffer& operator=(AlignedBuffer&& o) noexcept {
    if (this != &o) {
      aligned_free(data_);
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;

  void* data() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace slab
