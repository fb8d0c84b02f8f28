// The quantized linear on AMX INT8 tiles (kernels/linear_quant_amx.cpp).
//
// The AMX path computes the same integers (Σ xq · code per activation block, exact) and then the
// register tiles' FP32 epilogue in the same order, so its output must equal theirs (and the
// scalar tile's) bit for bit; test_linear_quant.cpp holds the scalar path to the documented reference. Two ways
// to run it: on the tile instructions of an AMX CPU, and on kern::AmxEmulator, a scalar model of
// those instructions that checks the tiling's configuration and operand shapes, on any CPU with
// the AVX-512 quantized kernels (the tile's epilogue is AVX-512). Each skipped way is named.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/amx_tiles.h"
#include "kernels/linear_quant.h"
#include "runtime/cpu_features.h"

using namespace slab;
using namespace slab::kern;

// C[m][n] += Σ_k s8(A[m][k]) · u8(B'[k][n]) with B given in the tile's 4-k-per-lane layout,
// written out from the instruction's definition.
TEST_CASE("AMX emulator: TDPBSUD multiplies signed A bytes by unsigned B bytes into INT32", "[kernels][quant]") {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (const int rows : {1, 5, 16}) {
    for (const int a_bytes : {16, 32, 64}) {
      INFO("rows " << rows << " A bytes per row " << a_bytes);
      const int k4 = a_bytes / 4, cols = 12;  // B: k4 rows × 12 columns × 4 bytes
      AmxTileConfig cfg;
      cfg.set(0, rows, 4 * cols);
      cfg.set(1, rows, a_bytes);
      cfg.set(2, k4, 4 * cols);
      std::vector<uint8_t> a(static_cast<size_t>(rows) * 80), b(static_cast<size_t>(k4) * 64);
      std::vector<int32_t> c0(static_cast<size_t>(rows) * 20);
      for (auto& v : a) v = static_cast<uint8_t>(byte(rng));
      for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
      for (auto& v : c0) v = byte(rng) * 1000 - 128000;
      AmxEmulator e;
      e.load_config(cfg);
      e.load(0, c0.data(), 20 * sizeof(int32_t));
      e.load(1, a.data(), 80);
      e.load(2, b.data(), 64);
      e.dpbsud(0, 1, 2);
      std::vector<int32_t> got(static_cast<size_t>(rows) * 20, 77);
      e.store(0, got.data(), 20 * sizeof(int32_t));
      for (int m = 0; m < rows; ++m) {
        for (int n = 0; n < 20; ++n) {
          int64_t want = c0[static_cast<size_t>(m) * 20 + n];
          if (n >= cols) {
            REQUIRE(got[static_cast<size_t>(m) * 20 + n] == 77);  // past colsb: not written
            continue;
          }
          for (int k = 0; k < a_bytes; ++k) {
            want += static_cast<int8_t>(a[static_cast<size_t>(m) * 80 + k]) *
                    static_cast<int64_t>(b[static_cast<size_t>(k / 4) * 64 + 4 * n + k % 4]);
          }
          REQUIRE(got[static_cast<size_t>(m) * 20 + n] == want);
        }
      }
    }
  }
}

namespace {
uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);  // exact for the values below (low half zero)
}
float f32_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
}  // namespace

