#include "quantization_flag.h"

#include <iostream>

namespace slab::cli {

void add_quantization_flag(CLI::App& cmd, std::string& value) {
  cmd.add_option("--quantization", value,
                 "Weights of the linear projections (q/k/v/o, gate/up, down): auto (BF16, but a GGUF file's Q8_0/Q4_0 "
                 "projections run on the INT8/INT4 kernels as they are), none (BF16 everywhere), w8 (INT8 per output "
                 "channel), w4 (INT4 groups of 32), w4g128 (INT4 groups of 128); w8/w4 quantize at load with "
                 "round-to-nearest. Embeddings and the output head stay BF16")
      ->type_name("MODE")
      ->capture_default_str();
}

bool apply_quantization_or_report(const std::string& value, RunnerOptions& options) {
  const std::optional<WeightQuantization> q = parse_weight_quantization(value);
  if (!q) {
    std::cerr << "error: --quantization " << value << ": expected auto, none, w8, w4 or w4g128\n";
    return false;
  }
  options.quantization = *q;
  return true;
}

}  // namespace slab::cli
