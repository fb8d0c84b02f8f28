#pragma once
// How the linear kernels deal work out to threads: contiguous static shares, and the run length
// of the dynamic decode share (threads take runs of panels from a shared counter).
#include <algorithm>

namespace slab::kern::detail {

struct Range {
  int lo, hi;
};

// Part `part` of [0, n) cut into `parts` contiguous shares differing by at most one.
inline Range chunk(int n, int parts, int part) {
  const int q = n / parts, r = n % parts;
  const int lo = part * q + std::min(part, r);
  return {lo, lo + q + (part < r ? 1 : 0)};
}

// Units a thread takes from the decode counter at a time: at most max_run, but small enough that
// every thread gets about 4 runs. A fixed run of 8 panels left 6 of 16 threads idle on
// TinyLlama's 80-panel QKV (the 16-core Xeon decoded at 0.69x llama.cpp for it).
inline int decode_run(int units, int n_threads, int max_run) {
  return std::clamp(units / (4 * std::max(1, n_threads)), 1, max_run);
}

}  // namespace slab::kern::detail