// TDPBF16PS per the SDM: for each k, C += a0·b0 then C += a1·b1 (FP32, round to nearest even),
// denormal inputs and results as zero. Exact cases that tell the order and the flushing apart,
// then random tiles against a double-precision sum.
TEST_CASE("AMX emulator: TDPBF16PS adds BF16 pair products into FP32 in order, denormals as zero",
          "[kernels][quant]") {
  AmxTileConfig cfg;
  cfg.set(0, 1, 4);  // C: 1 × 1 FP32
  cfg.set(1, 1, 4);  // A: 1 row, one BF16 pair
  cfg.set(2, 1, 4);  // B: one k-pair row, one column
  const auto run1 = [&](float c, float a0, float a1, float b0, float b1) {
    AmxEmulator e;
    e.load_config(cfg);
    const uint16_t a[2] = {bf16_bits(a0), bf16_bits(a1)}, b[2] = {bf16_bits(b0), bf16_bits(b1)};
    e.load(0, &c, 4);
    e.load(1, a, 4);
    e.load(2, b, 4);
    e.dpbf16ps(0, 1, 2);
    float out = 0;
    e.store(0, &out, 4);
    return out;
  };
  const float half_ulp = std::ldexp(1.0f, -24);  // of 1.0: 1 + 2^-24 rounds back to 1 (even)
  CHECK(run1(1.0f, half_ulp, half_ulp, 1.0f, 1.0f) == 1.0f);   // two roundings, not one
  CHECK(run1(0.0f, 3.0f, -2.0f, 0.5f, 4.0f) == -6.5f);
  const float denormal = f32_of(0x00400000u);  // 2^-127, a BF16 denormal
  CHECK(run1(0.0f, denormal, 0.0f, std::ldexp(1.0f, 100), 0.0f) == 0.0f);  // DAZ: not 2^-27
  // FTZ: 1.5 · 2^-126 − 2^-126 = 2^-127, a denormal result, is stored as zero.
  CHECK(run1(1.5f * std::ldexp(1.0f, -126), -std::ldexp(1.0f, -126), 0.0f, 1.0f, 0.0f) == 0.0f);
  CHECK(run1(2.0f * std::ldexp(1.0f, -126), -std::ldexp(1.0f, -126), 0.0f, 1.0f, 0.0f) == std::ldexp(1.0f, -126));

  std::mt19937 rng(11);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  AmxTileConfig big;
  big.set(0, 16, 64);
  big.set(1, 16, 64);
  big.set(2, 16, 64);
  std::vector<uint16_t> a(16 * 32), b(16 * 32);
  std::vector<float> c(16 * 16), got(16 * 16);
  for (auto& v : a) v = bf16_bits(f32_of(static_cast<uint32_t>(bf16_bits(dist(rng))) << 16));
  for (auto& v : b) v = bf16_bits(f32_of(static_cast<uint32_t>(bf16_bits(dist(rng))) << 16));
  for (auto& v : c) v = dist(rng);
  AmxEmulator e;
  e.load_config(big);
  e.load(0, c.data(), 64);
  e.load(1, a.data(), 64);
  e.load(2, b.data(), 64);
  e.dpbf16ps(0, 1, 2);
  e.store(0, got.data(), 64);
  for (int m = 0; m < 16; ++m) {
    for (int n = 0; n < 16; ++n) {
      double want = c[static_cast<size_t>(m) * 16 + n], mag = std::fabs(want);
      for (int k = 0; k < 32; ++k) {
        const double p = static_cast<double>(f32_of(static_cast<uint32_t>(a[static_cast<size_t>(m) * 32 + k]) << 16)) *
                         f32_of(static_cast<uint32_t>(b[static_cast<size_t>(k / 2) * 32 + 2 * n + k % 2]) << 16);
        want += p;
        mag += std::fabs(p);
      }
      INFO("m " << m << " n " << n);
      CHECK(std::fabs(got[static_cast<size_t>(m) * 16 + n] - want) <= 33 * std::ldexp(mag, -24));
    }
  }
  CHECK_THROWS_WITH(e.dpbf16ps(0, 0, 2), Catch::Contains("TDPBF16PS needs three different tiles"));
}

