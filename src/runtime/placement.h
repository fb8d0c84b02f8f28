#pragma once
// Where one instance computes and keeps its memory, from the operator's --cpuset, --numa-node and
// --threads: the physical cores its thread pool pins one worker to each, and the NUMA node its
// weights and KV cache are bound to. Pure: nothing is bound here.
#include <string>
#include <string_view>
#include <vector>

#include "runtime/topology.h"

namespace slab {

struct Placement {
  std::vector<CoreInfo> cores;  // the chosen physical cores, machine order: one pool thread each
  int numa_node = -1;           // OS index of the node memory is bound to; -1: no binding (first touch)

  int threads() const { return static_cast<int>(cores.size()); }
  std::vector<int> cpus() const;  // every hardware thread of the chosen cores, sorted
  std::string cpu_list() const;   // cpus() as a Linux cpu list ("0-3,8"): ThreadPoolOptions::cpu_list
};

// Chooses the cores, among those of the process's cpuset (taskset, numactl, a container's):
//   cpuset     "" for all of them, else a Linux cpu list; every cpu in it must be one the process
//              may use. A core counts when any of its hardware threads is listed; only the listed
//              ones are used.
//   numa_node  -1 for any node, else only the cores on that node; memory is then bound to it.
//   threads    0 for all the cores chosen above, else the first `threads` of them (more is an
//              error: a pool thread per core is the point, oversubscribing only slows it down).
// Throws std::invalid_argument whose message starts with the flag and the value at fault
// ("--cpuset 99-100: ..."), for a malformed or disallowed cpuset, an unknown NUMA node or one
// without chosen cores, and threads < 0 or more than the cores chosen.
Placement resolve_placement(const Topology& topology, std::string_view cpuset, int numa_node, int threads);

// One phrase for logs from ThreadPool::bindings(): "1 thread pinned to cpu 0", "8 threads pinned one
// per core to cpus 0-7", "2 threads, not pinned" (or "4 threads, 3 pinned ..." when some are not).
std::string describe_thread_bindings(const std::vector<std::vector<int>>& bindings);

}  // namespace slab
