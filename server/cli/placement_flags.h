#pragma once
// --threads, --cpuset and --numa-node: the same three flags, help text and checks on every
// command that runs the model (serve, generate, bench). The rules are resolve_placement's.
#include <CLI/CLI.hpp>

#include <optional>
#include <string>

#include "model/model_runner.h"
#include "runtime/placement.h"

namespace slab::cli {

struct PlacementFlags {
  int threads = 0;
  std::string cpuset;
  int numa_node = -1;
};

void add_placement_flags(CLI::App& cmd, PlacementFlags& flags);

// The placement on this machine, or nullopt after writing "error: --flag value: reason" to
// stderr (the command then exits 2).
std::optional<Placement> resolve_placement_or_report(const PlacementFlags& flags);

// Runner options that put the thread pool and the weights where `placement` says.
RunnerOptions runner_options_for(const Placement& placement);

}  // namespace slab::cli
