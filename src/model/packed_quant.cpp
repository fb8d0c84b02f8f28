// Quantized packing of projections: RTN from float tensors, or a repack of GGUF blocks.
#include "model/packed_quant.h"

#include <cstring>
#include <stdexcept>

namespace slab {
namespace {

constexpr int kBlockElems = 32;  // Q8_0 and Q4_0

uint16_t read_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// One row of Q8_0/Q4_0 blocks to unsigned codes in format f (W8: value + 128; W4: the nibble)
// and one FP32 scale per block.
void row_codes(const uint8_t* blocks, BlockFormat format, int k, int bits, uint8_t* codes, float* scales) {
  const int n_blocks = k / kBlockElems;
  for (int b = 0; b < n_blocks; ++b) {
    uint8_t* c = codes + b * kBlockElems;
    if (format == BlockFormat::q8_0) {
      const uint8_t* blk = blocks + static_cast<size_t>(b) * 34;
      scales[b] = f16_to_f32(read_u16(blk));
      for (int j = 0; j < kBlockElems; ++j) c[j] = static_cast<uint8_t>(static_cast<int8_t>(blk[2 + j]) + 128);
    } else {
      const uint8_t* blk = blocks + static_cast<size_t>(b) * 18;
      scales[b] = f16_to_f32(read_u16(blk));
      // Q4_0 value q - 8: as a W4 code q (zero 8), as a W8 code q - 8 + 128.
      const int shift = bits == 4 ? 0 : 120;
      for (int j = 0; j < kBlockElems / 2; ++j) {
        c[j] = static_cast<uint8_t>((blk[2 + j] & 15) + shift);
        c[j + 16] = static_cast<uint8_t>((blk[2 + j] >> 4) + shift);
      }
    }
  }
}

}  // namespace

std::optional<WeightQuantization> parse_weight_quantization(std::string_view text) {
  if (text == "auto") return WeightQuantization::automatic;
  if (text == "none") return WeightQuantization::none;
  if (text == "w8") return WeightQuantization::w8;
  if (text == "w8g32") return WeightQuantization::w8g32;
  if (text == "w4") return WeightQuantization::w4;
  if (text == "w4g128") return WeightQuantization::w4g128;
  return std::nullopt;
}

const char* weight_quantization_name(WeightQuantization q) {
  switch (q) {
    case WeightQuantization::automatic: return "auto";
    case WeightQuantization::none: return "none";
    case WeightQuantization::w8: return "w8";
    case WeightQuantization::w8g32: return "w8g32";
    case WeightQuantization::w4: return "w4";
    case WeightQuantization::w4g128: return "w4g128";
  }
  return "?";
}

const char* weight_quantization_choices() { return "auto, none, w8, w8g32, w4 or w4g128"; }
const char* rtn_quantization_choices() { return "w8, w8g32, w4 or w4g128"; }

std::optional<kern::QuantFormat> rtn_quant_format(WeightQuantization q) {
  switch (q) {
    case WeightQuantization::w8: return kern::QuantFormat{8, 0, false};
    case WeightQuantization::w8g32: return kern::QuantFormat{8, 32, false};
    case WeightQuantization::w4: return kern::QuantFormat{4, 32, false};
    case WeightQuantization::w4g128: return kern::QuantFormat{4, 128, false};
    default: return std::nullopt;
  }
}

std::string quant_format_name(const kern::QuantFormat& f) {
  std::string s = "W";
  s += std::to_string(f.bits);
  if (f.group == 0) {
    s += " per-channel";
  } else {
    s += " g";
    s += std::to_string(f.group);
  }
  if (f.zero_point) s += " zero-point";
  return s;
}

std::optional<kern::QuantFormat> block_repack_format(const std::vector<TensorView>& parts) {
  bool all_q4 = true;
  for (const TensorView& p : parts) {
    if (p.block_format == BlockFormat::none || p.blocks == nullptr) return std::nullopt;
    all_q4 = all_q4 && p.block_format == BlockFormat::q4_0;
  }
  return kern::QuantFormat{all_q4 ? 4 : 8, kBlockElems, false};
}

void pack_stacked_rtn(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f) {
  int n = 0;
  for (const TensorView& p : parts) n += static_cast<int>(p.shape[0]);
  // Parts starting on a panel boundary pack in place, each into its own run of panels (a BF16
  // part straight from the memory map); otherwise through one stacked FP32 copy.
  bool aligned = true;
  for (size_t i = 0; i + 1 < parts.size(); ++i) aligned = aligned && parts[i].shape[0] % kern::kQuantPanelCols == 0;
  const size_t ld = static_cast<size_t>(k);
  if (aligned) {
    size_t row = 0;
    for (const TensorView& p : parts) {
      const int rows = static_cast<int>(p.shape[0]);
      uint8_t* at = dst + row / kern::kQuantPanelCols * kern::quant_panel_bytes(f, k);
      if (p.dtype == DType::bf16) {
        kern::pack_quant_linear(at, f, static_cast<const kern::bf16_t*>(p.data), rows, k, ld);
      } else {
        std::vector<float> tmp(static_cast<size_t>(p.numel()));
        convert_to_f32(p, tmp.data());
        kern::pack_quant_linear(at, f, tmp.data(), rows, k, ld);
      }
      row += static_cast<size_t>(rows);
    }
    return;
  }
  std::vector<float> tmp(static_cast<size_t>(n) * ld);
  size_t at = 0;
  for (const TensorView& p : parts) {
    convert_to_f32(p, tmp.data() + at);
    at += static_cast<size_t>(p.numel());
  }
  kern::pack_quant_linear(dst, f, tmp.data(), n, k, ld);
}

void pack_stacked_blocks(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f) {
  if (k % kBlockElems != 0) throw std::runtime_error("Q8_0/Q4_0 rows must be whole blocks of 32");
  int n = 0;
  for (const TensorView& p : parts) n += static_cast<int>(p.shape[0]);
  const int groups = k / kBlockElems;
  std::vector<uint8_t> codes(static_cast<size_t>(n) * static_cast<size_t>(k));
  std::vector<float> scales(static_cast<size_t>(n) * static_cast<size_t>(groups));
  size_t row = 0;
  for (const TensorView& p : parts) {
    const size_t block_bytes = p.block_format == BlockFormat::q8_0 ? 34 : 18;
    for (int64_t r = 0; r < p.shape[0]; ++r, ++row) {
      row_codes(p.blocks + static_cast<size_t>(r) * static_cast<size_t>(groups) * block_bytes, p.block_format, k,
                f.bits, codes.data() + row * static_cast<size_t>(k), scales.data() + row * static_cast<size_t>(groups));
    }
  }
  kern::pack_quant_linear_codes(dst, f, codes.data(), static_cast<size_t>(k), scales.data(), nullptr, n, k);
}

}  // namespace slab
