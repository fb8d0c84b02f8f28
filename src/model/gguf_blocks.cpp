// ggml block formats to FP32 (layouts in gguf_blocks.h). Plain scalar code: it runs once per
// weight at load, and its speed is the memory's.
#include "model/gguf_blocks.h"

#include <cstring>

#include "model/checkpoint.h"

namespace slab::gguf {
namespace {

float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

uint32_t u32_at(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The 32-element formats differ only in the fifth bit, the code offset and the additive minimum:
// codes are the raw 4- or 5-bit quants (plus `code_bias`, Q8_0 style, for none of these), the
// map's offset is `min` for the _1 formats and -offset_codes * d for the _0 ones.
void codes_32(const uint8_t* nibbles, uint32_t high_bits, bool has_high, uint8_t* codes) {
  for (int j = 0; j < 16; ++j) {
    int lo = nibbles[j] & 0x0f;
    int hi = nibbles[j] >> 4;
    if (has_high) {
      lo |= static_cast<int>((high_bits >> j) & 1u) << 4;
      hi |= static_cast<int>((high_bits >> (j + 16)) & 1u) << 4;
    }
    codes[j] = static_cast<uint8_t>(lo);
    codes[j + 16] = static_cast<uint8_t>(hi);
  }
}

// Q4_K/Q5_K pack eight 6-bit (scale, min) pairs into 12 bytes: pairs 0-3 sit in the low six bits
// of bytes 0-3 (scales) and 4-7 (mins); pairs 4-7 take their low four bits from the nibbles of
// bytes 8-11 and their top two bits from the spare high bits of bytes 0-3 (scales) and 4-7 (mins).
void k_scale_min(const uint8_t* packed, int group, int& scale, int& min) {
  if (group < 4) {
    scale = packed[group] & 63;
    min = packed[group + 4] & 63;
  } else {
    scale = (packed[group + 4] & 0x0f) | ((packed[group - 4] >> 6) << 4);
    min = (packed[group + 4] >> 4) | ((packed[group] >> 6) << 4);
  }
}

// Q4_K and Q5_K: 256 elements in four runs of 64; each run's 32 bytes of nibbles hold group 2r
// in the low nibbles and group 2r+1 in the high ones. `fifth_bits` (Q5_K) has one byte per
// position in a run, bit 2r for the low group and bit 2r+1 for the high group.
void k_block_codes(const uint8_t* fifth_bits, const uint8_t* nibbles, uint8_t* codes) {
  for (int run = 0; run < 4; ++run) {
    const uint8_t* q = nibbles + 32 * run;
    for (int l = 0; l < 32; ++l) {
      int lo = q[l] & 0x0f;
      int hi = q[l] >> 4;
      if (fifth_bits != nullptr) {
        lo += (fifth_bits[l] >> (2 * run)) & 1 ? 16 : 0;
        hi += (fifth_bits[l] >> (2 * run + 1)) & 1 ? 16 : 0;
      }
      codes[64 * run + l] = static_cast<uint8_t>(lo);
      codes[64 * run + 32 + l] = static_cast<uint8_t>(hi);
    }
  }
}

void codes_k_block(const uint8_t* block, const uint8_t* fifth_bits, const uint8_t* nibbles, uint8_t* codes,
                   float* slope, float* offset) {
  const float d = half_at(block);
  const float dmin = half_at(block + 2);
  for (int group = 0; group < 8; ++group) {
    int sc, mn;
    k_scale_min(block + 4, group, sc, mn);
    slope[group] = d * static_cast<float>(sc);
    offset[group] = -(dmin * static_cast<float>(mn));
  }
  k_block_codes(fifth_bits, nibbles, codes);
}

// Q4_K / Q5_K field by field (fifth bits null for Q4_K).
void fields_k(const uint8_t* blocks, size_t block_count, size_t block_bytes, bool five, const KQuantFields& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += block_bytes) {
    std::memcpy(out.d + b, blocks, 2);
    std::memcpy(out.dmin + b, blocks + 2, 2);
    for (int g = 0; g < 8; ++g) {
      int scale = 0, min = 0;
      k_scale_min(blocks + 4, g, scale, min);
      out.scales[8 * b + static_cast<size_t>(g)] = static_cast<int8_t>(scale);
      out.mins[8 * b + static_cast<size_t>(g)] = static_cast<uint8_t>(min);
    }
    k_block_codes(five ? blocks + 16 : nullptr, blocks + (five ? 48 : 16), out.codes + 256 * b);
  }
}

// One format's blocks through its codes_* reader, then y = slope * code + offset, a block at a
// time (no allocation).
template <size_t kElems>
void dequantize_via_codes(void (*codes_of)(const uint8_t*, size_t, const BlockCodes&), size_t block_bytes,
                          const uint8_t* blocks, size_t block_count, float* out) {
  uint8_t codes[kElems];
  float slope[kElems / kCodeGroup], offset[kElems / kCodeGroup];
  for (size_t b = 0; b < block_count; ++b, blocks += block_bytes, out += kElems) {
    codes_of(blocks, 1, BlockCodes{codes, slope, offset});
    for (size_t i = 0; i < kElems; ++i) {
      out[i] = slope[i / kCodeGroup] * static_cast<float>(codes[i]) + offset[i / kCodeGroup];
    }
  }
}

}  // namespace

void codes_q8_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 34) {
    const float d = half_at(blocks);
    out.slope[b] = d;
    out.offset[b] = -128.0f * d;
    for (int j = 0; j < 32; ++j) out.codes[32 * b + j] = static_cast<uint8_t>(static_cast<int8_t>(blocks[2 + j]) + 128);
  }
}

