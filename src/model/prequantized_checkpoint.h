#pragma once
// Hugging Face checkpoints quantized before they were saved: AWQ (AutoAWQ's "gemm" layout) and
// GPTQ (AutoGPTQ / GPTQModel), 4-bit (GPTQ also 2-, 3- and 8-bit) with zero points. Every quantized
// projection X is stored as
//   AWQ:  X.qweight I32 [in, out / 8]: eight codes per int32, for output columns 8j + kAwqOrder[i]
//                   at bits 4i (i = 0..7);
//         X.qzeros  I32 [in / group, out / 8]: the zero points, packed the same way;
//         X.scales  F16 (or BF16/F32) [in / group, out];
//   GPTQ: X.qweight I32 [in · b / 32, out] (b bits a code): each run of 32 input rows of a column
//                   fills b consecutive int32 words as one little-endian bit stream, row 32j + i at
//                   stream bits b·i up (stream bit s: bit s % 32 of word s / 32). For b = 2, 4, 8
//                   that is 32 / b rows per int32, row i of the word at bits b·i; 3-bit rows 10
//                   and 21 of each run straddle two words;
//         X.qzeros  I32 [groups, out · b / 32]: the zeros of the output columns, packed the same
//                   way along the outputs, minus one in the v1 format ("gptq":
//                   PrequantizedConfig::zero_offset 1);
//         X.scales  [groups, out]; X.g_idx I32 [in]: each input row's group (optional: i / group);
// and W[o][i] = scales[g][o] · (code[i][o] − zero[g][o]), g the row's group.
//
// wrap_prequantized_checkpoint presents such a checkpoint as one with plain X.weight tensors
// [out, in] whose views carry blocks of 32 elements (FP32 slope and offset, then 16 bytes of
// nibbles: BlockFormat::awq4 / gptq4, and gptq2 / gptq3 for GPTQ's 2- and 3-bit codes, which are
// valid nibbles; or 32 bytes of 8-bit codes: gptq8), which the packer repacks for the W4 (W8)
// kernels without requantizing, as it does GGUF blocks (2- and 3-bit weights so take 4 bits a
// weight in memory); asked for with tensor(), the values are decoded to BF16.
// GPTQ's act-order files (desc_act: g_idx gives the rows their groups out of order) are exact
// too: their blocks hold the inputs sorted by group (TensorView::input_perm says in which order),
// so each run of 32 has one group, and the model gathers its activations in that order before
// the matrix (model/packed_linear.h). Only a group size that leaves a run of 32 in two groups
// after sorting has no blocks (the packer then takes the decoded values). Blocks and values are
// made on first use and freed by release(), one layer at a time. Every other tensor (norms,
// embeddings, biases, modules left unquantized) passes through.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/checkpoint.h"
#include "model/gguf_blocks.h"
#include "model/model_config.h"

namespace slab {

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// q from config.json's quantization_config (method awq or gptq). Checks every quantized
// projection's tensors when opened; errors name the file and the tensor.
std::unique_ptr<Checkpoint> wrap_prequantized_checkpoint(std::unique_ptr<Checkpoint> inner,
                                                         const PrequantizedConfig& q);

namespace awq {
// The 24-byte block readers (AWQ and GPTQ alike), in model/gguf_blocks.h's form (codes 0..15;
// slope, offset per 32).
void codes_awq4(const uint8_t* blocks, size_t block_count, const gguf::BlockCodes& out);
void dequantize_awq4(const uint8_t* blocks, size_t block_count, float* out);
// The 40-byte 8-bit blocks (GPTQ 8-bit): FP32 slope, FP32 offset, 32 codes 0..255.
void codes_gptq8(const uint8_t* blocks, size_t block_count, const gguf::BlockCodes& out);
void dequantize_gptq8(const uint8_t* blocks, size_t block_count, float* out);
}  // namespace awq

}  // namespace slab
