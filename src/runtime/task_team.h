#pragma once
// Short-lived threads for one-off parallel work outside the forward pass: packing a checkpoint's
// matrices at load. Not the ThreadPool, which must be created by the thread that will drive it
// (it pins its caller as worker 0) and lives for the runner's life; a team's threads live for one
// for_shares() call. Each share is a contiguous range, so work whose units write disjoint output
// (a matrix's panels) gives the same bytes on any number of threads.
#include <functional>
#include <vector>

namespace slab {

class TaskTeam {
 public:
  // `threads` in all, the caller counting as one. cpu_sets[t] (OS cpu indices), when given and
  // not empty, binds worker t >= 1 while it works: first touch then places the pages it writes
  // on the NUMA node of the cores that will read them. The caller is never rebound.
  explicit TaskTeam(int threads, std::vector<std::vector<int>> cpu_sets = {});
  int size() const { return threads_; }

  // fn(lo, hi) on [0, units) cut into up to size() contiguous shares of at least min_units
  // units each; the caller runs the first share. Returns when all are done; rethrows the first
  // exception a share threw (the other shares still finish first).
  void for_shares(int units, int min_units, const std::function<void(int, int)>& fn) const;

 private:
  int threads_ = 1;
  std::vector<std::vector<int>> cpu_sets_;
};

}  // namespace slab