TEST_CASE("AMX emulator faults where the hardware would", "[kernels][quant]") {
  AmxEmulator e;
  std::vector<uint8_t> buf(4096);
  CHECK_THROWS_WITH(e.zero(0), Catch::Contains("without a loaded configuration"));
  AmxTileConfig bad;
  bad.set(0, 17, 64);
  CHECK_THROWS_WITH(e.load_config(bad), Catch::Contains("17 rows"));
  AmxTileConfig wide;
  wide.set(0, 16, 68);
  CHECK_THROWS_WITH(e.load_config(wide), Catch::Contains("68 bytes"));
  AmxTileConfig palette;
  palette.palette = 0;
  CHECK_THROWS_WITH(e.load_config(palette), Catch::Contains("palette"));
  AmxTileConfig cfg;
  cfg.set(0, 16, 64);
  cfg.set(1, 16, 32);  // A: K = 32 bytes
  cfg.set(2, 16, 64);  // B: 16 rows = K 64: does not chain with A
  e.load_config(cfg);
  CHECK_THROWS_WITH(e.load(3, buf.data(), 64), Catch::Contains("not configured"));
  CHECK_THROWS_WITH(e.dpbsud(0, 1, 2), Catch::Contains("do not chain"));
  CHECK_THROWS_WITH(e.dpbsud(0, 0, 2), Catch::Contains("three different tiles"));
  e.release();
  CHECK_THROWS_WITH(e.store(0, buf.data(), 64), Catch::Contains("without a loaded configuration"));
}

namespace {

struct AmxCase {
  QuantFormat f;
  int m, n, k;
  bool swiglu = false;
  bool epilogue = false;  // bias + residual, BF16 out
};

// out of quant_linear over n_threads threads run one after another (prepare on all, then
// compute), as FP32 (BF16 outputs widened).
std::vector<float> run(const AmxCase& c, const std::vector<uint8_t>& packed, const std::vector<bf16_t>& x,
                       const std::vector<float>& bias, const std::vector<float>& residual, Isa isa, bool amx,
                       bool emulated, int n_threads, bool cursor_in_turn = false, bool amx_bf16 = false) {
  const int n_out = c.swiglu ? c.n / 2 : c.n;
  QuantLinearArgs a;
  a.x = x.data();
  a.ldx = static_cast<size_t>(c.k) + 3;
  a.w = {packed.data(), c.f, c.n, c.k};
  a.m = c.m;
  std::vector<float> out_f(static_cast<size_t>(c.m) * n_out, -1.0f);
  std::vector<bf16_t> out_b(out_f.size(), 0);
  if (c.swiglu || c.epilogue) {
    a.out_bf16 = out_b.data();
  } else {
    a.out_f32 = out_f.data();
  }
  a.ldo = static_cast<size_t>(n_out);
  if (c.epilogue) {
    a.bias = bias.data();
    a.residual = residual.data();
    a.ldr = static_cast<size_t>(c.n);
  }
  a.swiglu = c.swiglu;
  a.isa = isa;
  a.amx = amx;
  a.amx_emulated = emulated;
  a.amx_bf16 = amx_bf16;
  if (amx_bf16) {
    REQUIRE(quant_linear_uses_amx_bf16(a));
    REQUIRE_FALSE(quant_linear_uses_amx(a));
  } else if (amx || emulated) {
    REQUIRE(quant_linear_uses_amx(a));
  }
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(c.m, a.w, n_threads, amx || emulated, amx_bf16) / 8 + 8);
  a.workspace = ws.data();
  for (int t = 0; t < n_threads; ++t) quant_linear_prepare(a, t, n_threads);
  // With the shared counter run in turn, thread 0 takes its own first unit and every unit the
  // counter deals; each later thread finds only its own first one.
  int cursor = 0;
  if (cursor_in_turn) a.work_cursor = &cursor;
  for (int t = 0; t < n_threads; ++t) quant_linear_compute(a, t, n_threads);
  if (a.out_f32) return out_f;
  std::vector<float> widened(out_b.size());
  for (size_t i = 0; i < out_b.size(); ++i) widened[i] = bf16_to_f32(out_b[i]);
  return widened;
}

