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

// The runs of `run` units a thread takes under a shared counter: its first run is its own (thread
// t starts at t · run) and the counter deals the runs after the first n_threads. Every thread
// starts a parallel region at the same moment, so a first claim from the counter would queue
// them all on one cache line (one transfer after another: ~1 µs at 16 threads, more with more
// cores); their later claims come spread out in time. *cursor is 0 before the parallel region.
class RunCounter {
 public:
  RunCounter(int* cursor, int thread, int n_threads, int units, int run)
      : cursor_(cursor), units_(units), run_(std::max(1, run)),
        dealt_from_(static_cast<long long>(std::max(1, n_threads)) * std::max(1, run)),
        first_(static_cast<long long>(thread) * std::max(1, run)) {}
  // The start of this thread's next run, or -1 when none is left.
  int claim() {
    long long start = first_;
    if (start >= 0) {
      first_ = -1;
    } else {
      start = dealt_from_ + std::atomic_ref<int>(*cursor_).fetch_add(run_, std::memory_order_relaxed);
    }
    return start < units_ ? static_cast<int>(start) : -1;
  }
  int run() const { return run_; }

 private:
  int* cursor_;
  int units_;
  int run_;
  long long dealt_from_;  // runs [0, n_threads · run) are the threads' first ones
  long long first_;       // this thread's first run; -1 once taken
};

// Calls fn(lo, hi) on this thread's ranges of [0, units): its static share when cursor is null,
// else runs of `run` units (RunCounter: its own first, then from *cursor) until none are left.
template <typename Fn>
void for_each_share(int* cursor, int thread, int n_threads, int units, int run, Fn&& fn) {
  if (!cursor) {
    const Range r = chunk(units, n_threads, thread);
    if (r.hi > r.lo) fn(r.lo, r.hi);
    return;
  }
  RunCounter runs(cursor, thread, n_threads, units, run);
  for (int lo = runs.claim(); lo >= 0; lo = runs.claim()) fn(lo, std::min(units, lo + runs.run()));
}

// This thread's tasks of [0, units), one at a time in the order it will run them: its static
// share when cursor is null, else tasks dealt by a RunCounter over *cursor. A task is a run of `run` units
// starting at the int the stream hands out, up to end(start) (run 1: single units). next() tells
// the task after the current one before the current one ends, so that its work can prefetch the
// next task's data (with the counter, "the next task" is whatever the counter hands this thread,
// not current + 1: prefetching current + 1 warmed the other core's task). Under the counter
// next() claims that task when first asked: ask late in the current task (its last K block or
// tile), so the claim holds back little of the counter's balancing.
class TaskStream {
 public:
  TaskStream(int* cursor, int thread, int n_threads, int units, int run = 1)
      : cursor_(cursor), units_(units), run_(std::max(1, run)), counter_(cursor, thread, n_threads, units, run) {
    if (cursor_) {
      current_ = counter_.claim();
    } else {
      const Range r = chunk(units, n_threads, thread);
      current_ = r.hi > r.lo ? r.lo : -1;
      static_end_ = r.hi;
    }
  }
  int current() const { return current_; }  // -1: none left
  // One past the last unit of the task starting at `start` (current() or next()).
  int end(int start) const { return std::min(start + run_, cursor_ ? units_ : static_end_); }
  int next() {
    if (current_ < 0) return -1;
    if (!cursor_) return current_ + run_ < static_end_ ? current_ + run_ : -1;
    if (!next_claimed_) {
      next_ = counter_.claim();
      next_claimed_ = true;
    }
    return next_;
  }
  int advance() {
    current_ = next();
    next_claimed_ = false;
    return current_;
  }

 private:
  int* cursor_;
  int units_;
  int run_;
  RunCounter counter_;
  int current_ = -1, static_end_ = 0, next_ = -1;
  bool next_claimed_ = false;
};

}  // namespace slab::kern::detail
