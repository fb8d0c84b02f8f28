#pragma once
// Decoders of ggml's quantized block formats to FP32, one small function per format, each taking
// the packed blocks and a block count and writing block_count * (elements per block) floats.
// They are the load-time path for every format but Q8_0/Q4_0, whose blocks the INT8/INT4 kernels
// take as they are (model/packed_quant.h).
//
// Block layouts (little-endian; d, m, dmin are IEEE halves):
//  Q8_0  32 elems, 34 bytes:  d, 32 x i8                         y = d*q
//  Q4_0  32 elems, 18 bytes:  d, 16 bytes of nibbles            y = d*(q-8)
//  Q4_1  32 elems, 20 bytes:  d, m, 16 bytes of nibbles         y = d*q + m
//  Q5_0  32 elems, 22 bytes:  d, u32 high bits, 16 bytes        y = d*(q-16)
//  Q5_1  32 elems, 24 bytes:  d, m, u32 high bits, 16 bytes     y = d*q + m
//  (in the 32-element formats the low nibble of byte j is element j, the high one element j+16)
//  Q4_K 256 elems, 144 bytes: d, dmin, 12 bytes of 6-bit scales and mins for 8 groups of 32,
//                             128 bytes of nibbles               y = d*sc*q - dmin*mn
//  Q5_K 256 elems, 176 bytes: as Q4_K plus 32 bytes holding each element's fifth bit
//  Q6_K 256 elems, 210 bytes: 128 bytes of low nibbles, 64 of 2-bit highs, 16 x i8 scales for
//                             groups of 16, then d             y = d*sc*(q-32)
#include <cstddef>
#include <cstdint>

namespace slab::gguf {

void dequantize_q8_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_1(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_1(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_k(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_k(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q6_k(const uint8_t* blocks, size_t block_count, float* out);

}  // namespace slab::gguf
