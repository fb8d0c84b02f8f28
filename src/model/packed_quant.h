#pragma once
// Projections packed for the INT8/INT4 kernels (kernels/linear_quant.h): quantized at load with
// round-to-nearest from BF16/F16/F32 tensors (--quantization w8|w8g32|w4|w4g128), or repacked from a
// GGUF file's quantized blocks. Every 32 elements of a block format are codes under one affine map
// y = d·code + offset (model/gguf_blocks.h), which is the kernels' y = scale·(code − zero) with
// scale d and zero −offset/d: Q4_0 is W4 g32 symmetric (zero 8), Q8_0 and Q5_0 W8 g32 symmetric;
// Q4_1 (a free minimum) W4 g32 with zero points, Q5_1 W8 g32 with zero points.
// Only the FP16 block scale (and the zero) are rounded to BF16, a relative error of at most 2^-8.
// Matrices all Q4_K, all Q5_K or all Q6_K keep their super-blocks: the kernels' K-quant formats,
// exact.
// Q6_K stacked with another type (a Q4_K_M QKV) is requantized to W8 g32 round-to-nearest from its
// values (8 bits for its 6: at most 1/254 of the group's largest value), the Q4_K parts there W8
// g32 with zero points.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/linear_quant.h"
#include "model/checkpoint.h"
#include "runtime/aligned_buffer.h"
#include "runtime/task_team.h"

namespace slab {

// How the linear projections (q/k/v/o, gate/up, down) are held. Embeddings and norms stay
// BF16/FP32 in every mode, and so does the output head, except a GGUF file's quantized head and
// embedding table under `automatic` (repacked) and both under PackOptions::quantize_lm_head.
//  automatic: BF16, except a GGUF file's quantized projections, head and embedding table, repacked
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

// The format stacked block parts repack into: the K-quant 4-, 5- or 6-bit format when all are
// Q4_K, Q5_K or Q6_K; W4 g32 when all have 4-bit codes (Q4_0, Q4_1, Q4_K), else W8 g32 (a 4- or 5-bit code is an exact W8 code); with zero points when some part
// has a free minimum (Q4_1, Q5_1, Q4_K, Q5_K). W4 g128 with zero points when all are AWQ blocks
// with one map per 128 elements (AWQ group_size 128). nullopt when some part has no blocks.
std::optional<kern::QuantFormat> block_repack_format(const std::vector<TensorView>& parts);

// Panels a packing thread takes at least (TaskTeam::for_shares' min_units): a thread costs tens
// of microseconds to start, about what one BF16 panel of K = 2048 takes to pack.
inline constexpr int kMinPackPanelsPerThread = 8;

// The [n_i, k] parts stacked along N into one quantized matrix, into `dst`
// (kern::packed_quant_bytes(f, Σn_i, k) bytes); with a team, its threads take runs of panels.
void pack_stacked_rtn(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f,
                      const TaskTeam* team = nullptr);
// Same from the parts' blocks; f from block_repack_format.
void pack_stacked_blocks(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f,
                         const TaskTeam* team = nullptr);

}  // namespace slab
