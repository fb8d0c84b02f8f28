#include "kernels/amx_tiles.h"

#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/amx_backend.h"

namespace slab::kern {

namespace {
[[noreturn]] void fault(const std::string& what) { throw std::logic_error("AMX emulator: " + what); }
}  // namespace

void AmxEmulator::load_config(const AmxTileConfig& cfg) {
  if (cfg.palette != 1) fault("palette " + std::to_string(cfg.palette) + " (only palette 1 exists)");
  for (int t = 0; t < kAmxTiles; ++t) {
    const int rows = cfg.rows[t], colsb = cfg.colsb[t];
    if (rows > kAmxMaxRows || colsb > kAmxMaxRowBytes || colsb % 4 != 0) {
      fault("tile " + std::to_string(t) + " configured as " + std::to_string(rows) + " rows x " +
            std::to_string(colsb) + " bytes");
    }
    tiles_[t].rows = rows;
    tiles_[t].colsb = colsb;
    std::memset(tiles_[t].data, 0, sizeof(tiles_[t].data));  // LDTILECFG zeroes the tiles
  }
  configured_ = true;
}

void AmxEmulator::release() { configured_ = false; }

const AmxEmulator::Tile& AmxEmulator::used(int t) const {
  if (!configured_) fault("tile instruction without a loaded configuration");
  if (t < 0 || t >= kAmxTiles) fault("no tile " + std::to_string(t));
  const Tile& tile = tiles_[t];
  if (tile.rows == 0 || tile.colsb == 0) fault("tile " + std::to_string(t) + " is not configured");
  return tile;
}
AmxEmulator::Tile& AmxEmulator::used(int t) { return const_cast<Tile&>(static_cast<const AmxEmulator&>(*this).used(t)); }

void AmxEmulator::zero(int t) {
  Tile& tile = used(t);
  std::memset(tile.data, 0, sizeof(tile.data));
}

void AmxEmulator::load(int t, const void* src, size_t stride) {
  Tile& tile = used(t);
  std::memset(tile.data, 0, sizeof(tile.data));
  const auto* p = static_cast<const uint8_t*>(src);
  for (int r = 0; r < tile.rows; ++r) std::memcpy(tile.data[r], p + static_cast<size_t>(r) * stride, tile.colsb);
}

void AmxEmulator::store(int t, void* dst, size_t stride) const {
  const Tile& tile = used(t);
  auto* p = static_cast<uint8_t*>(dst);
  for (int r = 0; r < tile.rows; ++r) std::memcpy(p + static_cast<size_t>(r) * stride, tile.data[r], tile.colsb);
}

template <typename Fn>
void AmxEmulator::for_each_c_element(const char* op, int c, int a, int b, Fn&& fn) {
  if (c == a || c == b || a == b) fault(std::string(op) + " needs three different tiles");
  Tile& tc = used(c);
  const Tile& ta = used(a);
  const Tile& tb = used(b);
  if (ta.colsb != 4 * tb.rows || tc.rows != ta.rows || tc.colsb != tb.colsb) {
    fault(std::string(op) + " shapes do not chain: C " + std::to_string(tc.rows) + "x" + std::to_string(tc.colsb) +
          ", A " + std::to_string(ta.rows) + "x" + std::to_string(ta.colsb) + ", B " + std::to_string(tb.rows) + "x" +
          std::to_string(tb.colsb));
  }
  for (int m = 0; m < tc.rows; ++m) {
    for (int n = 0; n < tc.colsb / 4; ++n) fn(tc.data[m] + 4 * n, ta.data[m], tb, n);
  }
}

void AmxEmulator::dpbsud(int c, int a, int b) {
  for_each_c_element("TDPBSUD", c, a, b, [](uint8_t* out, const uint8_t* a_row, const Tile& tb, int n) {
    int32_t acc;
    std::memcpy(&acc, out, 4);
    // Wrapping INT32 arithmetic, as the instruction's.
    uint32_t sum = static_cast<uint32_t>(acc);
    for (int k = 0; k < tb.rows; ++k) {
      for (int i = 0; i < 4; ++i) {
        const int32_t prod = static_cast<int8_t>(a_row[4 * k + i]) * static_cast<int32_t>(tb.data[k][4 * n + i]);
        sum += static_cast<uint32_t>(prod);
      }
    }
    acc = static_cast<int32_t>(sum);
    std::memcpy(out, &acc, 4);
  });
}

namespace {
// A BF16 (the high half of an FP32) or FP32 value with a denormal flushed to a signed zero.
float flushed(uint32_t bits) {
  if ((bits & 0x7f800000u) == 0) bits &= 0x80000000u;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}
float bf16_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return flushed(static_cast<uint32_t>(h) << 16);
}
float flush(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return flushed(bits);
}
}  // namespace

void AmxEmulator::dpbf16ps(int c, int a, int b) {
  for_each_c_element("TDPBF16PS", c, a, b, [](uint8_t* out, const uint8_t* a_row, const Tile& tb, int n) {
    float acc;
    std::memcpy(&acc, out, 4);
    acc = flush(acc);
    for (int k = 0; k < tb.rows; ++k) {
      // BF16 × BF16 needs 16 significant bits: exact in FP32, so one rounding per add.
      acc = flush(acc + bf16_at(a_row + 4 * k) * bf16_at(tb.data[k] + 4 * n));
      acc = flush(acc + bf16_at(a_row + 4 * k + 2) * bf16_at(tb.data[k] + 4 * n + 2));
    }
    std::memcpy(out, &acc, 4);
  });
}

namespace detail {

SLAB_AMX_KERNEL void amx_release(AmxTiles& tiles) {
  if (tiles.rows == 0) return;
  release_tiles(tiles.emulator);
  tiles.rows = 0;
}

}  // namespace detail

}  // namespace slab::kern
