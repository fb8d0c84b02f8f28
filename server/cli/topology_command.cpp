// `slabserve topology`: the machine as hwloc sees it (or a described one: --synthetic, --xml) and
// how it would be split into instances. scripts/launch-multi.sh reads the --json form.
#include <nlohmann/json.hpp>

#include <iostream>
#include <memory>
#include <set>

#include "commands.h"
#include "slabserve/topology.h"

namespace slab::cli {
namespace {

struct TopologyOptions {
  std::string synthetic;
  std::string xml;
  api::PartitionOptions partition;
  bool json = false;
};

int run_topology(const TopologyOptions& o) {
  std::unique_ptr<api::Topology> described;
  if (!o.synthetic.empty()) described = api::Topology::from_synthetic(o.synthetic);
  if (!o.xml.empty()) described = api::Topology::from_xml(o.xml);
  // This machine: only the cpus this process may use (a container's or taskset's cpuset).
  const api::TopologyInfo info = (described ? *described : api::Topology::system()).process_info();
  const std::vector<api::InstancePlan> plans = api::partition(info, o.partition);

  std::set<int> l3s;
  for (const api::CoreInfo& c : info.cores) {
    if (c.l3_index >= 0) l3s.insert(c.l3_index);
  }
  if (o.json) {
    nlohmann::json out;
    out["machine"] = {{"summary", info.summary()},
                      {"cores", info.cores.size()},
                      {"pus", info.n_pus},
                      {"numa_nodes", info.numa_nodes},
                      {"l3_groups", l3s.size()}};
    out["instances"] = nlohmann::json::array();
    for (size_t i = 0; i < plans.size(); ++i) {
      const api::InstancePlan& p = plans[i];
      out["instances"].push_back({{"index", i},
                                  {"cpus", p.cpu_list()},
                                  {"cores", p.cpus.size()},
                                  {"numa_nodes", p.node_list()},
                                  {"http_cpu", p.http_cpu >= 0 ? nlohmann::json(p.http_cpu) : nlohmann::json()}});
    }
    std::cout << out.dump(2) << "\n";
    return 0;
  }
  std::cout << "machine: " << info.summary() << "; L3 groups: " << l3s.size() << "\n"
            << "partition: " << plans.size() << (plans.size() == 1 ? " instance\n" : " instances\n");
  for (size_t i = 0; i < plans.size(); ++i) {
    const api::InstancePlan& p = plans[i];
    std::cout << "  instance " << i << ": cpus " << p.cpu_list() << " (" << p.cpus.size() << " cores), memory on node "
              << p.node_list() << ", http core " << (p.http_cpu >= 0 ? std::to_string(p.http_cpu) : "none") << "\n";
  }
  return 0;
}

}  // namespace

Command add_topology_command(CLI::App& app) {
  auto options = std::make_shared<TopologyOptions>();
  CLI::App* cmd =
      app.add_subcommand("topology", "Print the machine's cores and NUMA nodes and how to split them into instances");
  auto* synthetic =
      cmd->add_option("--synthetic", options->synthetic,
                      "Describe a machine instead: hwloc synthetic string, e.g. \"pack:2 [numa] l3:16 core:8 pu:2\"");
  cmd->add_option("--xml", options->xml, "Describe a machine instead: hwloc XML file (lstopo out.xml)")
      ->check(CLI::ExistingFile)
      ->excludes(synthetic);
  cmd->add_option("--instances", options->partition.instances,
                  "Number of instances (default: one per NUMA node, or as many as --cores-per-instance allows)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--cores-per-instance", options->partition.cores_per_instance,
                  "Compute cores per instance (default: the instance's whole share)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--reserve-http-core", options->partition.reserve_http_core,
                "Keep one more core per instance off its compute cpuset, for the HTTP front end");
  cmd->add_flag("--json", options->json, "Print JSON (what scripts/launch-multi.sh reads)");
  return [cmd, options]() { return cmd->parsed() ? run_topology(*options) : -1; };
}

}  // namespace slab::cli