void codes_q4_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 18) {
    out.slope[b] = half_at(blocks);
    out.offset[b] = -8.0f * out.slope[b];
    codes_32(blocks + 2, 0, false, out.codes + 32 * b);
  }
}

void codes_q4_1(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 20) {
    out.slope[b] = half_at(blocks);
    out.offset[b] = half_at(blocks + 2);
    codes_32(blocks + 4, 0, false, out.codes + 32 * b);
  }
}

void codes_q5_0(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 22) {
    out.slope[b] = half_at(blocks);
    out.offset[b] = -16.0f * out.slope[b];
    codes_32(blocks + 6, u32_at(blocks + 2), true, out.codes + 32 * b);
  }
}

void codes_q5_1(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 24) {
    out.slope[b] = half_at(blocks);
    out.offset[b] = half_at(blocks + 2);
    codes_32(blocks + 8, u32_at(blocks + 4), true, out.codes + 32 * b);
  }
}

void codes_q4_k(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 144) {
    codes_k_block(blocks, nullptr, blocks + 16, out.codes + 256 * b, out.slope + 8 * b, out.offset + 8 * b);
  }
}

void codes_q5_k(const uint8_t* blocks, size_t block_count, const BlockCodes& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 176) {
    codes_k_block(blocks, blocks + 16, blocks + 48, out.codes + 256 * b, out.slope + 8 * b, out.offset + 8 * b);
  }
}

void fields_q4_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out) {
  fields_k(blocks, block_count, 144, false, out);
}
void fields_q5_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out) {
  fields_k(blocks, block_count, 176, true, out);
}

// Layout as dequantize_q6_k below reads it; element e of a block has scale e / 16.
void fields_q6_k(const uint8_t* blocks, size_t block_count, const KQuantFields& out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 210) {
    std::memcpy(out.d + b, blocks + 208, 2);
    std::memcpy(out.scales + 16 * b, blocks + 192, 16);
    uint8_t* codes = out.codes + 256 * b;
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blocks + 64 * half;
      const uint8_t* qh = blocks + 128 + 32 * half;
      uint8_t* y = codes + 128 * half;
      for (int l = 0; l < 32; ++l) {
        y[l] = static_cast<uint8_t>((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4));
        y[l + 32] = static_cast<uint8_t>((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4));
        y[l + 64] = static_cast<uint8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4));
        y[l + 96] = static_cast<uint8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4));
      }
    }
  }
}

void dequantize_q8_0(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<32>(codes_q8_0, 34, blocks, block_count, out);
}
void dequantize_q4_0(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<32>(codes_q4_0, 18, blocks, block_count, out);
}
void dequantize_q4_1(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<32>(codes_q4_1, 20, blocks, block_count, out);
}
void dequantize_q5_0(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<32>(codes_q5_0, 22, blocks, block_count, out);
}
void dequantize_q5_1(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<32>(codes_q5_1, 24, blocks, block_count, out);
}
void dequantize_q4_k(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<256>(codes_q4_k, 144, blocks, block_count, out);
}
void dequantize_q5_k(const uint8_t* blocks, size_t block_count, float* out) {
  dequantize_via_codes<256>(codes_q5_k, 176, blocks, block_count, out);
}

// Q6_K: two halves of 128 elements. In half h, low-nibble bytes ql[0..63] and 2-bit bytes
// qh[0..31] give four runs of 32: element 32*r + l takes its low four bits from ql[l] (r = 0, 2:
// low / high nibble) or ql[l + 32] (r = 1, 3), and its top two bits from bits 2r..2r+1 of qh[l].
// Each run of 32 has two scales, one per 16 elements.
void dequantize_q6_k(const uint8_t* blocks, size_t block_count, float* out) {
  for (size_t b = 0; b < block_count; ++b, blocks += 210, out += 256) {
    const float d = half_at(blocks + 208);
    const auto* scales = reinterpret_cast<const int8_t*>(blocks + 192);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blocks + 64 * half;
      const uint8_t* qh = blocks + 128 + 32 * half;
      const int8_t* sc = scales + 8 * half;
      float* y = out + 128 * half;
      for (int l = 0; l < 32; ++l) {
        const int g = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[g]) * static_cast<float>(q0);
        y[l + 32] = d * static_cast<float>(sc[g + 2]) * static_cast<float>(q1);
        y[l + 64] = d * static_cast<float>(sc[g + 4]) * static_cast<float>(q2);
        y[l + 96] = d * static_cast<float>(sc[g + 6]) * static_cast<float>(q3);
      }
    }
  }
}

}  // namespace slab::gguf
