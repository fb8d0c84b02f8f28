#pragma once
// Speculative decoding's flags (vLLM V0's names) on every command that runs the engine (serve,
// generate); also --config keys. Values are checked by api::check_load_options.
#include <CLI/CLI.hpp>

#include "slabserve/options.h"

namespace slab::cli {

void add_speculative_flags(CLI::App& cmd, api::EngineOptions& engine);

}  // namespace slab::cli
