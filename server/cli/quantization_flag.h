#pragma once
// --quantization auto|none|w8|w4|w4g128 and --quantize-lm-head on every command that runs the
// model (serve, generate, bench); also --config keys. The modes are model/packed_quant.h's
// WeightQuantization.
#include <CLI/CLI.hpp>

#include <string>

#include "model/model_runner.h"

namespace slab::cli {

struct QuantizationFlags {
  std::string mode = "auto";
  bool lm_head = false;
};

void add_quantization_flags(CLI::App& cmd, QuantizationFlags& flags);

// Sets options.quantization and quantize_lm_head from `flags`, or writes "error: --quantization ..." to stderr and
// returns false (the command then exits 2). Checked here rather than by a CLI11 validator so a
// bad value from a --config file reads the same.
bool apply_quantization_or_report(const QuantizationFlags& flags, RunnerOptions& options);

}  // namespace slab::cli
