#pragma once
// --threads, --cpuset and --numa-node: the same three flags, help text and checks on every
// command that runs the model (serve, generate). The rules are the API's (check_placement).
#include <CLI/CLI.hpp>

#include "slabserve/options.h"

namespace slab::cli {

void add_placement_flags(CLI::App& cmd, api::PlacementOptions& flags);

// True when the placement resolves on this machine; else false after writing
// "error: --flag value: reason" to stderr (the command then exits 2).
bool check_placement_or_report(const api::PlacementOptions& flags);

}  // namespace slab::cli
