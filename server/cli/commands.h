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
Command add_serve_command(CLI::App& app);
Command add_topology_command(CLI::App& app);

// What serve and generate say when --model is missing. The binary has no default model:
// scripts/serve.sh picks one for the quick start.
inline constexpr const char* kNoModelMessage =
    "no --model given: pass --model DIR, a Hugging Face model folder (config.json, *.safetensors, "
    "tokenizer.json or tokenizer.model), or --model FILE.gguf; scripts/serve.sh serves the tiny test model "
    "../shared/testdata/models/stories260K when it is given no --model";

}  // namespace slab::cli
