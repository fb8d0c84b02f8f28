#pragma once
// How the kernels deal work out to threads: contiguous static shares, or runs of units taken
// from a shared counter (dynamic). Dynamic is the default wherever a caller provides the counter:
// on a shared or virtualised machine one core can run at half speed for a while (a co-tenant on
// its SMT sibling, the host's other work), and a static split then makes every thread wait for
// it. Measured on the 2-core Zen 4 with a busy loop on the second core (bench_linear_bf16, M =
// 512 down projection): 28.8 ms alone either way; 61.1 ms with static shares, 39.9 ms with the
// counter, which loses only the slowed core's missing share.
#include <algorithm>
#include <atomic>

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

// Calls fn(lo, hi) on this thread's ranges of [0, units): its static share when cursor is null,
// else runs of `run` units taken from *cursor (0 before the parallel region) until none are left.
template <typename Fn>
void for_each_share(int* cursor, int thread, int n_threads, int units, int run, Fn&& fn) {
  if (!cursor) {
    const Range r = chunk(units, n_threads, thread);
    if (r.hi > r.lo) fn(r.lo, r.hi);
    return;
  }
  std::atomic_ref<int> next(*cursor);
  for (int lo = next.fetch_add(run, std::memory_order_relaxed); lo < units;
       lo = next.fetch_add(run, std::memory_order_relaxed)) {
    fn(lo, std::min(units, lo + run));
  }
}

}  // namespace slab::kern::detail
