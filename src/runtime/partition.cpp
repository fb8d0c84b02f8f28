#include "runtime/partition.h"

#include <algorithm>
#include <stdexcept>

namespace slab {
namespace {

using Slice = std::vector<const CoreInfo*>;  // consecutive cores in machine order

std::string cores_word(size_t n) { return std::to_string(n) + (n == 1 ? " core" : " cores"); }

std::vector<Slice> cores_by_node(const TopologyInfo& topo) {
  std::vector<Slice> nodes;
  for (int node : topo.numa_nodes) {
    Slice s;
    for (const CoreInfo& c : topo.cores) {
      if (c.numa_node == node) s.push_back(&c);
    }
    if (!s.empty()) nodes.push_back(std::move(s));
  }
  return nodes;
}

// Splits a pool into k consecutive slices. Whole L3 groups (CCDs) per slice when their count
// divides by k, so no instance shares an L3 with another; otherwise core counts as even as
// possible (the first slices get one more).
std::vector<Slice> split(const Slice& pool, int k) {
  const size_t n = static_cast<size_t>(k);
  std::vector<size_t> group_starts;
  for (size_t i = 0; i < pool.size(); ++i) {
    if (i == 0 || pool[i]->l3_index != pool[i - 1]->l3_index) group_starts.push_back(i);
  }
  std::vector<size_t> bounds;  // n + 1 cut points into pool
  if (group_starts.size() % n == 0) {
    const size_t per = group_starts.size() / n;
    for (size_t j = 0; j < n; ++j) bounds.push_back(group_starts[j * per]);
  } else {
    for (size_t j = 0, at = 0; j < n; ++j) {
      bounds.push_back(at);
      at += pool.size() / n + (j < pool.size() % n ? 1 : 0);
    }
  }
  bounds.push_back(pool.size());
  std::vector<Slice> out;
  for (size_t j = 0; j < n; ++j) {
    out.emplace_back(pool.begin() + static_cast<std::ptrdiff_t>(bounds[j]),
                     pool.begin() + static_cast<std::ptrdiff_t>(bounds[j + 1]));
  }
  return out;
}

std::vector<Slice> choose_slices(const TopologyInfo& topo, const PartitionOptions& o, size_t per) {
  std::vector<Slice> nodes = cores_by_node(topo);
  std::vector<Slice> slices;
  if (o.instances == 0 && per == 0) return nodes;
  if (o.instances == 0) {
    // As many instances of `per` cores as fit in each node; none straddles two nodes.
    size_t largest = 0;
    for (const Slice& node : nodes) {
      largest = std::max(largest, node.size());
      for (size_t at = 0; at + per <= node.size(); at += per) {
        slices.emplace_back(node.begin() + static_cast<std::ptrdiff_t>(at),
                            node.begin() + static_cast<std::ptrdiff_t>(at + per));
      }
    }
    if (slices.empty()) {
      throw std::invalid_argument("an instance needs " + cores_word(per) + " but the largest NUMA node has " +
                                  cores_word(largest));
    }
    return slices;
  }
  const size_t n = static_cast<size_t>(o.instances);
  if (n > topo.cores.size()) {
    throw std::invalid_argument("cannot run " + std::to_string(n) + " instances on " + cores_word(topo.cores.size()) +
                                ": at most one instance per core");
  }
  // Instances stay inside NUMA nodes when they spread evenly over them; otherwise they span.
  const bool per_node = n % nodes.size() == 0 && std::all_of(nodes.begin(), nodes.end(), [&](const Slice& s) {
                          return s.size() >= n / nodes.size();
                        });
  if (per_node) {
    for (const Slice& node : nodes) {
      for (Slice& s : split(node, static_cast<int>(n / nodes.size()))) slices.push_back(std::move(s));
    }
  } else {
    Slice all;
    for (const CoreInfo& c : topo.cores) all.push_back(&c);
    slices = split(all, static_cast<int>(n));
  }
  if (per > 0) {
    for (size_t i = 0; i < slices.size(); ++i) {
      if (slices[i].size() < per) {
        throw std::invalid_argument(std::to_string(n) + " instances of " + cores_word(per) + " do not fit: instance " +
                                    std::to_string(i) + "'s share has " + cores_word(slices[i].size()));
      }
      slices[i].resize(per);
    }
  }
  return slices;
}

}  // namespace

std::string InstancePlan::cpu_list() const { return format_cpu_list(cpus); }
std::string InstancePlan::node_list() const { return format_cpu_list(numa_nodes); }

std::vector<InstancePlan> partition(const TopologyInfo& topo, const PartitionOptions& options) {
  if (options.instances < 0 || options.cores_per_instance < 0) {
    throw std::invalid_argument("--instances and --cores-per-instance must not be negative");
  }
  if (topo.cores.empty()) throw std::invalid_argument("the topology has no cores");
  const size_t reserve = options.reserve_http_core ? 1 : 0;
  const size_t per = options.cores_per_instance > 0 ? static_cast<size_t>(options.cores_per_instance) + reserve : 0;
  std::vector<InstancePlan> plans;
  for (Slice& slice : choose_slices(topo, options, per)) {
    InstancePlan plan;
    if (reserve) {
      if (slice.size() < 2) {
        throw std::invalid_argument("--reserve-http-core needs at least 2 cores per instance; instance " +
                                    std::to_string(plans.size()) + " has 1");
      }
      // The last core: the first ones stay together on the instance's first L3.
      plan.http_cpu = slice.back()->os_cpus.front();
      slice.pop_back();
    }
    for (const CoreInfo* c : slice) {
      plan.cpus.push_back(c->os_cpus.front());
      plan.numa_nodes.push_back(c->numa_node);
    }
    std::sort(plan.cpus.begin(), plan.cpus.end());
    std::sort(plan.numa_nodes.begin(), plan.numa_nodes.end());
    plan.numa_nodes.erase(std::unique(plan.numa_nodes.begin(), plan.numa_nodes.end()), plan.numa_nodes.end());
    plans.push_back(std::move(plan));
  }
  return plans;
}

}  // namespace slab
