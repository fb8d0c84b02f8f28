// Quantized packing of projections: RTN from float tensors, or a repack of GGUF (or AWQ) blocks.
#include "model/packed_quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <stdexcept>

#include "model/gguf_blocks.h"
#include "model/prequantized_checkpoint.h"

namespace slab {
namespace {

constexpr int kGroup = gguf::kCodeGroup;  // the repacked formats' group along K

struct BlockLayout {
  int elems = 0;     // elements per block
  size_t bytes = 0;  // bytes per block
  int max_code = 0;  // largest code of codes_* (0 for Q6_K, which has no reader: requantized)
  void (*codes)(const uint8_t*, size_t, const gguf::BlockCodes&) = nullptr;
};

BlockLayout layout_of(BlockFormat format) {
  switch (format) {
    case BlockFormat::q8_0: return {32, 34, 255, gguf::codes_q8_0};
    case BlockFormat::q4_0: return {32, 18, 15, gguf::codes_q4_0};
    case BlockFormat::q4_1: return {32, 20, 15, gguf::codes_q4_1};
    case BlockFormat::q5_0: return {32, 22, 31, gguf::codes_q5_0};
    case BlockFormat::q5_1: return {32, 24, 31, gguf::codes_q5_1};
    case BlockFormat::q4_k: return {256, 144, 15, gguf::codes_q4_k};
    case BlockFormat::q5_k: return {256, 176, 31, gguf::codes_q5_k};
    case BlockFormat::q6_k: return {256, 210, 0, nullptr};
    case BlockFormat::awq4:
    case BlockFormat::gptq2:  // 2- and 3-bit codes in the 4-bit blocks: repacked as 4-bit ones
    case BlockFormat::gptq3:
    case BlockFormat::gptq4: return {32, 24, 15, awq::codes_awq4};
    case BlockFormat::gptq8: return {32, 40, 255, awq::codes_gptq8};
    case BlockFormat::none: break;
  }
  return {};
}

// Formats whose offset is a whole number of steps below code 0 (y = d·(code − z), z = 128, 8, 16):
// they fit a symmetric target. The others (a free minimum) need stored zero points.
bool symmetric_blocks(BlockFormat format) {
  return format == BlockFormat::q8_0 || format == BlockFormat::q4_0 || format == BlockFormat::q5_0 ||
         format == BlockFormat::q6_k;
}

// One group's affine map y = slope·code + offset (codes 0..src_max) as the kernels' scale and
// zero (y = scale·(code − zero), scale rounded to BF16 by the packer): the zero is chosen with the
// rounded scale so that the error of the slope's rounding is centred over the codes' range.
// Measured on llama-quantize's Q4_K groups (tests/fixtures/gguf/llamacpp): worst error 0.13 % of
// the group's range on average, 0.34 % at most (a 4-bit step is 6.7 %); searching neighbouring
// BF16 scale/zero pairs gained nothing. A zero slope (all values equal the offset) becomes
// scale −offset, zero 1, codes 0.
void affine_to_scale_zero(float slope, float offset, int src_max, float& scale, float& zero, bool& codes_zeroed) {
  scale = kern::round_to_bf16(slope);
  codes_zeroed = false;
  if (scale != 0.0f) {
    zero = ((scale - slope) * 0.5f * static_cast<float>(src_max) - offset) / scale;
    if (std::isfinite(zero)) return;
  }
  codes_zeroed = true;
  scale = -offset;
  zero = offset == 0.0f ? 0.0f : 1.0f;
}

// Q6_K values (16-element scales) to symmetric W8 codes per group of 32, round-to-nearest:
// scale max|y| / 127, code round(y / scale) + 128.
void requantize_w8(const float* y, uint8_t* codes, float* scale) {
  float amax = 0.0f;
  for (int j = 0; j < kGroup; ++j) amax = std::max(amax, std::fabs(y[j]));
  *scale = kern::round_to_bf16(amax / 127.0f);
  for (int j = 0; j < kGroup; ++j) {
    const int q = *scale > 0.0f ? static_cast<int>(std::nearbyint(y[j] / *scale)) : 0;
    codes[j] = static_cast<uint8_t>(std::clamp(q, -127, 127) + 128);
  }
}

// One row of blocks (k elements) to codes, scales and zeros of the W8/W4 g32 format f.
void row_codes(const uint8_t* blocks, BlockFormat format, int k, const kern::QuantFormat& f, uint8_t* codes,
               float* scales, float* zeros) {
  const BlockLayout layout = layout_of(format);
  const size_t n_blocks = static_cast<size_t>(k / layout.elems);
  const int groups = k / kGroup;
  const float implied = f.bits == 8 ? 128.0f : 8.0f;
  if (layout.codes == nullptr) {  // Q6_K: requantized from its values
    std::vector<float> y(static_cast<size_t>(k));
    gguf::dequantize_q6_k(blocks, n_blocks, y.data());
    for (int g = 0; g < groups; ++g) {
      requantize_w8(y.data() + static_cast<size_t>(g) * kGroup, codes + static_cast<size_t>(g) * kGroup, &scales[g]);
      zeros[g] = 128.0f;
    }
    return;
  }
  std::vector<float> slope(static_cast<size_t>(groups)), offset(static_cast<size_t>(groups));
  layout.codes(blocks, n_blocks, gguf::BlockCodes{codes, slope.data(), offset.data()});
  for (int g = 0; g < groups; ++g) {
    uint8_t* c = codes + static_cast<size_t>(g) * kGroup;
    if (!f.zero_point) {
      // Symmetric source: y = d·(code − z) with z = −offset/d a whole number; move the codes so
      // that z becomes the target's implied zero (Q4_0 as W8: code − 8 + 128).
      const int z = format == BlockFormat::q8_0 ? 128 : layout.max_code / 2 + 1;
      const int shift = static_cast<int>(implied) - z;
      for (int j = 0; j < kGroup; ++j) c[j] = static_cast<uint8_t>(c[j] + shift);
      scales[g] = slope[static_cast<size_t>(g)];
      zeros[g] = implied;
      continue;
    }
    bool codes_zeroed = false;
    affine_to_scale_zero(slope[static_cast<size_t>(g)], offset[static_cast<size_t>(g)], layout.max_code, scales[g],
                         zeros[g], codes_zeroed);
    if (codes_zeroed) std::fill(c, c + kGroup, uint8_t{0});
  }
}

}  // namespace

std::optional<WeightQuantization> parse_weight_quantization(std::string_view text) {
  if (text == "auto") return WeightQuantization::automatic;
  if (text == "none") return WeightQuantization::none;
  // int8/w8a8 and int4/w4a8: the names vLLM users and the issue tracker use for the same modes
  // (batched steps always multiply INT8 activations, so W8 is W8A8 and W4 is W4A8 there).
  if (text == "w8" || text == "int8" || text == "w8a8") return WeightQuantization::w8;
  if (text == "w8g32") return WeightQuantization::w8g32;
  if (text == "w4" || text == "int4" || text == "w4a8") return WeightQuantization::w4;
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

const char* weight_quantization_choices() { return "auto, none, w8 (int8, w8a8), w8g32, w4 (int4, w4a8) or w4g128"; }
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
  if (f.k_quant) {
    return "K-quant " + std::to_string(f.bits) + "-bit (Q" + std::to_string(f.bits) + "_K)";
  }
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

namespace {

constexpr int kWideGroup = 128;

// Whether every run of 128 elements of an AWQ or GPTQ tensor shares one slope and offset (a
// group_size of 128, or a multiple of it, or GPTQ's one group per row): then W4 (W8) g128 holds it
// exactly, 0.75 bits a weight fewer than g32.
bool uniform_per_128(const TensorView& p) {
  const BlockFormat f = p.block_format;
  const bool prequantized = f == BlockFormat::awq4 || f == BlockFormat::gptq2 || f == BlockFormat::gptq3 ||
                            f == BlockFormat::gptq4 || f == BlockFormat::gptq8;
  if (!prequantized || p.shape.size() != 2 || p.shape[1] % kWideGroup != 0) {
    return false;
  }
  const BlockLayout layout = layout_of(p.block_format);
  const size_t blocks = static_cast<size_t>(p.shape[0] * p.shape[1] / layout.elems);
  constexpr size_t per_wide = kWideGroup / 32;
  for (size_t b = 0; b < blocks; b += per_wide) {
    for (size_t j = 1; j < per_wide; ++j) {
      if (std::memcmp(p.blocks + b * layout.bytes, p.blocks + (b + j) * layout.bytes, 8) != 0) return false;
    }
  }
  return true;
}

// The K-quant layout that holds every part as it is, if they are all Q4_K, all Q5_K or all Q6_K.
std::optional<kern::QuantFormat> kquant_format_of(const std::vector<TensorView>& parts) {
  const BlockFormat first = parts.front().block_format;
  if (first != BlockFormat::q4_k && first != BlockFormat::q5_k && first != BlockFormat::q6_k) return std::nullopt;
  for (const TensorView& p : parts) {
    if (p.block_format != first || p.shape.size() != 2 || p.shape[1] % kern::kKQuantSuperK != 0) return std::nullopt;
  }
  if (first == BlockFormat::q4_k) return kern::kquant4_format();
  return first == BlockFormat::q5_k ? kern::kquant5_format() : kern::kquant6_format();
}

// fn(first row, rows, first panel) over runs of whole panels of an n-row quantized matrix: one
// run, or runs on the team's threads. A panel's bytes come from its own rows alone, so the
// matrix packs the same on any number of threads.
void for_panel_rows(const TaskTeam* team, int n, const std::function<void(int, int, int)>& fn) {
  const auto run = [&](int lo, int hi) {
    const int r0 = lo * kern::kQuantPanelCols;
    fn(r0, std::min(n, hi * kern::kQuantPanelCols) - r0, lo);
  };
  const int panels = kern::quant_panels(n);
  if (team == nullptr) {
    run(0, panels);
  } else {
    team->for_shares(panels, kMinPackPanelsPerThread, run);
  }
}

// The stacked rows [lo, hi) part by part: fn(part, its first row there, rows, their offset in [lo, hi)).
template <typename Fn>
void for_stacked_rows(const std::vector<TensorView>& parts, int lo, int hi, Fn&& fn) {
  int start = 0;
  for (const TensorView& p : parts) {
    const int rows = static_cast<int>(p.shape[0]);
    const int a = std::max(lo, start), b = std::min(hi, start + rows);
    if (a < b) fn(p, a - start, b - a, a - lo);
    start += rows;
  }
}

// Parts all Q4_K, all Q5_K or all Q6_K, field by field into the K-quant layout; each run of
// panels reads its rows' fields into buffers of its own.
void pack_kquant_blocks(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f,
                        const TaskTeam* team) {
  int n = 0;
  for (const TensorView& p : parts) n += static_cast<int>(p.shape[0]);
  const size_t sbs = static_cast<size_t>(k / kern::kKQuantSuperK);
  const bool mins = f.bits != 6;           // Q4_K, Q5_K
  const size_t per_block = mins ? 8 : 16;  // sub-scales per super-block
  const size_t panel_bytes = kern::quant_panel_bytes(f, k);
  for_panel_rows(team, n, [&](int r0, int run_rows, int panel) {
    const size_t rows = static_cast<size_t>(run_rows);
    std::vector<uint8_t> codes(rows * static_cast<size_t>(k));
    std::vector<uint16_t> d(rows * sbs), dmin(mins ? rows * sbs : 0);
    std::vector<int8_t> scales(rows * sbs * per_block);
    std::vector<uint8_t> mins_of(mins ? rows * sbs * 8 : 0);
    for_stacked_rows(parts, r0, r0 + run_rows, [&](const TensorView& p, int first, int count_rows, int at) {
      const size_t block = static_cast<size_t>(at) * sbs, count = static_cast<size_t>(count_rows) * sbs;
      const uint8_t* blocks = p.blocks + static_cast<size_t>(first) * sbs * layout_of(p.block_format).bytes;
      gguf::KQuantFields out;
      out.codes = codes.data() + block * kern::kKQuantSuperK;
      out.d = d.data() + block;
      out.scales = scales.data() + block * per_block;
      if (mins) {
        out.dmin = dmin.data() + block;
        out.mins = mins_of.data() + block * 8;
        (f.bits == 4 ? gguf::fields_q4_k : gguf::fields_q5_k)(blocks, count, out);
      } else {
        gguf::fields_q6_k(blocks, count, out);
      }
    });
    kern::KQuantSource src;
    src.codes = codes.data();
    src.ldc = static_cast<size_t>(k);
    src.d = d.data();
    src.dmin = mins ? dmin.data() : nullptr;
    src.scales = scales.data();
    src.mins = mins ? mins_of.data() : nullptr;
    kern::pack_kquant_linear(dst + static_cast<size_t>(panel) * panel_bytes, f, src, run_rows, k);
  });
}

}  // namespace

std::optional<kern::QuantFormat> block_repack_format(const std::vector<TensorView>& parts) {
  bool all_4bit = true, all_symmetric = true, all_wide = true;
  for (const TensorView& p : parts) {
    if (p.block_format == BlockFormat::none || p.blocks == nullptr) return std::nullopt;
  }
  if (auto kq = kquant_format_of(parts)) return kq;
  for (const TensorView& p : parts) {
    all_4bit = all_4bit && layout_of(p.block_format).max_code == 15;
    all_symmetric = all_symmetric && symmetric_blocks(p.block_format);
    all_wide = all_wide && uniform_per_128(p);
  }
  if (all_wide) return kern::QuantFormat{all_4bit ? 4 : 8, kWideGroup, true};
  return kern::QuantFormat{all_4bit ? 4 : 8, kGroup, !all_symmetric};
}

void pack_stacked_rtn(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f,
                      const TaskTeam* team) {
  // Rows [0, rows) of src into the panels from `at`, in runs of panels.
  const size_t panel_bytes = kern::quant_panel_bytes(f, k);
  const auto pack_panels = [&](uint8_t* at, const auto* src, int rows, size_t ld) {
    for_panel_rows(team, rows, [&](int r0, int run_rows, int panel) {
      kern::pack_quant_linear(at + static_cast<size_t>(panel) * panel_bytes, f, src + static_cast<size_t>(r0) * ld,
                              run_rows, k, ld);
    });
  };
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
      uint8_t* at = dst + row / kern::kQuantPanelCols * panel_bytes;
      if (p.dtype == DType::bf16) {
        pack_panels(at, static_cast<const kern::bf16_t*>(p.data), rows, ld);
      } else {  // each run of panels widens its own rows to FP32
        for_panel_rows(team, rows, [&](int r0, int run_rows, int panel) {
          std::vector<float> tmp(static_cast<size_t>(run_rows) * ld);
          convert_to_f32(row_slice(p, r0, run_rows), tmp.data());
          kern::pack_quant_linear(at + static_cast<size_t>(panel) * panel_bytes, f, tmp.data(), run_rows, k, ld);
        });
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
  pack_panels(dst, tmp.data(), n, ld);
}

void pack_stacked_blocks(uint8_t* dst, const std::vector<TensorView>& parts, int k, const kern::QuantFormat& f,
                         const TaskTeam* team) {
  if (f.k_quant) {
    pack_kquant_blocks(dst, parts, k, f, team);
    return;
  }
  int n = 0;
  for (const TensorView& p : parts) {
    const BlockLayout layout = layout_of(p.block_format);
    if (layout.elems == 0 || k % layout.elems != 0) {
      throw std::runtime_error(p.file + ": tensor '" + p.name + "': rows of " + std::to_string(k) +
                               " elements are not whole " + block_format_name(p.block_format) + " blocks");
    }
    if (f.bits == 4 && layout.max_code != 15) {
      throw std::runtime_error(p.file + ": tensor '" + p.name + "': " + block_format_name(p.block_format) +
                               " blocks do not fit 4-bit codes");
    }
    n += static_cast<int>(p.shape[0]);
  }
  if (f.group != kGroup && f.group != kWideGroup) {
    throw std::invalid_argument("pack_stacked_blocks: group " + std::to_string(f.group));
  }
  const int groups = k / kGroup;
  const size_t panel_bytes = kern::quant_panel_bytes(f, k);
  // Each run of panels reads its rows' codes into buffers of its own.
  for_panel_rows(team, n, [&](int r0, int run_rows, int panel) {
    std::vector<uint8_t> codes(static_cast<size_t>(run_rows) * static_cast<size_t>(k));
    std::vector<float> scales(static_cast<size_t>(run_rows) * static_cast<size_t>(groups)), zeros(scales.size());
    for_stacked_rows(parts, r0, r0 + run_rows, [&](const TensorView& p, int first, int count_rows, int at) {
      const BlockLayout layout = layout_of(p.block_format);
      const size_t row_bytes = static_cast<size_t>(k / layout.elems) * layout.bytes;
      for (int r = 0; r < count_rows; ++r) {
        const size_t row = static_cast<size_t>(at + r);
        row_codes(p.blocks + static_cast<size_t>(first + r) * row_bytes, p.block_format, k, f,
                  codes.data() + row * static_cast<size_t>(k), scales.data() + row * static_cast<size_t>(groups),
                  zeros.data() + row * static_cast<size_t>(groups));
      }
    });
    if (f.group == kWideGroup) {  // block_repack_format saw one map per 128: keep every fourth
      constexpr int per_wide = kWideGroup / kGroup;
      const int wide = groups / per_wide;
      for (int r = 0; r < run_rows; ++r) {  // in place: a row's maps move to or below where they were
        for (int g = 0; g < wide; ++g) {
          const size_t from = static_cast<size_t>(r) * groups + static_cast<size_t>(g) * per_wide;
          const size_t to = static_cast<size_t>(r) * wide + static_cast<size_t>(g);
          scales[to] = scales[from];
          zeros[to] = zeros[from];
        }
      }
    }
    kern::pack_quant_linear_codes(dst + static_cast<size_t>(panel) * panel_bytes, f, codes.data(),
                                  static_cast<size_t>(k), scales.data(), zeros.data(), run_rows, k);
  });
}

}  // namespace slab
