#include "runtime/placement.h"

#include <algorithm>
#include <stdexcept>

namespace slab {
namespace {

std::invalid_argument flag_error(const std::string& flag, const std::string& value, const std::string& reason) {
  return std::invalid_argument(flag + " " + value + ": " + reason);
}

std::vector<int> cpus_of(const std::vector<CoreInfo>& cores) {
  std::vector<int> cpus;
  for (const CoreInfo& core : cores) cpus.insert(cpus.end(), core.os_cpus.begin(), core.os_cpus.end());
  std::sort(cpus.begin(), cpus.end());
  return cpus;
}

bool contains(const std::vector<int>& sorted, int value) {
  return std::binary_search(sorted.begin(), sorted.end(), value);
}

// The process's cores restricted to the listed cpus (each core keeps only its listed threads).
std::vector<CoreInfo> cores_in_cpuset(const std::vector<CoreInfo>& allowed, std::string_view cpuset) {
  const std::string value(cpuset);
  std::vector<int> wanted;
  try {
    wanted = parse_cpu_list(cpuset);
  } catch (const std::invalid_argument&) {
    throw flag_error("--cpuset", value, "not a cpu list (expected e.g. 0-3,8)");
  }
  const std::vector<int> allowed_cpus = cpus_of(allowed);
  std::vector<int> outside;
  for (int cpu : wanted) {
    if (!contains(allowed_cpus, cpu)) outside.push_back(cpu);
  }
  if (!outside.empty()) {
    throw flag_error("--cpuset", value,
                     "cpu(s) " + format_cpu_list(outside) + " are not among the cpus this process may use (" +
                         format_cpu_list(allowed_cpus) + ")");
  }
  std::vector<CoreInfo> chosen;
  for (const CoreInfo& core : allowed) {
    CoreInfo inside = core;
    inside.os_cpus.clear();
    for (int cpu : core.os_cpus) {
      if (contains(wanted, cpu)) inside.os_cpus.push_back(cpu);
    }
    if (!inside.os_cpus.empty()) chosen.push_back(std::move(inside));
  }
  return chosen;
}

}  // namespace

std::vector<int> Placement::cpus() const { return cpus_of(cores); }

std::string Placement::cpu_list() const { return format_cpu_list(cpus()); }

Placement resolve_placement(const Topology& topology, std::string_view cpuset, int numa_node, int threads) {
  if (threads < 0) throw flag_error("--threads", std::to_string(threads), "expected 0 (one per core) or more");
  if (numa_node < -1) throw flag_error("--numa-node", std::to_string(numa_node), "expected a node index (0 or more)");
  const TopologyInfo process = topology.process_info();
  Placement placement;
  placement.cores = cpuset.empty() ? process.cores : cores_in_cpuset(process.cores, cpuset);

  if (numa_node >= 0) {
    const std::vector<int>& nodes = process.numa_nodes;
    if (std::find(nodes.begin(), nodes.end(), numa_node) == nodes.end()) {
      throw flag_error("--numa-node", std::to_string(numa_node),
                       "no such NUMA node among this process's cpus (nodes " + format_cpu_list(nodes) + ")");
    }
    const std::string selected = format_cpu_list(cpus_of(placement.cores));
    std::erase_if(placement.cores, [numa_node](const CoreInfo& core) { return core.numa_node != numa_node; });
    if (placement.cores.empty()) {
      throw flag_error("--numa-node", std::to_string(numa_node),
                       "none of the selected cpus (" + selected + ") is on that node (check --cpuset)");
    }
    placement.numa_node = numa_node;
  }

  if (threads > placement.threads()) {
    throw flag_error("--threads", std::to_string(threads),
                     "only " + std::to_string(placement.threads()) + " core(s) selected (cpus " + placement.cpu_list() +
                         "); pass at most that, or 0 for one thread per core");
  }
  if (threads > 0) placement.cores.resize(static_cast<size_t>(threads));
  return placement;
}

std::string describe_thread_bindings(const std::vector<std::vector<int>>& bindings) {
  const size_t n = bindings.size();
  std::vector<int> cpus;
  size_t pinned = 0;
  for (const std::vector<int>& b : bindings) {
    cpus.insert(cpus.end(), b.begin(), b.end());
    pinned += b.empty() ? 0 : 1;
  }
  std::sort(cpus.begin(), cpus.end());
  const std::string threads = std::to_string(n) + (n == 1 ? " thread" : " threads");
  if (pinned == 0) return threads + ", not pinned";
  const std::string where = (cpus.size() == 1 ? "cpu " : "cpus ") + format_cpu_list(cpus);
  if (n == 1) return threads + " pinned to " + where;
  return (pinned == n ? threads : threads + ", " + std::to_string(pinned)) + " pinned one per core to " + where;
}

}  // namespace slab
