#pragma once
// AWQ checkpoints (AutoAWQ's "gemm" layout, 4-bit, zero points): every quantized projection X
// is three tensors instead of X.weight:
//   X.qweight  I32 [in, out / 8]: eight 4-bit codes per int32, for output columns 8j + kAwqOrder[i]
//              at bits 4i (i = 0..7);
//   X.qzeros   I32 [in / group, out / 8]: the zero points, packed the same way;
//   X.scales   F16 (or BF16/F32) [in / group, out];
// and W[o][i] = scales[i / group][o] · (code[i][o] − zero[i / group][o]).
//
// wrap_awq_checkpoint presents such a checkpoint as one with plain X.weight tensors [out, in]
// whose views carry BlockFormat::awq4 blocks (the packer repacks them for the W4 kernels without
// requantizing, as it does GGUF blocks) and whose values, asked for with tensor(), are decoded
// to BF16. Blocks and values are made on first use and freed by release(), one layer at a time.
// Every other tensor (norms, embeddings, modules AWQ left unquantized) passes through.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "model/checkpoint.h"
#include "model/gguf_blocks.h"

namespace slab {

inline constexpr int kAwqOrder[8] = {0, 2, 4, 6, 1, 3, 5, 7};

// `group_size` from config.json's quantization_config (a multiple of 32). Checks every quantized
// projection's three tensors when opened; errors name the file and the tensor.
std::unique_ptr<Checkpoint> wrap_awq_checkpoint(std::unique_ptr<Checkpoint> inner, int group_size);

namespace awq {
// The awq4 block readers, in model/gguf_blocks.h's form (codes 0..15; slope, offset per 32).
void codes_awq4(const uint8_t* blocks, size_t block_count, const gguf::BlockCodes& out);
void dequantize_awq4(const uint8_t* blocks, size_t block_count, float* out);
}  // namespace awq

}  // namespace slab
