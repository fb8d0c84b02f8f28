#pragma once
// Readers of ggml's quantized block formats, one small function per format, each taking the
// packed blocks and a block count: `dequantize_*` writes block_count * (elements per block)
// floats; `codes_*` (every format but Q6_K) writes each element's integer code and, per group of
// 32 elements, the affine map y = slope * code + offset that gives its value, which is what
// model/packed_quant.h repacks for the INT8/INT4 kernels without requantizing. The dequantizers
// are those maps applied (the same FP32 operations as ggml's own formulas: exact products, one
// rounding at most).
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

inline constexpr int kCodeGroup = 32;  // elements per affine map of the codes_* readers

// Codes of one block format: codes[i] in [0, max_code], slope/offset per group of 32.
struct BlockCodes {
  uint8_t* codes = nullptr;  // block_count * block elements
  float* slope = nullptr;    // block_count * block elements / 32
  float* offset = nullptr;
};

// Q8_0 codes are q + 128 (max 255, offset -128 d); Q4_0 q (max 15, offset -8 d); Q4_1 q (15);
// Q5_0 q (31, offset -16 d); Q5_1 q (31); Q4_K q (15, slope d * sc, offset -dmin * m); Q5_K q (31).
void codes_q8_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q4_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q4_1(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q5_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q5_1(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q4_k(const uint8_t* blocks, size_t block_count, const BlockCodes& out);
void codes_q5_k(const uint8_t* blocks, size_t block_count, const BlockCodes& out);

// Q4_K, Q5_K and Q6_K blocks field by field, for the kernels' K-quant layout
// (kernels/linear_quant.h) which keeps them as they are. Per block: 256 codes (Q4_K 0..15, Q5_K
// 0..31, Q6_K 0..63, element order), d (FP16 bits), Q4_K/Q5_K dmin, scales (8 of 0..63 per 32
// elements, Q6_K 16 int8 per 16), Q4_K/Q5_K 8 mins (0..63).
struct KQuantFields {
  uint8_t* codes = nullptr;  // block_count * 256
  uint16_t* d = nullptr;     // block_count
  uint16_t* dmin = nullptr;  // block_count (Q4_K, Q5_K)
  int8_t* scales = nullptr;  // block_count * 8 (Q4_K, Q5_K) or 16 (Q6_K)
  uint8_t* mins = nullptr;   // block_count * 8 (Q4_K, Q5_K)
};
void fields_q4_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out);
void fields_q5_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out);
void fields_q6_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out);

void dequantize_q8_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_1(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_0(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_1(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q4_k(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q5_k(const uint8_t* blocks, size_t block_count, float* out);
void dequantize_q6_k(const uint8_t* blocks, size_t block_count, float* out);

}  // namespace slab::gguf
