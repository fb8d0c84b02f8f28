#include "placement_flags.h"

#include <iostream>
#include <string>

namespace slab::cli {

void add_placement_flags(CLI::App& cmd, api::PlacementOptions& flags) {
  // Checked by resolve_placement rather than CLI11 validators, so bad values exit 2 with a
  // message naming the flag, whether they come from the command line or a --config file.
  cmd.add_option("--threads", flags.threads,
                 "Compute threads, one pinned per physical core: the first N of the cores --cpuset and --numa-node "
                 "select (0: all of them). More than those cores is an error")
      ->type_name("N")
      ->capture_default_str();
  cmd.add_option("--cpuset", flags.cpuset,
                 "OS cpus to compute on, as a Linux cpu list (\"0-3,8\"); every one must be in the process's own "
                 "cpuset (taskset/numactl/container), which is the default. The pool gets one thread per physical "
                 "core among them; HTTP threads are not pinned")
      ->type_name("LIST");
  cmd.add_option("--numa-node", flags.numa_node,
                 "Compute only on the cores of NUMA node N (within --cpuset or the process's cpus) and bind the "
                 "weights and the KV cache to its memory (-1: no binding, memory follows first touch; one-node "
                 "machines need nothing)")
      ->type_name("N")
      ->capture_default_str();
}

bool check_placement_or_report(const api::PlacementOptions& flags) {
  const std::string error = api::check_placement(flags);
  if (!error.empty()) std::cerr << "error: " << error << "\n";
  return error.empty();
}

}  // namespace slab::cli
