#pragma once
// Scratch: a 64-byte aligned array that only grows, for activations sized per step.
#include <algorithm>
#include <cstddef>

#include "runtime/aligned_buffer.h"

namespace slab {

// Contents are not kept when it grows.
template <typename T>
class Scratch {
 public:
  T* get(size_t count) {
    if (count > capacity_) {
      buf_ = AlignedBuffer(std::max<size_t>(count, 1) * sizeof(T));
      capacity_ = count;
    }
    return buf_.as<T>();
  }

 private:
  AlignedBuffer buf_;
  size_t capacity_ = 0;
};

}  // namespace slab