// Packed weights of the case's format: rounded from normal values, or for the K-quants random
// fields over their whole ranges.
std::vector<uint8_t> packed_weights(const AmxCase& c, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> w(static_cast<size_t>(c.n) * c.k);
  for (auto& v : w) v = normal(rng) * 0.05f;
  std::vector<uint8_t> packed(packed_quant_bytes(c.f, c.n, c.k));
  if (c.f.k_quant) {
    // Random fields over their whole ranges (codes 0..2^bits − 1, 6-bit sub-scales any int8).
    const size_t elems = static_cast<size_t>(c.n) * c.k, sbs = elems / kKQuantSuperK;
    std::uniform_int_distribution<int> code(0, (1 << c.f.bits) - 1), six(0, 63), i8(-128, 127), half(0x1800, 0x2400);
    std::vector<uint8_t> codes(elems), mins(elems / 32);
    std::vector<uint16_t> d(sbs), dmin(sbs);
    std::vector<int8_t> scales(elems / static_cast<size_t>(c.f.group));
    for (auto& v : codes) v = static_cast<uint8_t>(code(rng));
    for (auto& v : mins) v = static_cast<uint8_t>(six(rng));
    for (auto& v : d) v = static_cast<uint16_t>(half(rng));
    for (auto& v : dmin) v = static_cast<uint16_t>(half(rng));
    for (auto& v : scales) v = static_cast<int8_t>(c.f.bits == 6 ? i8(rng) : six(rng));
    const KQuantSource src{codes.data(), static_cast<size_t>(c.k), d.data(), dmin.data(), scales.data(), mins.data()};
    pack_kquant_linear(packed.data(), c.f, src, c.n, c.k);
  } else {
    pack_quant_linear(packed.data(), c.f, w.data(), c.n, c.k, static_cast<size_t>(c.k));
  }
  return packed;
}

