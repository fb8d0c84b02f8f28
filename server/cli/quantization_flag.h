#pragma once
// --quantization auto|none|w8|w8g32|w4|w4g128, --quantize-lm-head and --no-amx (the weights'
// kernels) on every command that runs the model (serve, generate); also --config keys. Values are checked by api::check_load_options, so
// a bad value from a --config file reads the same as one from the command line.
#include <CLI/CLI.hpp>

#include "slabserve/options.h"

namespace slab::cli {

void add_quantization_flags(CLI::App& cmd, api::LoadOptions& load);

}  // namespace slab::cli
