#pragma once
// How to split one machine into serving instances (docs/ARCHITECTURE.md "Deployment"): given the cores of a
// topology and the operator's wishes, the cpuset, memory node(s) and reserved HTTP core of each
// instance. Pure: no binding happens here; scripts/launch-multi.sh applies the result.
#include <string>
#include <vector>

#include "runtime/topology.h"

namespace slab {

struct PartitionOptions {
  int instances = 0;               // 0: one per NUMA node (or as many as fit cores_per_instance)
  int cores_per_instance = 0;      // compute cores each; 0: all the instance's share
  bool reserve_http_core = false;  // one more core per instance, kept off the compute cpuset
};

struct InstancePlan {
  std::vector<int> cpus;          // OS index of one PU per compute core (SMT siblings left idle)
  std::vector<int> numa_nodes;    // where its memory goes: the nodes of its compute cores
  int http_cpu = -1;              // PU of the reserved HTTP core; -1 when none was asked for
  std::string cpu_list() const;   // cpus as a Linux cpu list ("0-7,16")
  std::string node_list() const;  // numa_nodes likewise ("0" or "0-1")
};

// Throws std::invalid_argument with the reason when the request cannot be met (more instances
// than cores, cores_per_instance larger than an instance's share, ...).
std::vector<InstancePlan> partition(const TopologyInfo& topo, const PartitionOptions& options);

}  // namespace slab
