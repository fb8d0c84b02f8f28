// Quantized linear formats and packing: what a format's panel holds (padded K, groups, activation
// blocks, bytes), round-to-nearest packing from FP32/BF16 weights, packing from a checkpoint's
// codes, and dequantizing back (the scalar reference the tests and the embedding lookup read).
// The layout itself is documented in linear_quant.h; K-quant records pack in linear_kquant.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/linear_quant.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern {
namespace {

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

int max_code(const QuantFormat& f) { return (1 << f.bits) - 1; }

// Writes row n of W as codes (kp of them) with its scales and zeros (groups of them).
void put_row(uint8_t* dst, const QuantFormat& f, int k, int n, const uint8_t* codes, const float* scales,
             const float* zeros) {
  const size_t panel_bytes = quant_panel_bytes(f, k);
  const int kp = quant_padded_k(f, k), groups = quant_groups(f, k);
  uint8_t* panel = dst + static_cast<size_t>(n / kQuantPanelCols) * panel_bytes;
  const int c = n % kQuantPanelCols;
  for (int kk = 0; kk < kp; ++kk) {
    bool high = false;
    uint8_t& b = panel[detail::code_offset(f.bits, c, kk, &high)];
    b = high ? static_cast<uint8_t>((b & 0x0f) | (codes[kk] << 4))
             : static_cast<uint8_t>(f.bits == 4 ? ((b & 0xf0) | codes[kk]) : codes[kk]);
  }
  const size_t code_bytes = static_cast<size_t>(kp) * kQuantPanelCols * f.bits / 8;
  auto* scale_out = reinterpret_cast<bf16_t*>(panel + code_bytes);
  for (int g = 0; g < groups; ++g) {
    scale_out[static_cast<size_t>(g) * kQuantPanelCols + c] = f32_to_bf16(scales[g]);
    if (f.zero_point) {
      scale_out[(static_cast<size_t>(groups) + g) * kQuantPanelCols + c] = f32_to_bf16(zeros[g]);
    }
  }
}

// Round-to-nearest codes of one row (see pack_quant_linear).
void quantize_weight_row(const QuantFormat& f, const float* w, int k, uint8_t* codes, float* scales, float* zeros) {
  const int gs = quant_group_size(f, k), kp = quant_padded_k(f, k);
  const int top = max_code(f);
  for (int g = 0; g * gs < kp; ++g) {
    const int lo = g * gs, hi = std::min(k, lo + gs);
    float mn = 0.0f, mx = 0.0f;
    for (int kk = lo; kk < hi; ++kk) {
      mn = std::min(mn, w[kk]);
      mx = std::max(mx, w[kk]);
    }
    float scale = 0.0f;
    int zero = detail::implied_zero(f.bits);
    if (f.zero_point) {
      scale = round_to_bf16((mx - mn) / static_cast<float>(top));
      zero = scale > 0.0f ? std::clamp(static_cast<int>(std::nearbyint(-mn / scale)), 0, top) : 0;
    } else if (f.bits == 8) {
      scale = round_to_bf16(std::max(-mn, mx) / 127.0f);
    } else {
      // W4 has codes -8..7: the weight of largest magnitude goes to -8, so the step is max|w| / 8
      // rather than / 7 (all 16 codes in use, 12.5 % finer). The scale takes that weight's
      // opposite sign; values beyond 7 steps on the other side clamp there (at most one step).
      const float extreme = -mn > mx ? mn : mx;
      scale = round_to_bf16(extreme / -8.0f);
    }
    scales[g] = scale;
    zeros[g] = static_cast<float>(zero);
    for (int kk = lo; kk < lo + gs; ++kk) {
      int code = zero;
      if (kk < hi && scale != 0.0f) {
        code = std::clamp(static_cast<int>(std::nearbyint(w[kk] / scale)) + zero, 0, top);
      }
      codes[kk] = static_cast<uint8_t>(code);
    }
  }
}

template <typename Src>
void pack_rtn(uint8_t* dst, const QuantFormat& f, const Src* w, int n, int k, size_t ldw) {
  check_quant_format(f);
  if (f.k_quant) throw std::invalid_argument("pack_quant_linear: K-quant formats pack from their fields only");
  std::memset(dst, 0, packed_quant_bytes(f, n, k));
  const int kp = quant_padded_k(f, k), groups = quant_groups(f, k);
  std::vector<float> row(static_cast<size_t>(k));
  std::vector<uint8_t> codes(static_cast<size_t>(kp));
  std::vector<float> scales(static_cast<size_t>(groups)), zeros(static_cast<size_t>(groups));
  for (int r = 0; r < n; ++r) {
    for (int kk = 0; kk < k; ++kk) {
      const Src v = w[static_cast<size_t>(r) * ldw + kk];
      if constexpr (sizeof(Src) == 4) {
        row[static_cast<size_t>(kk)] = v;
      } else {
        row[static_cast<size_t>(kk)] = bf16_to_f32(v);
      }
    }
    quantize_weight_row(f, row.data(), k, codes.data(), scales.data(), zeros.data());
    put_row(dst, f, k, r, codes.data(), scales.data(), zeros.data());
  }
}

}  // namespace

void check_quant_format(const QuantFormat& f) {
  if (f.k_quant) {
    const auto same = [&f](const QuantFormat& o) {
      return f.bits == o.bits && f.group == o.group && f.zero_point == o.zero_point;
    };
    if (!same(kquant4_format()) && !same(kquant5_format()) && !same(kquant6_format())) {
      throw std::invalid_argument("quant format: K-quant formats are {4, 32, mins}, {5, 32, mins} or {6, 16}");
    }
    return;
  }
  if ((f.bits != 4 && f.bits != 8) || (f.group != 0 && f.group != 32 && f.group != 128)) {
    throw std::invalid_argument("quant format: bits must be 4 or 8, group 0, 32 or 128");
  }
}

