#pragma once
// --quantization auto|none|w8|w4|w4g128 on every command that runs the model (serve, generate,
// bench); also a --config key. The modes are model/packed_quant.h's WeightQuantization.
#include <CLI/CLI.hpp>

#include <string>

#include "model/model_runner.h"

namespace slab::cli {

void add_quantization_flag(CLI::App& cmd, std::string& value);

// Sets options.quantization from `value`, or writes "error: --quantization ..." to stderr and
// returns false (the command then exits 2). Checked here rather than by a CLI11 validator so a
// bad value from a --config file reads the same.
bool apply_quantization_or_report(const std::string& value, RunnerOptions& options);

}  // namespace slab::cli
