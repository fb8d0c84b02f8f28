// The instance partition over hwloc synthetic topologies of the machines slabserve is deployed on:
// which cpus, memory nodes and HTTP core each instance gets (docs/ARCHITECTURE.md "Deployment").
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/partition.h"
#include "runtime/topology.h"
#include "test_paths.h"

using namespace slab;

namespace {

// Two EPYC 9755 sockets: 128 Zen 5 cores each, in 16 CCDs (L3 groups) of 8, SMT on. PU numbering
// as Linux does it: core i has PUs i and i + 256.
const char* kEpycNps1 = "pack:2 [numa] l3:16 core:8 pu:2(indexes=2*256:1*2)";
// NPS4: four NUMA nodes per socket, each holding 4 CCDs (32 cores).
const char* kEpycNps4 = "pack:2 numa:4 l3:4 core:8 pu:2(indexes=2*256:1*2)";
// A 24-core Genoa VM: one socket, one NUMA node, 3 CCDs of 8 cores.
const char* kGenoaVm = "pack:1 [numa] l3:3 core:8 pu:1";
const char* kGenoaVmSmt = "pack:1 [numa] l3:3 core:8 pu:2(indexes=2*24:1*2)";

std::vector<InstancePlan> plan(const char* synthetic, int instances = 0, int cores = 0, bool reserve = false) {
  const TopologyInfo info = Topology::from_synthetic(synthetic)->process_info();
  return partition(info, PartitionOptions{instances, cores, reserve});
}

std::vector<std::string> cpu_lists(const std::vector<InstancePlan>& plans) {
  std::vector<std::string> out;
  for (const InstancePlan& p : plans) out.push_back(p.cpu_list());
  return out;
}

std::vector<std::string> node_lists(const std::vector<InstancePlan>& plans) {
  std::vector<std::string> out;
  for (const InstancePlan& p : plans) out.push_back(p.node_list());
  return out;
}

std::vector<int> http_cpus(const std::vector<InstancePlan>& plans) {
  std::vector<int> out;
  for (const InstancePlan& p : plans) out.push_back(p.http_cpu);
  return out;
}

using Lists = std::vector<std::string>;

}  // namespace