int quant_padded_k(const QuantFormat& f, int k) {
  const int to = f.k_quant ? kKQuantSuperK : f.group ? f.group : 32;
  return (k + to - 1) / to * to;
}
int quant_act_block(const QuantFormat& f, int k) {
  if (f.k_quant) return kQuantActBlock;
  const bool wide = f.group == kQuantWideActBlock || (f.group == 0 && quant_padded_k(f, k) % kQuantWideActBlock == 0);
  return wide ? kQuantWideActBlock : kQuantActBlock;
}
int quant_group_size(const QuantFormat& f, int k) { return f.group ? f.group : quant_padded_k(f, k); }
int quant_groups(const QuantFormat& f, int k) { return quant_padded_k(f, k) / quant_group_size(f, k); }

size_t quant_panel_bytes(const QuantFormat& f, int k) {
  if (f.k_quant) {
    return static_cast<size_t>(quant_padded_k(f, k) / kKQuantSuperK) * detail::kquant_layout(f.bits).record;
  }
  const size_t codes = static_cast<size_t>(quant_padded_k(f, k)) * kQuantPanelCols * f.bits / 8;
  const size_t meta = static_cast<size_t>(quant_groups(f, k)) * kQuantPanelCols * 2 * (f.zero_point ? 2 : 1);
  return codes + round_up(meta, 64);
}

void pack_quant_linear(uint8_t* dst, const QuantFormat& f, const float* w, int n, int k, size_t ldw) {
  pack_rtn(dst, f, w, n, k, ldw);
}
void pack_quant_linear(uint8_t* dst, const QuantFormat& f, const bf16_t* w, int n, int k, size_t ldw) {
  pack_rtn(dst, f, w, n, k, ldw);
}

void pack_quant_linear_codes(uint8_t* dst, const QuantFormat& f, const uint8_t* codes, size_t ldc, const float* scales,
                             const float* zeros, int n, int k) {
  check_quant_format(f);
  if (f.k_quant) throw std::invalid_argument("pack_quant_linear_codes: K-quant formats pack with pack_kquant_linear");
  if (f.zero_point && !zeros) throw std::invalid_argument("pack_quant_linear_codes: zeros needed");
  std::memset(dst, 0, packed_quant_bytes(f, n, k));
  const int kp = quant_padded_k(f, k), groups = quant_groups(f, k), gs = quant_group_size(f, k);
  std::vector<uint8_t> row(static_cast<size_t>(kp));
  std::vector<float> z(static_cast<size_t>(groups));
  for (int r = 0; r < n; ++r) {
    for (int g = 0; g < groups; ++g) {
      const float zero =
          f.zero_point ? zeros[static_cast<size_t>(r) * groups + g] : static_cast<float>(detail::implied_zero(f.bits));
      if (!std::isfinite(zero)) throw std::invalid_argument("pack_quant_linear_codes: zero point not finite");
      z[static_cast<size_t>(g)] = zero;
    }
    for (int kk = 0; kk < kp; ++kk) {
      // K padding meets zero activations, so its code only has to be valid: the zero, rounded.
      const float pad =
          std::clamp(std::nearbyint(z[static_cast<size_t>(kk / gs)]), 0.0f, static_cast<float>(max_code(f)));
      const uint8_t c = kk < k ? codes[static_cast<size_t>(r) * ldc + kk] : static_cast<uint8_t>(pad);
      if (c > max_code(f)) throw std::invalid_argument("pack_quant_linear_codes: code out of range");
      row[static_cast<size_t>(kk)] = c;
    }
    put_row(dst, f, k, r, row.data(), scales + static_cast<size_t>(r) * groups, z.data());
  }
}

void dequantize_quant_linear(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int n, int k) {
  dequantize_quant_rows(w, ldw, packed, f, k, 0, n);
}

void dequantize_quant_rows(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int k, int first,
                           int rows) {
  check_quant_format(f);
  if (f.k_quant) {
    detail::dequantize_kquant_rows(w, ldw, packed, f, k, first, rows);
    return;
  }
  const size_t panel_bytes = quant_panel_bytes(f, k);
  const int kp = quant_padded_k(f, k), groups = quant_groups(f, k), gs = quant_group_size(f, k);
  const size_t code_bytes = static_cast<size_t>(kp) * kQuantPanelCols * f.bits / 8;
  for (int r = first; r < first + rows; ++r) {
    const uint8_t* panel = packed + static_cast<size_t>(r / kQuantPanelCols) * panel_bytes;
    const int c = r % kQuantPanelCols;
    const auto* meta = reinterpret_cast<const bf16_t*>(panel + code_bytes);
    for (int kk = 0; kk < k; ++kk) {
      bool high = false;
      const uint8_t b = panel[detail::code_offset(f.bits, c, kk, &high)];
      const int code = f.bits == 8 ? b : (high ? b >> 4 : b & 0x0f);
      const size_t g = static_cast<size_t>(kk / gs);
      const float scale = bf16_to_f32(meta[g * kQuantPanelCols + c]);
      const float zero = f.zero_point ? bf16_to_f32(meta[(groups + g) * kQuantPanelCols + c])
                                      : static_cast<float>(detail::implied_zero(f.bits));
      w[static_cast<size_t>(r - first) * ldw + kk] = scale * (static_cast<float>(code) - zero);
    }
  }
}

}  // namespace slab::kern
