#pragma once
// Projections packed for the INT8/INT4 kernels (kernels/linear_quant.h): quantized at load with
// round-to-nearest from BF16/F16/F32 tensors (--quantization w8|w8g32|w4|w4g128), or repacked from a
// GGUF file's Q8_0/Q4_0 blocks without requantizing (Q4_0 is W4 g32 symmetric with zero 8, Q8_0
// is W8 g32 symmetric; only the FP16 block scale is rounded to the kernels' BF16 scale, a
// relative error of at most 2^-9 per block).
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/linear_quant.h"
#include "model/checkpoint.h"
#include "runtime/aligned_buffer.h"

namespace slab {

// How the linear projections (q/k/v/o, gate/up, down) are held. Embeddings, norms and the output
// head stay BF16/FP32 in every mode.
//  automatic: BF16, except a GGUF file's Q8_0/Q4_0 projections, repacked as they are
//  none:      BF16 everywhere (GGUF blocks decoded)
//  w8:        W8 per output channel, symmetric, RTN at load;  w8g32: groups of 32 (Q8_0's layout)
//  w4:        W4 groups of 32, symmetric, RTN at load;  w4g128: groups of 128
enum class WeightQuantization { automatic, none, w8, w8g32, w4, w4g128 };
std::optional<WeightQuantization> parse_weight_quantization(std::string_view text);
const char* weight_quantization_name(WeightQuantization q);
// For messages: "auto, none, w8, w8g32, w4 or w4g128", and the RTN (load-time) modes alone.
const char* weight_quantization_choices();
const char* rtn_quantization_choices();
// The kernels' format for the RTN modes; nullopt for automatic and none.
std::optional<kern::QuantFormat> rtn_quant_format(WeightQuantization q);
// "W8 per-channel", "W4 g32", "W4 g128 zero-point"...
std::string quant_format_name(const kern::QuantFormat& f);

// The format Q8_0/Q4_0 parts repack into: W4 g32 when all are Q4_0, W8 g32 when all are Q8_0 or
// Q4_0 (a Q4_0 value q - 8 is an exact W8 code); nullopt when some part has no such blocks.
std::optional<kern::QuantFormat> block_repack_format(const std::vector<TensorView>& parts);

// The [n_i, k] parts stacked along N into one quantized matrix, into `dst`
// (kern::packed_quant_bytes(f, Σn_i, k) bytes).
void pack_stacked_rtn(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f);
// Same from the parts' blocks; f from block_repack_format.
void pack_stacked_blocks(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f);

}  // namespace slab
