#include "runtime/topology.h"

#include <hwloc.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace slab {
namespace {

hwloc_topology_t as_topo(void* p) { return static_cast<hwloc_topology_t>(p); }

struct Bitmap {
  hwloc_bitmap_t b = hwloc_bitmap_alloc();
  Bitmap() = default;
  Bitmap(const Bitmap&) = delete;
  Bitmap& operator=(const Bitmap&) = delete;
  ~Bitmap() { hwloc_bitmap_free(b); }
};

std::string human_bytes(size_t bytes) {
  if (bytes == 0) return "?";
  if (bytes % (1024 * 1024) == 0) return std::to_string(bytes / (1024 * 1024)) + " MiB";
  return std::to_string(bytes / 1024) + " KiB";
}

}  // namespace

std::vector<int> parse_cpu_list(std::string_view list) {
  std::vector<int> cpus;
  auto fail = [&]() -> std::invalid_argument {
    return std::invalid_argument("malformed cpu list '" + std::string(list) + "'");
  };
  size_t pos = 0;
  auto skip_space = [&] {
    while (pos < list.size() && std::isspace(static_cast<unsigned char>(list[pos]))) ++pos;
  };
  auto number = [&]() -> int {
    skip_space();
    int value = 0;
    const char* begin = list.data() + pos;
    const char* end = list.data() + list.size();
    const auto [ptr, ec] = std::from_chars(begin, end, value);
    if (ec != std::errc() || ptr == begin || value < 0 || value > 1 << 20) throw fail();
    pos += static_cast<size_t>(ptr - begin);
    skip_space();
    return value;
  };
  skip_space();
  if (pos == list.size()) throw fail();
  while (pos < list.size()) {
    const int lo = number();
    int hi = lo;
    if (pos < list.size() && list[pos] == '-') {
      ++pos;
      hi = number();
      if (hi < lo) throw fail();
    }
    for (int c = lo; c <= hi; ++c) cpus.push_back(c);
    if (pos < list.size()) {
      if (list[pos] != ',') throw fail();
      ++pos;
      skip_space();
      if (pos == list.size()) throw fail();
    }
  }
  std::sort(cpus.begin(), cpus.end());
  cpus.erase(std::unique(cpus.begin(), cpus.end()), cpus.end());
  return cpus;
}

std::string format_cpu_list(const std::vector<int>& cpus) {
  std::string out;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(cpus[i]);
    if (j > i) out += '-' + std::to_string(cpus[j]);
    i = j + 1;
  }
  return out;
}

std::string TopologyInfo::summary() const {
  std::string s = std::to_string(cores.size()) + " cores (" + std::to_string(n_pus) + " PUs) on " +
                  std::to_string(numa_nodes.size()) + " NUMA node" + (numa_nodes.size() == 1 ? "" : "s");
  s += "; L1d " + human_bytes(l1d_bytes) + ", L2 " + human_bytes(l2_bytes) + ", L3 " + human_bytes(l3_bytes);
  return s;
}

Topology& Topology::system() {
  static Topology topology(Source::kSystem, "");
  return topology;
}

std::unique_ptr<Topology> Topology::from_synthetic(const std::string& description) {
  return std::unique_ptr<Topology>(new Topology(Source::kSynthetic, description));
}

std::unique_ptr<Topology> Topology::from_xml(const std::string& path) {
  return std::unique_ptr<Topology>(new Topology(Source::kXml, path));
}

Topology::Topology(Source source, const std::string& arg) {
  hwloc_topology_t t = nullptr;
  if (hwloc_topology_init(&t) != 0) throw std::runtime_error("hwloc_topology_init failed");
  if (source == Source::kSynthetic && hwloc_topology_set_synthetic(t, arg.c_str()) != 0) {
    hwloc_topology_destroy(t);
    throw std::invalid_argument("hwloc rejects the synthetic topology '" + arg + "'");
  }
  if (source == Source::kXml && hwloc_topology_set_xml(t, arg.c_str()) != 0) {
    hwloc_topology_destroy(t);
    throw std::invalid_argument("hwloc cannot read the topology XML file '" + arg + "'");
  }
  if (hwloc_topology_load(t) != 0) {
    hwloc_topology_destroy(t);
    throw std::runtime_error("hwloc_topology_load failed");
  }
  topo_ = t;
}

Topology::~Topology() { hwloc_topology_destroy(as_topo(topo_)); }

int Topology::n_numa_nodes() const {
  const int n = hwloc_get_nbobjs_by_type(as_topo(topo_), HWLOC_OBJ_NUMANODE);
  return n > 0 ? n : 1;
}

TopologyInfo Topology::process_info() const {
  hwloc_topology_t t = as_topo(topo_);
  Bitmap set;
  if (hwloc_get_cpubind(t, set.b, HWLOC_CPUBIND_PROCESS) != 0) {
    hwloc_bitmap_copy(set.b, hwloc_topology_get_allowed_cpuset(t));
  }
  hwloc_bitmap_and(set.b, set.b, hwloc_topology_get_allowed_cpuset(t));
  return info_for_set(set.b);
}