void check_amx_case(const AmxCase& c, bool hardware) {
  std::mt19937 rng(static_cast<unsigned>(c.m * 7919 + c.n * 31 + c.k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<uint8_t> packed = packed_weights(c, rng);
  std::vector<bf16_t> x(static_cast<size_t>(c.m) * (c.k + 3));
  for (auto& v : x) v = f32_to_bf16(normal(rng));
  std::vector<float> bias(static_cast<size_t>(c.n)), residual(static_cast<size_t>(c.m) * c.n);
  for (auto& v : bias) v = normal(rng);
  for (auto& v : residual) v = normal(rng);
  // The register tiles equal the scalar tile (the SwiGLU activation's exp differs per ISA, so
  // there the AVX-512 register tiles alone are the reference).
  const std::vector<float> want = run(c, packed, x, bias, residual, Isa::avx512_bf16, false, false, 1);
  if (!c.swiglu) REQUIRE(run(c, packed, x, bias, residual, Isa::scalar, false, false, 1) == want);
  for (const int threads : {1, 3}) {
    for (const bool cursor : {false, true}) {
      INFO("threads " << threads << (cursor ? ", the counter, threads in turn" : ""));
      const std::vector<float> got =
          run(c, packed, x, bias, residual, Isa::avx512_bf16, hardware, !hardware, threads, cursor);
      for (size_t i = 0; i < want.size(); ++i) {
        INFO("row " << i / (want.size() / static_cast<size_t>(c.m)) << " column " << i % (want.size() / c.m));
        REQUIRE(got[i] == want[i]);
      }
    }
  }
}

// "K-quant W4 group 32", "W8 group 32 zero-point": the packing in a test's INFO.
std::string format_name(const QuantFormat& f) {
  return std::string(f.k_quant ? "K-quant " : "") + "W" + std::to_string(f.bits) + " group " + std::to_string(f.group) +
         (f.zero_point ? " zero-point" : "");
}

// Every packing: W8 and W4 per channel, in groups of 32 and 128, with zero points, and the K-quants.
std::vector<QuantFormat> all_formats() {
  return {{8, 0, false}, {8, 32, false}, {8, 128, false}, {8, 32, true},     {4, 0, false},    {4, 32, false},
          {4, 128, false}, {4, 32, true}, {4, 128, true}, kquant4_format(), kquant5_format(), kquant6_format()};
}

void check_amx_cases(bool hardware) {
  for (const QuantFormat& f : all_formats()) {
    // K: 256 (per-channel activation blocks of 128), 200 (padded to 224 or 256: blocks of 32
    // per channel), 384, 512 (two K-quant super-blocks); M: one A tile, two, a partial second,
    // and several row tiles, from the format's fewest AMX rows (W8 16, others 32) up.
    for (const int k : {200, 256, 384, 512}) {
      if (f.group == 128 && k == 200) continue;  // padded to 256: covered by 256
      if (f.k_quant && k % kKQuantSuperK != 0) continue;
      for (const int m : {16, 17, 32, 33, 45, 70}) {
        if (m < quant_amx_min_m(f)) continue;
        AmxCase c{f, m, m == 45 ? 48 : 80, k};
        INFO(format_name(f) << " m " << m << " n " << c.n << " k " << k);
        check_amx_case(c, hardware);
      }
    }
    INFO(format_name(f) << ": SwiGLU, epilogue");
    check_amx_case(AmxCase{f, 40, 64, 256, true, false}, hardware);
    check_amx_case(AmxCase{f, 33, 48, 256, false, true}, hardware);
  }
}

}  // namespace

TEST_CASE("quantized linear on emulated AMX tiles equals the register tiles bit for bit", "[kernels][quant]") {
  if (!cpu_features().has_avx512_quant_kernels()) {
    WARN("emulated AMX INT8 path not tested: its epilogue needs the AVX-512 quantized kernels ("
         << cpu_features().summary() << ")");
    return;
  }
  check_amx_cases(false);
}

TEST_CASE("quantized linear on AMX INT8 tiles equals the register tiles bit for bit", "[kernels][quant]") {
  if (!amx_int8_usable()) {
    WARN("no AMX-INT8 tiles on this CPU (or no tile permission from the kernel): the hardware AMX INT8 path was not "
         "tested ("
         << cpu_features().summary() << ")");
    return;
  }
  check_amx_cases(true);
}

TEST_CASE("the AMX INT8 path takes 16 rows (W8) or 32 (W4, K-quant) and more on the AVX-512 kernels only",
          "[kernels][quant]") {
  QuantLinearArgs a;
  a.w = {nullptr, {8, 32, false}, 64, 256};
  a.isa = Isa::avx512_bf16;
  a.m = 16;
  CHECK_FALSE(quant_linear_uses_amx(a));  // neither flag
  a.amx = true;
  CHECK(quant_linear_uses_amx(a));
  a.m = 15;
  CHECK_FALSE(quant_linear_uses_amx(a));
  for (const QuantFormat& f : {QuantFormat{4, 32, false}, QuantFormat{4, 128, true}, kquant4_format()}) {
    a.w.format = f;
    a.m = 31;
    CHECK_FALSE(quant_linear_uses_amx(a));
    a.m = 32;
    CHECK(quant_linear_uses_amx(a));
  }
  a.w.format = {8, 32, false};
  a.m = 64;
  a.isa = Isa::avx2;
  CHECK_FALSE(quant_linear_uses_amx(a));
  a.isa = Isa::avx512_bf16;
  a.w.format = kquant6_format();
  CHECK(quant_linear_uses_amx(a));
  // W4 and K-quant weights on AMX need room for a panel pair's unpacked codes per thread.
  const PackedQuant w4{nullptr, {4, 32, false}, 64, 256};
  CHECK(quant_linear_workspace_bytes(64, w4, 4, true) == quant_linear_workspace_bytes(64, w4, 4) + 4 * 32 * 256);
  const PackedQuant q4k{nullptr, kquant4_format(), 64, 512};
  CHECK(quant_linear_workspace_bytes(64, q4k, 2, true) == quant_linear_workspace_bytes(64, q4k, 2) + 2 * 32 * 512);
  const PackedQuant w8{nullptr, {8, 32, false}, 64, 256};
  CHECK(quant_linear_workspace_bytes(64, w8, 4, true) == quant_linear_workspace_bytes(64, w8, 4));
}

// ---- the AMX-BF16 prefill (kernels/linear_quant_amx_bf16.cpp) ----
//
// Its reference: the weights dequantized by dequantize_quant_linear (the formats' definition,
// FP32) and rounded to BF16, times the BF16 activations, summed in double, then the epilogue.
// The kernel forms each weight as fma(scale, code, offset), which may round to the other BF16
// neighbour of a tie-close value, and sums in FP32 in its own order: 2^-8 of Σ|x·w| bounds both,
// where a layout or scale mistake costs the size of the sum itself.
namespace {

void check_amx_bf16_case(const AmxCase& c, bool hardware) {
  std::mt19937 rng(static_cast<unsigned>(c.m * 7919 + c.n * 31 + c.k + 5));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const std::vector<uint8_t> packed = packed_weights(c, rng);
  const size_t ldx = static_cast<size_t>(c.k) + 3;
  std::vector<bf16_t> x(static_cast<size_t>(c.m) * ldx);
  for (auto& v : x) v = f32_to_bf16(normal(rng));
  std::vector<float> bias(static_cast<size_t>(c.n)), residual(static_cast<size_t>(c.m) * c.n);
  for (auto& v : bias) v = normal(rng);
  for (auto& v : residual) v = normal(rng);
  std::vector<float> w(static_cast<size_t>(c.n) * c.k);
  dequantize_quant_linear(w.data(), static_cast<size_t>(c.k), packed.data(), c.f, c.n, c.k);
  for (auto& v : w) v = round_to_bf16(v);
  // sum[r][j] and Σ|x·w| of row r, column j.
  const auto dot = [&](int r, int j, double* mag) {
    double s = 0.0;
    *mag = 0.0;
    for (int k = 0; k < c.k; ++k) {
      const double p = static_cast<double>(bf16_to_f32(x[static_cast<size_t>(r) * ldx + k])) *
                       w[static_cast<size_t>(j) * c.k + k];
      s += p;
      *mag += std::fabs(p);
    }
    return s;
  };
  std::vector<float> first;
  for (const int threads : {1, 3}) {
    for (const bool cursor : {false, true}) {
      INFO("threads " << threads << (cursor ? ", the counter, threads in turn" : ""));
      const std::vector<float> got =
          run(c, packed, x, bias, residual, Isa::avx512_bf16, hardware, !hardware, threads, cursor, true);
      if (first.empty()) {
        first = got;
      } else {
        REQUIRE(got == first);  // each panel pair is one thread's, whichever
      }
    }
  }
  const int n_out = c.swiglu ? c.n / 2 : c.n;
  const double rel = std::ldexp(1.0, -8);
  for (int r = 0; r < c.m; ++r) {
    for (int j = 0; j < n_out; ++j) {
      INFO("row " << r << " column " << j);
      const float got = first[static_cast<size_t>(r) * n_out + j];
      double mag = 0.0;
      if (c.swiglu) {
        double mag_up = 0.0;
        const double g = dot(r, j, &mag), u = dot(r, j + n_out, &mag_up);
        const double silu = g / (1.0 + std::exp(-g)), want = silu * u;
        CHECK(std::fabs(got - want) <= rel * (1.1 * mag * std::fabs(u) + std::fabs(silu) * mag_up) +
                                           2 * rel * std::fabs(want) + 1e-6);
        continue;
      }
      double want = dot(r, j, &mag);
      if (c.epilogue) want += bias[static_cast<size_t>(j)] + residual[static_cast<size_t>(r) * c.n + j];
      const double out_round = c.epilogue ? rel * std::fabs(want) : 0.0;  // BF16 out
      CHECK(std::fabs(got - want) <= rel * mag + out_round + 1e-6);
    }
  }
}

// Whether weights of format f take the AMX-BF16 prefill at 64 rows of K = k.
bool takes_amx_bf16(const QuantFormat& f, int k) {
  QuantLinearArgs a;
  a.w = {nullptr, f, 64, k};
  a.isa = Isa::avx512_bf16;
  a.m = 64;
  a.amx_bf16 = true;
  return quant_linear_uses_amx_bf16(a);
}

void check_amx_bf16_cases(bool hardware) {
  for (const QuantFormat& f : all_formats()) {
    // K: one group of 128 and several, blocks of 32 (352: per-channel weights with 32-element
    // activation blocks, as K % 128 != 0), two K-quant super-blocks; M:
    // two full row tiles, a partial third, several; n = 80: an odd last panel (a pair of one).
    // Formats with 128-element blocks (g128, per channel at K % 128 == 0) stay on the INT8 tiles.
    // Once per format, the fewest rows the path takes (20, 40: partial row tiles; 64).
    int cases = 0;
    bool fewest_rows = false;
    for (const int k : {128, 352, 384, 512}) {
      if ((f.k_quant && k % kKQuantSuperK != 0) || (k == 352 && f.group != 0) || !takes_amx_bf16(f, k)) continue;
      for (const int m : {64, 70, 100}) {
        INFO(format_name(f) << " m " << m << " k " << k);
        check_amx_bf16_case(AmxCase{f, m, 80, k}, hardware);
        ++cases;
      }
      if (!fewest_rows) {
        const int m = quant_amx_bf16_min_m(f);
        INFO(format_name(f) << " m " << m << " k " << k);
        check_amx_bf16_case(AmxCase{f, m, 80, k}, hardware);
        ++cases;
        fewest_rows = true;
      }
    }
    const int k_fused = f.group == 0 ? 224 : 256;
    if (takes_amx_bf16(f, k_fused)) {
      INFO(format_name(f) << ": SwiGLU, epilogue, k " << k_fused);
      check_amx_bf16_case(AmxCase{f, 64, 64, k_fused, true, false}, hardware);
      check_amx_bf16_case(AmxCase{f, 65, 48, k_fused, false, true}, hardware);
      cases += 2;
    }
    INFO(format_name(f));
    CHECK(cases == (f.k_quant ? 6 : f.group == 128 ? 0 : f.group == 0 ? 6 : 12));
  }
}

}  // namespace

TEST_CASE("quantized prefill on emulated AMX-BF16 tiles matches the BF16-rounded weights", "[kernels][quant]") {
  if (!cpu_features().has_avx512_quant_kernels()) {
    WARN("emulated AMX-BF16 quantized prefill not tested: its dequantization and epilogue need the AVX-512 "
         "quantized kernels ("
         << cpu_features().summary() << ")");
    return;
  }
  check_amx_bf16_cases(false);
}

TEST_CASE("quantized prefill on AMX-BF16 tiles matches the BF16-rounded weights", "[kernels][quant]") {
  if (!amx_bf16_usable() || !amx_int8_usable()) {
    WARN("no AMX tiles on this CPU (or no tile permission from the kernel): the hardware AMX-BF16 quantized "
         "prefill was not tested ("
         << cpu_features().summary() << ")");
    return;
  }
  check_amx_bf16_cases(true);
}

TEST_CASE("the AMX-BF16 quantized prefill takes from 20 rows (W4, Q5_K, Q6_K), 40 (Q4_K) or 64 (W8) with K a "
          "multiple of 32 and 32-element blocks, AVX-512 only",
          "[kernels][quant]") {
  CHECK(quant_amx_bf16_min_m(QuantFormat{4, 32, false}) == 20);
  CHECK(quant_amx_bf16_min_m(QuantFormat{4, 32, true}) == 20);
  CHECK(quant_amx_bf16_min_m(kquant5_format()) == 20);
  CHECK(quant_amx_bf16_min_m(kquant6_format()) == 20);
  CHECK(quant_amx_bf16_min_m(kquant4_format()) == 40);
  CHECK(quant_amx_bf16_min_m(QuantFormat{8, 32, false}) == 64);
  QuantLinearArgs a;
  a.w = {nullptr, kquant6_format(), 64, 512};
  a.isa = Isa::avx512_bf16;
  a.m = 20;
  a.amx = true;
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));  // not asked
  a.amx_bf16 = true;
  CHECK(quant_linear_uses_amx_bf16(a));
  CHECK_FALSE(quant_linear_uses_amx(a));  // it takes precedence over the INT8 tiles
  a.m = 19;
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));
  CHECK_FALSE(quant_linear_uses_amx(a));  // nor does Q6_K reach the INT8 tiles' 32 rows
  a.w = {nullptr, kquant4_format(), 64, 512};
  a.m = 40;
  CHECK(quant_linear_uses_amx_bf16(a));
  a.m = 39;
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));
  CHECK(quant_linear_uses_amx(a));  // Q4_K of 32 to 39 rows: the INT8 tiles
  a.w = {nullptr, {8, 32, false}, 64, 512};
  a.m = 64;
  CHECK(quant_linear_uses_amx_bf16(a));
  a.m = 63;
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));
  CHECK(quant_linear_uses_amx(a));  // W8 of 16 to 63 rows: the INT8 tiles
  a.w = {nullptr, kquant4_format(), 64, 512};
  a.m = 64;
  a.isa = Isa::avx2;
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));
  a.isa = Isa::avx512_bf16;
  a.w = {nullptr, {8, 32, false}, 64, 200};  // K not a multiple of 32: the INT8 tiles
  CHECK_FALSE(quant_linear_uses_amx_bf16(a));
  CHECK(quant_linear_uses_amx(a));
  // 128-element activation blocks (g128; per channel with K a multiple of 128): the INT8 tiles.
  for (const QuantFormat f : {QuantFormat{8, 128, false}, QuantFormat{4, 128, true}, QuantFormat{8, 0, false},
                              QuantFormat{4, 0, false}}) {
    INFO(format_name(f));
    a.w = {nullptr, f, 64, 512};
    CHECK_FALSE(quant_linear_uses_amx_bf16(a));
    CHECK(quant_linear_uses_amx(a));
  }
  a.w = {nullptr, {8, 0, false}, 64, 352};  // per channel, K % 128 != 0: blocks of 32
  CHECK(quant_linear_uses_amx_bf16(a));
  // Room per thread: the pair as BF16, 64 bytes per k, and its codes unpacked to bytes, 32 per k,
  // but for W8 (its bytes as they are) and 4-bit codes (their nibbles read in place).
  const PackedQuant q4k{nullptr, kquant4_format(), 64, 512};
  const size_t q4k_base = quant_linear_workspace_bytes(64, q4k, 2);
  CHECK(quant_linear_workspace_bytes(64, q4k, 2, true, true) == q4k_base + 2 * 64 * 512);
  CHECK(quant_linear_workspace_bytes(64, q4k, 2, true, false) == q4k_base + 2 * 32 * 512);
  const PackedQuant q6k{nullptr, kquant6_format(), 64, 512};
  CHECK(quant_linear_workspace_bytes(64, q6k, 2, true, true) ==
        quant_linear_workspace_bytes(64, q6k, 2) + 2 * (32 * 512 + 64 * 512));
  const PackedQuant w8{nullptr, {8, 32, false}, 64, 256};
  CHECK(quant_linear_workspace_bytes(64, w8, 3, false, true) == quant_linear_workspace_bytes(64, w8, 3) + 3 * 64 * 256);
  CHECK(quant_linear_workspace_bytes(63, w8, 3, false, true) == quant_linear_workspace_bytes(63, w8, 3));
  const PackedQuant w8_channel{nullptr, {8, 0, false}, 64, 256};
  CHECK(quant_linear_workspace_bytes(64, w8_channel, 3, false, true) ==
        quant_linear_workspace_bytes(64, w8_channel, 3));
}
