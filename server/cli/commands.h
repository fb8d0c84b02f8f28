#pragma once
// The subcommands of the slabserve binary. Each registers its options on the CLI11 app and runs
// when chosen; main() only dispatches.
#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>

namespace slab::cli {

// Returns the command's exit code when run.
using Command = std::function<int()>;

Command add_generate_command(CLI::App& app);
Command add_bench_command(CLI::App& app);
Command add_serve_command(CLI::App& app);
Command add_topology_command(CLI::App& app);

// The model folder to use when --model is not given: the tiny real model in the shared test data
// beside the checkout, if it is there. Empty when it is not.
std::filesystem::path default_model_dir();

}  // namespace slab::cli