TopologyInfo Topology::info_for(std::string_view cpu_list) const {
  hwloc_topology_t t = as_topo(topo_);
  Bitmap set;
  for (int cpu : parse_cpu_list(cpu_list)) hwloc_bitmap_set(set.b, static_cast<unsigned>(cpu));
  hwloc_bitmap_and(set.b, set.b, hwloc_topology_get_allowed_cpuset(t));
  if (hwloc_bitmap_iszero(set.b)) {
    throw std::invalid_argument("cpu list '" + std::string(cpu_list) + "' selects no cpu this process may use");
  }
  return info_for_set(set.b);
}

TopologyInfo Topology::info_for_set(const void* cpuset_ptr) const {
  hwloc_topology_t t = as_topo(topo_);
  const auto cpuset = static_cast<hwloc_const_cpuset_t>(cpuset_ptr);
  TopologyInfo info;
  info.n_pus = hwloc_bitmap_weight(cpuset);
  const int n_cores = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE);
  for (int i = 0; i < n_cores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(t, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    if (!core || !hwloc_bitmap_intersects(core->cpuset, cpuset)) continue;
    CoreInfo ci;
    ci.logical_index = static_cast<int>(core->logical_index);
    Bitmap inside;
    hwloc_bitmap_and(inside.b, core->cpuset, cpuset);
    for (int pu = hwloc_bitmap_first(inside.b); pu >= 0; pu = hwloc_bitmap_next(inside.b, pu)) {
      ci.os_cpus.push_back(pu);
    }
    const int node = hwloc_bitmap_first(core->nodeset);
    ci.numa_node = node >= 0 ? node : 0;
    if (hwloc_obj_t l3 = hwloc_get_ancestor_obj_by_type(t, HWLOC_OBJ_L3CACHE, core)) {
      ci.l3_index = static_cast<int>(l3->logical_index);
    }
    if (std::find(info.numa_nodes.begin(), info.numa_nodes.end(), ci.numa_node) == info.numa_nodes.end()) {
      info.numa_nodes.push_back(ci.numa_node);
    }
    if (info.l1d_bytes == 0 || info.l2_bytes == 0 || info.l3_bytes == 0) {
      for (hwloc_obj_t p = core->parent; p; p = p->parent) {
        if (!hwloc_obj_type_is_cache(p->type) || !p->attr) continue;
        const auto& c = p->attr->cache;
        if (c.type == HWLOC_OBJ_CACHE_INSTRUCTION) continue;
        if (c.depth == 1 && info.l1d_bytes == 0) info.l1d_bytes = c.size;
        if (c.depth == 2 && info.l2_bytes == 0) info.l2_bytes = c.size;
        if (c.depth == 3 && info.l3_bytes == 0) info.l3_bytes = c.size;
      }
    }
    info.cores.push_back(std::move(ci));
  }
  // Machines where hwloc reports no cores (rare VMs): one core per PU.
  if (info.cores.empty()) {
    for (int pu = hwloc_bitmap_first(cpuset); pu >= 0; pu = hwloc_bitmap_next(cpuset, pu)) {
      info.cores.push_back(CoreInfo{pu, 0, -1, {pu}});
    }
    info.numa_nodes = {0};
  }
  std::sort(info.numa_nodes.begin(), info.numa_nodes.end());
  return info;
}

bool Topology::bind_current_thread(const std::vector<int>& os_cpus) const {
  if (os_cpus.empty()) return false;
  Bitmap set;
  for (int cpu : os_cpus) hwloc_bitmap_set(set.b, static_cast<unsigned>(cpu));
  return hwloc_set_cpubind(as_topo(topo_), set.b, HWLOC_CPUBIND_THREAD) == 0;
}

std::vector<int> Topology::current_thread_cpus() const {
  Bitmap set;
  std::vector<int> cpus;
  if (hwloc_get_cpubind(as_topo(topo_), set.b, HWLOC_CPUBIND_THREAD) != 0) return cpus;
  for (int cpu = hwloc_bitmap_first(set.b); cpu >= 0; cpu = hwloc_bitmap_next(set.b, cpu)) cpus.push_back(cpu);
  return cpus;
}

bool Topology::bind_memory(void* addr, size_t len, int node) const {
  hwloc_topology_t t = as_topo(topo_);
  if (n_numa_nodes() <= 1 || node < 0 || len == 0) return true;
  Bitmap nodeset;
  hwloc_bitmap_set(nodeset.b, static_cast<unsigned>(node));
  return hwloc_set_area_membind(t, addr, len, nodeset.b, HWLOC_MEMBIND_BIND, HWLOC_MEMBIND_BYNODESET) == 0;
}

}  // namespace slab
