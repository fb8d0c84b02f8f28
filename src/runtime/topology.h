#pragma once
// The machine as this process may use it, read through hwloc: physical cores of the process's
// cpuset (or of an explicit cpuset string such as "0-3,8"), NUMA nodes, cache sizes; pinning of
// threads to cores. hwloc types stay inside topology.cpp.
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace slab {

// Parses a Linux cpu list ("0-3,8", "2", "0-7,16-23", whitespace tolerated) into sorted, unique
// OS processor indices. Throws std::invalid_argument on malformed input ("3-1", "a", "1,,2").
std::vector<int> parse_cpu_list(std::string_view list);

// The inverse: sorted indices to the shortest list string ("0-3,8").
std::string format_cpu_list(const std::vector<int>& cpus);

struct CoreInfo {
  int logical_index = 0;     // hwloc's index of the core in the machine
  int numa_node = 0;         // OS index of the NUMA node holding the core (0 when unknown)
  int l3_index = -1;         // logical index of the core's L3 (a CCD on AMD); -1 when unknown
  std::vector<int> os_cpus;  // the core's hardware threads (OS indices) inside the cpuset
};

struct TopologyInfo {
  std::vector<CoreInfo> cores;  // physical cores intersecting the cpuset, in machine order
  std::vector<int> numa_nodes;  // OS indices of the NUMA nodes those cores belong to
  int n_pus = 0;                // hardware threads in the cpuset
  size_t l1d_bytes = 0;         // per core (0 when unknown)
  size_t l2_bytes = 0;          // per core
  size_t l3_bytes = 0;          // of the first L3 covering the cpuset
  std::string summary() const;  // "2 cores (2 PUs) on 1 NUMA node; L1d 48 KiB, L2 1 MiB, L3 32 MiB"
};

class Topology {
 public:
  // The process-wide loaded hwloc topology (loaded on first use; thread-safe).
  static Topology& system();
  // A described machine instead of this one (partition tests, planning for another host):
  // an hwloc synthetic string ("pack:2 [numa] l3:16 core:8 pu:2") or an XML file from lstopo.
  // Binding through these is a no-op. Throw std::invalid_argument when hwloc rejects the input.
  static std::unique_ptr<Topology> from_synthetic(const std::string& description);
  static std::unique_ptr<Topology> from_xml(const std::string& path);
  ~Topology();

  // Cores of the process's current CPU binding (sched_getaffinity / cgroup cpuset).
  TopologyInfo process_info() const;
  // Cores of an explicit cpu list intersected with the allowed cpus; throws
  // std::invalid_argument when the list is malformed or selects no allowed cpu.
  TopologyInfo info_for(std::string_view cpu_list) const;

  // Binds the calling thread to the given OS cpus (all hardware threads of one core, usually).
  // Returns false (and leaves the binding unchanged) when the OS refuses.
  bool bind_current_thread(const std::vector<int>& os_cpus) const;
  // The OS cpus the calling thread may run on now (empty when the OS does not say).
  std::vector<int> current_thread_cpus() const;

  // Binds [addr, addr + len) to NUMA node `node` (OS index). No-op returning true when the
  // machine has one NUMA node. Returns false when the OS refuses.
  bool bind_memory(void* addr, size_t len, int node) const;
  int n_numa_nodes() const;

  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

 private:
  enum class Source { kSystem, kSynthetic, kXml };
  Topology(Source source, const std::string& arg);
  TopologyInfo info_for_set(const void* cpuset) const;
  void* topo_ = nullptr;  // hwloc_topology_t
};

}  // namespace slab
