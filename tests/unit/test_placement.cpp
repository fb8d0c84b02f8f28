// resolve_placement (--cpuset, --numa-node, --threads) over hwloc synthetic machines: which cores
// the pool gets, which node memory is bound to, and the error each bad value gives.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "runtime/placement.h"
#include "runtime/topology.h"

using namespace slab;
using Catch::Matchers::Contains;
using Catch::Matchers::StartsWith;

namespace {

// Two sockets, one NUMA node each, 4 L3 groups of 8 cores, SMT: core i has PUs 2i and 2i + 1,
// so node 0 holds cpus 0-63 (cores 0-31) and node 1 cpus 64-127 (cores 32-63).
const char* kTwoNodes = "pack:2 [numa] l3:4 core:8 pu:2";
// NPS4-like: two sockets of 4 nodes, each node 2 L3 groups of 4 cores; Linux numbering puts the
// second hardware thread of core i at i + 64, so node n holds cores 8n..8n+7.
const char* kNps4 = "pack:2 numa:4 l3:2 core:4 pu:2(indexes=2*64:1*2)";

Placement place(const char* machine, const std::string& cpuset, int numa_node, int threads) {
  const std::unique_ptr<Topology> topology = Topology::from_synthetic(machine);
  return resolve_placement(*topology, cpuset, numa_node, threads);
}

}  // namespace

TEST_CASE("placement: no flags gives every core of the process, memory unbound", "[placement]") {
  const Placement p = place(kTwoNodes, "", -1, 0);
  CHECK(p.threads() == 64);
  CHECK(p.cpu_list() == "0-127");
  CHECK(p.numa_node == -1);
  CHECK(p.cores[1].os_cpus == std::vector<int>{2, 3});
}

TEST_CASE("placement: --numa-node keeps that node's cores and binds memory to it", "[placement]") {
  const Placement p = place(kTwoNodes, "", 1, 0);
  CHECK(p.threads() == 32);
  CHECK(p.cpu_list() == "64-127");
  CHECK(p.numa_node == 1);
  for (const CoreInfo& core : p.cores) CHECK(core.numa_node == 1);

  const Placement nps4 = place(kNps4, "", 5, 0);
  CHECK(nps4.threads() == 8);
  CHECK(nps4.cpu_list() == "40-47,104-111");
  CHECK(nps4.numa_node == 5);
}

TEST_CASE("placement: --cpuset picks cores by any listed hardware thread and keeps only those", "[placement]") {
  const Placement p = place(kTwoNodes, "0,2,4-5", -1, 0);
  REQUIRE(p.threads() == 3);
  CHECK(p.cores[0].os_cpus == std::vector<int>{0});
  CHECK(p.cores[1].os_cpus == std::vector<int>{2});
  CHECK(p.cores[2].os_cpus == std::vector<int>{4, 5});
  CHECK(p.numa_node == -1);
}

TEST_CASE("placement: --cpuset and --numa-node intersect", "[placement]") {
  const Placement p = place(kTwoNodes, "56-71", 1, 0);
  CHECK(p.cpu_list() == "64-71");
  CHECK(p.threads() == 4);
  CHECK(p.numa_node == 1);

  const Placement nps4 = place(kNps4, "0-127", 2, 0);
  CHECK(nps4.cpu_list() == "16-23,80-87");
}

TEST_CASE("placement: --threads takes the first N cores of the selection", "[placement]") {
  CHECK(place(kTwoNodes, "", 1, 3).cpu_list() == "64-69");
  CHECK(place(kNps4, "", 5, 2).cpu_list() == "40-41,104-105");
  CHECK(place(kTwoNodes, "8-15", -1, 4).threads() == 4);
  CHECK(place(kTwoNodes, "8-15", -1, 4).cpu_list() == "8-15");
  CHECK(place(kTwoNodes, "", -1, 64).threads() == 64);
}

TEST_CASE("placement: each bad value is refused with the flag and value first", "[placement]") {
  const std::unique_ptr<Topology> two = Topology::from_synthetic(kTwoNodes);
  const Topology& t = *two;
  CHECK_THROWS_WITH(resolve_placement(t, "3-1", -1, 0), StartsWith("--cpuset 3-1: not a cpu list"));
  CHECK_THROWS_WITH(resolve_placement(t, "a", -1, 0), StartsWith("--cpuset a: not a cpu list"));
  CHECK_THROWS_WITH(resolve_placement(t, "1,,2", -1, 0), StartsWith("--cpuset 1,,2: "));
  CHECK_THROWS_WITH(resolve_placement(t, "200-201", -1, 0),
                    StartsWith("--cpuset 200-201: cpu(s) 200-201 are not among") && Contains("(0-127)"));
  // Partly outside is refused too, naming only the cpus outside.
  CHECK_THROWS_WITH(resolve_placement(t, "120-130", -1, 0), StartsWith("--cpuset 120-130: cpu(s) 128-130 "));
  CHECK_THROWS_WITH(resolve_placement(t, "", 7, 0),
                    StartsWith("--numa-node 7: no such NUMA node") && Contains("nodes 0-1"));
  CHECK_THROWS_WITH(resolve_placement(t, "", -2, 0), StartsWith("--numa-node -2: "));
  CHECK_THROWS_WITH(resolve_placement(t, "0-3", 1, 0), StartsWith("--numa-node 1: none of the selected cpus (0-3)"));
  CHECK_THROWS_WITH(resolve_placement(t, "", -1, -1), StartsWith("--threads -1: "));
  CHECK_THROWS_WITH(resolve_placement(t, "", 0, 33), StartsWith("--threads 33: only 32 core(s) selected (cpus 0-63)"));
  CHECK_THROWS_WITH(resolve_placement(t, "0-3", -1, 3), StartsWith("--threads 3: only 2 core(s)"));
  CHECK_THROWS_AS(resolve_placement(t, "", 7, 0), std::invalid_argument);
}

TEST_CASE("placement: thread bindings read as one phrase for the start-up log", "[placement]") {
  CHECK(describe_thread_bindings({{0}}) == "1 thread pinned to cpu 0");
  CHECK(describe_thread_bindings({{0, 1}}) == "1 thread pinned to cpus 0-1");
  CHECK(describe_thread_bindings({{0}, {1}, {2}, {3}}) == "4 threads pinned one per core to cpus 0-3");
  CHECK(describe_thread_bindings({{}, {}}) == "2 threads, not pinned");
  CHECK(describe_thread_bindings({{}, {5}, {6}}) == "3 threads, 2 pinned one per core to cpus 5-6");
}
