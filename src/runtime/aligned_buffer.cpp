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
  if (huge) {
    // Huge pages for the whole 2 MiB pages only (advisory: THP may be off). A huge page over the
    // partly used last one would make all of it resident: 6 MiB of every layer of a W4 model,
    // 20 % of its weights' memory, where three of a layer's four matrices end mid-page.
    const size_t whole = bytes / kHugePage * kHugePage;
    (void)madvise(p, whole, MADV_HUGEPAGE);
    if (whole < rounded) (void)madvise(static_cast<char*>(p) + whole, rounded - whole, MADV_NOHUGEPAGE);
  }
#endif
  if (bind) {
    // Binding applies to pages not yet faulted in; aligned_alloc of a large block is fresh mmap.
    (void)Topology::system().bind_memory(p, rounded, options.numa_node);
  }
  if (options.zero) std::memset(p, 0, bytes);  // the rest of the last page is never touched
  return p;
}

void aligned_free(void* ptr) noexcept { std::free(ptr); }

}  // namespace slab
