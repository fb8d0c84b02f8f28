#include "runtime/task_team.h"

#include <algorithm>
#include <exception>
#include <system_error>
#include <thread>

#include "runtime/topology.h"

namespace slab {

TaskTeam::TaskTeam(int threads, std::vector<std::vector<int>> cpu_sets)
    : threads_(std::max(1, threads)), cpu_sets_(std::move(cpu_sets)) {}

void TaskTeam::for_shares(int units, int min_units, const std::function<void(int, int)>& fn) const {
  if (units <= 0) return;
  const int shares = std::clamp(units / std::max(1, min_units), 1, threads_);
  if (shares == 1) {
    fn(0, units);
    return;
  }
  const auto share = [&](int s, int* lo, int* hi) {
    const int q = units / shares, r = units % shares;
    *lo = s * q + std::min(s, r);
    *hi = *lo + q + (s < r ? 1 : 0);
  };
  std::vector<std::exception_ptr> errors(static_cast<size_t>(shares));
  const auto run_share = [&](int s) {
    try {
      int lo = 0, hi = 0;
      share(s, &lo, &hi);
      fn(lo, hi);
    } catch (...) {
      errors[static_cast<size_t>(s)] = std::current_exception();
    }
  };
  std::vector<std::thread> workers;
  workers.reserve(static_cast<size_t>(shares - 1));
  int spawned = 1;
  try {
    for (; spawned < shares; ++spawned) {
      workers.emplace_back([&, s = spawned] {
        try {  // best effort, as the pool's pinning: an unbound share still packs the same bytes
          if (static_cast<size_t>(s) < cpu_sets_.size() && !cpu_sets_[static_cast<size_t>(s)].empty()) {
            (void)Topology::system().bind_current_thread(cpu_sets_[static_cast<size_t>(s)]);
          }
        } catch (...) {
        }
        run_share(s);
      });
    }
  } catch (const std::system_error&) {
    // No more threads (a container's limit): the caller runs the shares that have none.
  }
  run_share(0);
  for (int s = spawned; s < shares; ++s) run_share(s);
  for (std::thread& w : workers) w.join();
  for (const std::exception_ptr& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

}  // namespace slab
