// K-quant formats of the quantized linear (linear_quant.h): packing from a checkpoint's fields,
// reading codes back, dequantizing rows, and the scalar tile (the reference the SIMD tiles in
// linear_kquant_avx512.cpp and linear_kquant_avx2.cpp match bit for bit).
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/linear_quant.h"
#include "kernels/linear_quant_tile.h"

namespace slab::kern {
namespace detail {
namespace {

// Where the code of (column c, super-block-local k) sits in a record: its nibble byte, and for
// 6-bit codes the byte and shift of its top two bits.
struct CodeSpot {
  size_t nibble_byte = 0;
  bool high_nibble = false;
  size_t high_byte = 0;
  int high_shift = 0;
};

CodeSpot code_spot(const KQuantLayout& l, int c, int kk) {
  const int step = kk / 8, j = kk % 8;
  const int lane_byte = 4 * c + j % 4;
  CodeSpot s;
  s.nibble_byte = kquant_nibbles_at(l, step) + static_cast<size_t>(lane_byte);
  s.high_nibble = j >= 4;
  s.high_byte = kquant_high_at(l, step) + static_cast<size_t>(lane_byte % 32);
  s.high_shift = (lane_byte >= 32 ? 4 : 0) + (j >= 4 ? 2 : 0);
  return s;
}

// 5-bit codes: the byte and bit of the fifth bit. A step's 16 bytes hold lane byte L's in byte
// L % 16, bit L / 16 for its low-nibble code and 4 + L / 16 for its high-nibble code (linear_quant.h).
size_t fifth_byte(const KQuantLayout& l, int c, int kk) {
  const int lane_byte = 4 * c + kk % 4;
  return kquant_high_at(l, kk / 8) + static_cast<size_t>(lane_byte % 16);
}
int fifth_shift(int c, int kk) { return (kk % 8 >= 4 ? 4 : 0) + (4 * c + kk % 4) / 16; }

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// Sub-group scale and (4-bit) min of column c, group g of a record; d and dmin as FP32.
struct RecordMaps {
  float d = 0.0f, dmin = 0.0f;
};
RecordMaps record_maps(const uint8_t* rec, const KQuantLayout& l, int bits, int c) {
  RecordMaps m;
  m.d = f16_to_f32(u16_at(rec + l.d + 2 * static_cast<size_t>(c)));
  if (kquant_has_mins(bits)) m.dmin = f16_to_f32(u16_at(rec + l.dmin + 2 * static_cast<size_t>(c)));
  return m;
}
int record_scale(const uint8_t* rec, const KQuantLayout& l, int g, int c) {
  return static_cast<int8_t>(rec[l.scales + 16 * static_cast<size_t>(g) + static_cast<size_t>(c)]);
}
int record_min(const uint8_t* rec, const KQuantLayout& l, int g, int c) {
  return rec[l.mins + 16 * static_cast<size_t>(g) + static_cast<size_t>(c)];
}

}  // namespace

int kquant_code(const uint8_t* panel, int bits, int c, int k) {
  const KQuantLayout l = kquant_layout(bits);
  const uint8_t* rec = panel + static_cast<size_t>(k / kKQuantSuperK) * l.record;
  const CodeSpot s = code_spot(l, c, k % kKQuantSuperK);
  const uint8_t b = rec[s.nibble_byte];
  int code = s.high_nibble ? b >> 4 : b & 0x0f;
  if (bits == 6) code |= ((rec[s.high_byte] >> s.high_shift) & 3) << 4;
  const int kk = k % kKQuantSuperK;
  if (bits == 5) code |= ((rec[fifth_byte(l, c, kk)] >> fifth_shift(c, kk)) & 1) << 4;
  return code;
}

void dequantize_kquant_rows(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int k, int first,
                            int rows) {
  const KQuantLayout l = kquant_layout(f.bits);
  const size_t panel_bytes = quant_panel_bytes(f, k);
  for (int r = first; r < first + rows; ++r) {
    const uint8_t* panel = packed + static_cast<size_t>(r / kQuantPanelCols) * panel_bytes;
    const int c = r % kQuantPanelCols;
    for (int kk = 0; kk < k; ++kk) {
      const uint8_t* rec = panel + static_cast<size_t>(kk / kKQuantSuperK) * l.record;
      const RecordMaps m = record_maps(rec, l, f.bits, c);
      const int g = (kk % kKQuantSuperK) / f.group;
      const int code = kquant_code(panel, f.bits, c, kk);
      float v = 0.0f;
      if (kquant_has_mins(f.bits)) {
        v = m.d * static_cast<float>(record_scale(rec, l, g, c)) * static_cast<float>(code) -
            m.dmin * static_cast<float>(record_min(rec, l, g, c));
      } else {
        v = m.d * static_cast<float>(record_scale(rec, l, g, c)) * static_cast<float>(code - 32);
      }
      w[static_cast<size_t>(r - first) * ldw + kk] = v;
    }
  }
}

void kquant_tile_scalar(const QuantTile& t) {
  const KQuantLayout l = kquant_layout(t.bits);
  for (int r = 0; r < t.mr; ++r) {
    const int8_t* xq = t.xq + static_cast<size_t>(r) * t.ldxq;
    for (int q = 0; q < t.np; ++q) {
      const uint8_t* panel = t.panel + static_cast<size_t>(q) * t.panel_stride;
      for (int c = 0; c < kQuantPanelCols; ++c) {
        float total = 0.0f;
        for (int b = 0; b < t.super_blocks * (kKQuantSuperK / kQuantActBlock); ++b) {
          const int sb = b / (kKQuantSuperK / kQuantActBlock), lb = b % (kKQuantSuperK / kQuantActBlock);
          const uint8_t* rec = panel + static_cast<size_t>(sb) * l.record;
          const RecordMaps m = record_maps(rec, l, t.bits, c);
          const size_t bi = static_cast<size_t>(b) * t.ldxs + static_cast<size_t>(r);
          const float xscale = t.xscale[bi];
          int32_t dot[2] = {0, 0};  // the block's halves
          for (int i = 0; i < kQuantActBlock; ++i) {
            const int kk = b * kQuantActBlock + i;
            dot[i / 16] += xq[kk] * kquant_code(panel, t.bits, c, kk);
          }
          if (kquant_has_mins(t.bits)) {
            const float s = m.d * static_cast<float>(record_scale(rec, l, lb, c));
            const float o = m.dmin * static_cast<float>(record_min(rec, l, lb, c));
            const float inner = std::fma(-o, static_cast<float>(t.xqsum[bi]), s * static_cast<float>(dot[0] + dot[1]));
            total = std::fma(xscale, inner, total);
          } else {
            const int32_t half[2] = {t.xqhalf[bi], t.xqsum[bi] - t.xqhalf[bi]};
            for (int j = 0; j < 2; ++j) {
              const float s = m.d * static_cast<float>(record_scale(rec, l, 2 * lb + j, c));
              total = std::fma(xscale * s, static_cast<float>(dot[j] - 32 * half[j]), total);
            }
          }
        }
        t.out[static_cast<size_t>(r) * kQuantTileCols + q * kQuantPanelCols + c] = total;
      }
    }
  }
}

}  // namespace detail

void pack_kquant_linear(uint8_t* dst, const QuantFormat& f, const KQuantSource& src, int n, int k) {
  check_quant_format(f);
  if (!f.k_quant) throw std::invalid_argument("pack_kquant_linear: not a K-quant format");
  if (n <= 0 || k <= 0 || k % kKQuantSuperK != 0) {
    throw std::invalid_argument("pack_kquant_linear: K " + std::to_string(k) + " is not a multiple of 256");
  }
  const bool mins = detail::kquant_has_mins(f.bits);
  if (!src.codes || !src.d || !src.scales || (mins && (!src.dmin || !src.mins)) || src.ldc < static_cast<size_t>(k)) {
    throw std::invalid_argument("pack_kquant_linear: missing fields");
  }
  const detail::KQuantLayout l = detail::kquant_layout(f.bits);
  const size_t panel_bytes = quant_panel_bytes(f, k);
  std::memset(dst, 0, packed_quant_bytes(f, n, k));
  const int sbs = k / kKQuantSuperK, groups = k / f.group, sub = kKQuantSuperK / f.group;
  const int top = (1 << f.bits) - 1;
  for (int r = 0; r < n; ++r) {
    uint8_t* panel = dst + static_cast<size_t>(r / kQuantPanelCols) * panel_bytes;
    const int c = r % kQuantPanelCols;
    for (int sb = 0; sb < sbs; ++sb) {
      uint8_t* rec = panel + static_cast<size_t>(sb) * l.record;
      const size_t at = static_cast<size_t>(r) * sbs + static_cast<size_t>(sb);
      std::memcpy(rec + l.d + 2 * static_cast<size_t>(c), src.d + at, 2);
      if (mins) std::memcpy(rec + l.dmin + 2 * static_cast<size_t>(c), src.dmin + at, 2);
      for (int g = 0; g < sub; ++g) {
        const size_t gi = static_cast<size_t>(r) * groups + static_cast<size_t>(sb * sub + g);
        const int8_t sc = src.scales[gi];
        if (mins && (sc < 0 || sc > 63)) throw std::invalid_argument("pack_kquant_linear: scale out of 0..63");
        rec[l.scales + 16 * static_cast<size_t>(g) + static_cast<size_t>(c)] = static_cast<uint8_t>(sc);
        if (mins) {
          const uint8_t mn = src.mins[gi];
          if (mn > 63) throw std::invalid_argument("pack_kquant_linear: min out of 0..63");
          rec[l.mins + 16 * static_cast<size_t>(g) + static_cast<size_t>(c)] = mn;
        }
      }
      for (int kk = 0; kk < kKQuantSuperK; ++kk) {
        const uint8_t code = src.codes[static_cast<size_t>(r) * src.ldc + static_cast<size_t>(sb * kKQuantSuperK + kk)];
        if (code > top) throw std::invalid_argument("pack_kquant_linear: code out of range");
        const auto s = detail::code_spot(l, c, kk);
        rec[s.nibble_byte] |= static_cast<uint8_t>((code & 0x0f) << (s.high_nibble ? 4 : 0));
        if (f.bits == 6) rec[s.high_byte] |= static_cast<uint8_t>((code >> 4) << s.high_shift);
        if (f.bits == 5) {
          rec[detail::fifth_byte(l, c, kk)] |= static_cast<uint8_t>((code >> 4) << detail::fifth_shift(c, kk));
        }
      }
    }
  }
}

}  // namespace slab::kern
