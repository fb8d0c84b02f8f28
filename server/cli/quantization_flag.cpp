#include "quantization_flag.h"

namespace slab::cli {

void add_quantization_flags(CLI::App& cmd, api::LoadOptions& load) {
  cmd.add_option("--quantization", load.quantization,
                 "Weights of the linear projections (q/k/v/o, gate/up, down): auto (BF16, but a GGUF file's quantized "
                 "projections and output head run on the INT8/INT4 kernels, repacked from the blocks), none (BF16 "
                 "everywhere), w8 (INT8 per output "
                 "channel; also int8, w8a8), w8g32 (INT8 groups of 32, the layout of llama.cpp's Q8_0), w4 (INT4 "
                 "groups of 32; also int4, w4a8), "
                 "w4g128 (INT4 groups of 128); these four quantize at load with round-to-nearest. The embedding "
                 "table and the output head stay BF16 unless they are a GGUF file's quantized ones or "
                 "--quantize-lm-head is given")
      ->type_name("MODE")
      ->capture_default_str();
  // A callback rather than a negated flag: CLI11 prints a negated flag's value as "{false}" in --help.
  cmd.add_flag_callback(
      "--no-amx", [&load] { load.amx = false; },
      "Keep the linears and attention on the AVX-512 register tiles where the CPU has AMX (default: the "
      "AMX tiles past the decode sizes: BF16 weights from 9 rows on AMX-BF16, quantized ones from 16-32 "
      "rows by format on AMX-INT8 or AMX-BF16)");
  cmd.add_flag("--quantize-lm-head", load.quantize_lm_head,
               "With w8/w8g32/w4/w4g128: quantize the output head and the embedding table too (one table when "
               "they are tied; rows are dequantized one token at a time)");
}

}  // namespace slab::cli
