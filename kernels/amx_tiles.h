#pragma once
// What the AMX kernels (linear_bf16_amx.cpp, linear_quant_amx.cpp, attention_amx.cpp) share
// about the tile registers: LDTILECFG's operand, a thread's tile state, and a scalar model of the
// tile instructions the kernels use, so that their tiling, configuration and epilogue run in
// tests on CPUs without AMX.
//
// The model (AmxEmulator) does what the hardware does for TILEZERO, TILELOADD, TILESTORED,
// TDPBSUD (C[m][n] += Σ_{k, i<4} s8(A[m][4k+i]) · u8(B[k][4n+i]), INT32, wrapping) and TDPBF16PS
// (per k: C[m][n] += a0·b0, then += a1·b1, the BF16 pairs A[m][2k..2k+1] and B[k][2n..2n+1]
// widened to FP32; each product is exact in FP32 and each add rounds to nearest even; denormal
// inputs and results are zero, as the instruction's DAZ/FTZ), and throws std::logic_error where
// the hardware would fault or compute with a misconfigured shape: a tile used before LDTILECFG or
// after TILERELEASE, a palette other than 1, rows over 16 or bytes per row over 64, a tile of zero
// rows used, and operands that do not chain (A's bytes per row = 4 × B's rows, C's rows = A's
// rows, C's bytes per row = B's). Loads and stores touch exactly rows × colsb bytes, as the
// hardware does, so address sanitizers see the same accesses.
#include <array>
#include <cstddef>
#include <cstdint>

namespace slab::kern {

inline constexpr int kAmxTiles = 8;
inline constexpr int kAmxMaxRows = 16;
inline constexpr int kAmxMaxRowBytes = 64;

// LDTILECFG's 64-byte operand (palette 1).
struct alignas(64) AmxTileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};

  // Tile t as rows × colsb bytes (0 rows: unused, colsb 0 too).
  void set(int tile, int tile_rows, int row_bytes) {
    rows[tile] = static_cast<uint8_t>(tile_rows);
    colsb[tile] = static_cast<uint16_t>(tile_rows > 0 ? row_bytes : 0);
  }
};
static_assert(sizeof(AmxTileConfig) == 64);

class AmxEmulator {
 public:
  void load_config(const AmxTileConfig& cfg);
  void release();
  void zero(int t);
  void load(int t, const void* src, size_t stride);
  void store(int t, void* dst, size_t stride) const;
  void dpbsud(int c, int a, int b);
  void dpbf16ps(int c, int a, int b);

 private:
  struct Tile {
    int rows = 0;
    int colsb = 0;
    alignas(64) uint8_t data[kAmxMaxRows][kAmxMaxRowBytes] = {};
  };
  const Tile& used(int t) const;
  Tile& used(int t);
  // Checks that C, A and B chain, then calls fn(c_element, a_row, b, n) for each 4-byte element
  // n of each row m of C (a_row = A's row m): the walk both dot products share.
  template <typename Fn>
  void for_each_c_element(const char* op, int c, int a, int b, Fn&& fn);

  std::array<Tile, kAmxTiles> tiles_{};
  bool configured_ = false;
};

namespace detail {

// A thread's tile state in a BF16 AMX kernel (the linear's block, the attention's prefill block):
// the row count its configuration was loaded for (0: none; the tiles are released); with
// `emulator` set the tile instructions run on it instead of the hardware.
struct AmxTiles {
  int rows = 0;
  AmxEmulator* emulator = nullptr;
};
// Releases the tile state (TILERELEASE) if configured, so context switches stop saving it.
void amx_release(AmxTiles& tiles);

}  // namespace detail

}  // namespace slab::kern
