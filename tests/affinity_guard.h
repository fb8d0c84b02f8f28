#pragma once
// The calling thread's cpus, saved and given back at the end of a scope. A ThreadPool pins the
// thread that constructs it and gives the cpus back only when it ends on that thread; one that
// ends elsewhere (a draft runner's own pool replaced by the engine's) leaves the test thread on
// one core, and a later test that needs two cores would skip. widen() lets the thread run on
// every cpu the process may use (the kernel keeps the cgroup's cpuset) for the scope.
#include <sched.h>

namespace slab::test {

struct AffinityGuard {
  cpu_set_t saved;
  AffinityGuard() { sched_getaffinity(0, sizeof(saved), &saved); }
  ~AffinityGuard() { sched_setaffinity(0, sizeof(saved), &saved); }
  AffinityGuard(const AffinityGuard&) = delete;
  AffinityGuard& operator=(const AffinityGuard&) = delete;
  void widen() const {
    cpu_set_t all;
    CPU_ZERO(&all);
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &all);
    sched_setaffinity(0, sizeof(all), &all);
  }
};

}  // namespace slab::test