TEST_CASE("synthetic topologies load with their cores, nodes and CCDs", "[deploy]") {
  const TopologyInfo nps4 = Topology::from_synthetic(kEpycNps4)->process_info();
  CHECK(nps4.cores.size() == 256);
  CHECK(nps4.n_pus == 512);
  CHECK(nps4.numa_nodes == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(nps4.cores[0].os_cpus == std::vector<int>{0, 256});
  CHECK(nps4.cores[255].numa_node == 7);
  CHECK(nps4.cores[8].l3_index == 1);
  CHECK_THROWS_AS(Topology::from_synthetic("pack:2 bogus:3"), std::invalid_argument);
}

TEST_CASE("default partition is one instance per NUMA node on its physical cores", "[deploy]") {
  auto nps1 = plan(kEpycNps1);
  CHECK(cpu_lists(nps1) == Lists{"0-127", "128-255"});  // first PU of each core: no SMT siblings
  CHECK(node_lists(nps1) == Lists{"0", "1"});
  CHECK(http_cpus(nps1) == std::vector<int>{-1, -1});

  auto nps4 = plan(kEpycNps4);
  CHECK(cpu_lists(nps4) == Lists{"0-31", "32-63", "64-95", "96-127", "128-159", "160-191", "192-223", "224-255"});
  CHECK(node_lists(nps4) == Lists{"0", "1", "2", "3", "4", "5", "6", "7"});

  CHECK(cpu_lists(plan(kGenoaVm)) == Lists{"0-23"});
  CHECK(cpu_lists(plan(kGenoaVmSmt)) == Lists{"0-23"});
  CHECK(node_lists(plan(kGenoaVmSmt)) == Lists{"0"});
}

TEST_CASE("instances split evenly along CCD boundaries where possible", "[deploy]") {
  CHECK(cpu_lists(plan(kEpycNps1, 4)) == Lists{"0-63", "64-127", "128-191", "192-255"});
  CHECK(node_lists(plan(kEpycNps1, 4)) == Lists{"0", "0", "1", "1"});
  auto per_ccd = plan(kEpycNps1, 32);
  REQUIRE(per_ccd.size() == 32);
  CHECK(per_ccd[0].cpu_list() == "0-7");
  CHECK(per_ccd[17].cpu_list() == "136-143");
  // 16 CCDs do not divide by 3: even core counts instead, still one node each.
  CHECK(cpu_lists(plan(kEpycNps1, 6)) == Lists{"0-42", "43-85", "86-127", "128-170", "171-213", "214-255"});

  CHECK(cpu_lists(plan(kEpycNps4, 16))[1] == "16-31");
  // Fewer instances than nodes: each spans whole nodes and binds memory to all of them.
  CHECK(cpu_lists(plan(kEpycNps4, 2)) == Lists{"0-127", "128-255"});
  CHECK(node_lists(plan(kEpycNps4, 2)) == Lists{"0-3", "4-7"});
  CHECK(node_lists(plan(kEpycNps1, 1)) == Lists{"0-1"});

  CHECK(cpu_lists(plan(kGenoaVm, 3)) == Lists{"0-7", "8-15", "16-23"});
  CHECK(cpu_lists(plan(kGenoaVm, 2)) == Lists{"0-11", "12-23"});
  CHECK(cpu_lists(plan(kGenoaVmSmt, 3)) == Lists{"0-7", "8-15", "16-23"});
  CHECK(plan(kGenoaVm, 24).back().cpu_list() == "23");
}

TEST_CASE("cores per instance fills each NUMA node or trims each share", "[deploy]") {
  auto sixteen = plan(kEpycNps1, 0, 16);
  REQUIRE(sixteen.size() == 16);
  CHECK(sixteen[0].cpu_list() == "0-15");
  CHECK(sixteen[8].cpu_list() == "128-143");
  CHECK(sixteen[8].node_list() == "1");
  CHECK(cpu_lists(plan(kGenoaVm, 0, 10)) == Lists{"0-9", "10-19"});
  CHECK(cpu_lists(plan(kEpycNps1, 2, 8)) == Lists{"0-7", "128-135"});
  CHECK(cpu_lists(plan(kEpycNps4, 0, 30)).size() == 8);  // one per node, 2 cores left in each
}

TEST_CASE("reserve http core takes one more core per instance off the compute cpuset", "[deploy]") {
  auto nps1 = plan(kEpycNps1, 0, 0, true);
  CHECK(cpu_lists(nps1) == Lists{"0-126", "128-254"});
  CHECK(http_cpus(nps1) == std::vector<int>{127, 255});

  auto vm = plan(kGenoaVm, 3, 0, true);
  CHECK(cpu_lists(vm) == Lists{"0-6", "8-14", "16-22"});
  CHECK(http_cpus(vm) == std::vector<int>{7, 15, 23});

  auto sized = plan(kEpycNps1, 2, 8, true);
  CHECK(cpu_lists(sized) == Lists{"0-7", "128-135"});
  CHECK(http_cpus(sized) == std::vector<int>{8, 136});
  CHECK(cpu_lists(plan(kGenoaVm, 0, 7, true)) == Lists{"0-6", "8-14", "16-22"});
}

TEST_CASE("impossible requests fail with the reason", "[deploy]") {
  CHECK_THROWS_WITH(plan(kEpycNps1, 257), "cannot run 257 instances on 256 cores: at most one instance per core");
  CHECK_THROWS_WITH(plan(kGenoaVm, 25), Catch::Contains("25 instances on 24 cores"));
  CHECK_THROWS_WITH(plan(kEpycNps1, 0, 200), "an instance needs 200 cores but the largest NUMA node has 128 cores");
  CHECK_THROWS_WITH(plan(kEpycNps1, 2, 128, true), Catch::Contains("instance 0's share has 128 cores"));
  CHECK_THROWS_WITH(plan(kGenoaVm, 24, 0, true), Catch::Contains("--reserve-http-core needs at least 2 cores"));
  CHECK_THROWS_WITH(plan(kGenoaVm, -1), Catch::Contains("must not be negative"));
}

TEST_CASE("an lstopo XML file partitions like the synthetic machine it was saved from", "[deploy]") {
  // Made with: lstopo --input "pack:1 [numa] l3:3(size=32MiB) core:8 pu:2(indexes=2*24:1*2)" --of xml
  const auto xml = Topology::from_xml((test::fixtures_dir() / "topology" / "genoa-24c-vm-smt.xml").string());
  const TopologyInfo info = xml->process_info();
  CHECK(info.l3_bytes == 32u << 20);
  CHECK(cpu_lists(partition(info, PartitionOptions{3, 0, true})) == Lists{"0-6", "8-14", "16-22"});
  CHECK_THROWS_AS(Topology::from_xml("/nonexistent/topology.xml"), std::invalid_argument);
}
