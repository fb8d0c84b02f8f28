#include "quantization_flag.h"

#include <iostream>

namespace slab::cli {

void add_quantization_flags(CLI::App& cmd, QuantizationFlags& flags) {
  cmd.add_option("--quantization", flags.mode,
                 "Weights of the linear projections (q/k/v/o, gate/up, down): auto (BF16, but a GGUF file's Q8_0/Q4_0 "
                 "projections run on the INT8/INT4 kernels as they are), none (BF16 everywhere), w8 (INT8 per output "
                 "channel), w4 (INT4 groups of 32), w4g128 (INT4 groups of 128); w8/w4 quantize at load with "
                 "round-to-nearest. Embeddings and the output head stay BF16")
      ->type_name("MODE")
      ->capture_default_str();
  cmd.add_flag("--quantize-lm-head", flags.lm_head,
               "With w8/w4/w4g128: quantize the output head too (a tied embedding then keeps its own BF16 copy)");
}

bool apply_quantization_or_report(const QuantizationFlags& flags, RunnerOptions& options) {
  const std::optional<WeightQuantization> q = parse_weight_quantization(flags.mode);
  if (!q) {
    std::cerr << "error: --quantization " << flags.mode << ": expected auto, none, w8, w4 or w4g128\n";
    return false;
  }
  if (flags.lm_head && !rtn_quant_format(*q)) {
    std::cerr << "error: --quantize-lm-head needs --quantization w8, w4 or w4g128\n";
    return false;
  }
  options.quantization = *q;
  options.quantize_lm_head = flags.lm_head;
  return true;
}

}  // namespace slab::cli
