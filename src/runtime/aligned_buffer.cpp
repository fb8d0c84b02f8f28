#include "runtime/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/topology.h"

namespace slab {

void* aligned_alloc_bytes(size_t bytes, const AllocOptions& options) {
  if (bytes == 0) return nullptr;
  const bool huge = options.huge_pages && bytes >= kHugePage;
  const bool bind = options.numa_node >= 0 && bytes >= 4096;  // mbind needs whole pages
  const size_t align = huge ? kHugePage : (bind ? size_t{4096} : kCacheLine);
  const size_t rounded = (bytes + align - 1) / align * align;  // std::aligned_alloc needs a multiple
  void* p = std::aligned_alloc(align, rounded);
  if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
  if (huge) (void)madvise(p, rounded, MADV_HUGEPAGE);  // advisory: THP may be off
#endif
  if (bind) {
    // Binding applies to pages not yet faulted in; aligned_alloc of a large block is fresh mmap.
    (void)Topology::system().bind_memory(p, rounded, options.numa_node);
  }
  if (options.zero) std::memset(p, 0, rounded);
  return p;
}

void aligned_free(void* ptr) noexcept { std::free(ptr); }

}  // namespace slab
