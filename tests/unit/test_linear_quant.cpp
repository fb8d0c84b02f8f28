// Quantized linear (INT8 / INT4 weights): packing, dequantizing, rounding, and every format and
// ISA against the references in linear_quant_reference.h (which documents the rules).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/linear_quant.h"
#include "kernels/rowwise_bf16.h"
#include "linear_quant_reference.h"
#include "quant_isas.h"
#include "runtime/thread_pool.h"

using namespace slab;
using namespace slab::kern;
using namespace slab::test::quant_ref;

TEST_CASE("quantized packing puts codes in 16-column panels of 4 (W8) or 8 (W4) k per 32-bit lane", "[quant]") {
  const int n = 17, k = 40;  // two panels; K padded to 64
  std::vector<uint8_t> codes(static_cast<size_t>(n) * k);
  for (int r = 0; r < n; ++r) {
    for (int c = 0; c < k; ++c) codes[static_cast<size_t>(r) * k + c] = static_cast<uint8_t>((r * 7 + c) % 16);
  }
  std::vector<float> scales(static_cast<size_t>(n) * 2, 0.5f);
  for (int bits : {8, 4}) {
    const QuantFormat f{bits, 32, false};
    REQUIRE(quant_padded_k(f, k) == 64);
    REQUIRE(quant_groups(f, k) == 2);
    // Codes, then 2 groups x 16 BF16 scales = 64 bytes.
    REQUIRE(quant_panel_bytes(f, k) == static_cast<size_t>(64 * 16 * bits / 8 + 64));
    std::vector<uint8_t> packed(packed_quant_bytes(f, n, k), 0xff);
    pack_quant_linear_codes(packed.data(), f, codes.data(), static_cast<size_t>(k), scales.data(), nullptr, n, k);
    const size_t panel = quant_panel_bytes(f, k);
    for (int r = 0; r < n; ++r) {
      for (int c = 0; c < k; ++c) {
        const int want = codes[static_cast<size_t>(r) * k + c];
        const size_t base = static_cast<size_t>(r / 16) * panel + 4 * static_cast<size_t>(r % 16);
        if (bits == 8) {
          CHECK(packed[base + static_cast<size_t>(c / 4) * 64 + c % 4] == want);
        } else {
          const uint8_t b = packed[base + static_cast<size_t>(c / 8) * 64 + c % 4];
          CHECK(((c % 8) < 4 ? (b & 0x0f) : (b >> 4)) == want);
        }
      }
      // K padding holds the implied zero: weight 0.
      const size_t base = static_cast<size_t>(r / 16) * panel + 4 * static_cast<size_t>(r % 16);
      if (bits == 8) {
        CHECK(packed[base + 10 * 64 + 1] == 128);  // k = 41
      } else {
        CHECK((packed[base + 5 * 64 + 1] & 0x0f) == 8);  // k = 41
      }
    }
    const auto* meta = reinterpret_cast<const bf16_t*>(packed.data() + 64 * 16 * bits / 8);
    CHECK(meta[0] == f32_to_bf16(0.5f));
    CHECK(meta[16 + 15] == f32_to_bf16(0.5f));
    // Padding columns of the last panel: scale 0, so they contribute nothing.
    const auto* meta2 = reinterpret_cast<const bf16_t*>(packed.data() + panel + 64 * 16 * bits / 8);
    CHECK(meta2[1] == 0);
  }
}

TEST_CASE("quantized packing rejects unknown formats and out-of-range codes", "[quant]") {
  std::vector<uint8_t> buf(4096);
  const uint8_t codes[32] = {16};
  const float scales[1] = {1.0f};
  CHECK_THROWS_AS(check_quant_format({5, 32, false}), std::invalid_argument);
  CHECK_THROWS_AS(check_quant_format({4, 64, false}), std::invalid_argument);
  CHECK_THROWS_AS(pack_quant_linear_codes(buf.data(), {4, 32, false}, codes, 32, scales, nullptr, 1, 32),
                  std::invalid_argument);
  CHECK_NOTHROW(pack_quant_linear_codes(buf.data(), {8, 32, false}, codes, 32, scales, nullptr, 1, 32));
}

TEST_CASE("dequantizing packed codes gives scale times code minus zero exactly", "[quant]") {
  std::mt19937 rng(11);
  for (const auto& [f, fractional] : formats_with_fractional_zeros()) {
    for (auto [n, k] : {std::pair{5, 33}, std::pair{33, 300}}) {
      const QuantMatrix q = make_matrix(f, n, k, rng, fractional);
      std::vector<float> back(static_cast<size_t>(n) * k);
      dequantize_quant_linear(back.data(), static_cast<size_t>(k), q.packed.data(), f, n, k);
      // One row alone, as an embedding lookup reads it: the same values.
      std::vector<float> row(static_cast<size_t>(k));
      dequantize_quant_rows(row.data(), static_cast<size_t>(k), q.packed.data(), f, k, n - 2, 1);
      CHECK(std::equal(row.begin(), row.end(), back.begin() + static_cast<std::ptrdiff_t>(n - 2) * k));
      for (size_t i = 0; i < back.size(); ++i) {
        if (back[i] != static_cast<float>(q.w[i])) {
          FAIL_CHECK(describe(f) << " element " << i << ": " << back[i] << " vs " << q.w[i]);
          break;
        }
      }
    }
  }
}

TEST_CASE("round-to-nearest quantization round trips within half a step", "[quant]") {
  std::mt19937 rng(5);
  std::normal_distribution<float> dist(0.0f, 0.05f);
  const int n = 19, k = 290;
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = dist(rng);
  w[3] = 0.0f;
  for (int c = 0; c < k; ++c) w[static_cast<size_t>(7) * k + c] = 0.0f;  // an all-zero row
  for (const QuantFormat& f : kFormats) {
    std::vector<uint8_t> packed(packed_quant_bytes(f, n, k));
    pack_quant_linear(packed.data(), f, w.data(), n, k, static_cast<size_t>(k));
    std::vector<float> back(w.size());
    dequantize_quant_linear(back.data(), static_cast<size_t>(k), packed.data(), f, n, k);
    // The BF16 input overload quantizes the same values the same way.
    std::vector<bf16_t> wb(w.size());
    std::vector<float> w_rounded(w.size());
    for (size_t i = 0; i < w.size(); ++i) {
      wb[i] = f32_to_bf16(w[i]);
      w_rounded[i] = bf16_to_f32(wb[i]);
    }
    std::vector<uint8_t> packed_b(packed.size()), packed_r(packed.size());
    pack_quant_linear(packed_b.data(), f, wb.data(), n, k, static_cast<size_t>(k));
    pack_quant_linear(packed_r.data(), f, w_rounded.data(), n, k, static_cast<size_t>(k));
    CHECK(packed_b == packed_r);
    const int gs = f.group ? f.group : k;
    // Symmetric W4 maps the group's largest |w| to code -8 (step max|w| / 8); a value of the
    // other sign beyond 7 steps clamps at 7 steps, so within one step, not half.
    const bool w4_symmetric = f.bits == 4 && !f.zero_point;
    const int levels = f.zero_point ? top_code(f) : (f.bits == 8 ? 127 : 8);
    for (int r = 0; r < n; ++r) {
      for (int g = 0; g * gs < k; ++g) {
        float lo = 0.0f, hi = 0.0f;
        for (int c = g * gs; c < std::min(k, (g + 1) * gs); ++c) {
          lo = std::min(lo, w[static_cast<size_t>(r) * k + c]);
          hi = std::max(hi, w[static_cast<size_t>(r) * k + c]);
        }
        const float step = f.zero_point ? (hi - lo) / levels : std::max(-lo, hi) / levels;
        const float extreme = -lo > hi ? lo : hi;
        for (int c = g * gs; c < std::min(k, (g + 1) * gs); ++c) {
          const size_t i = static_cast<size_t>(r) * k + c;
          const bool clamped = w4_symmetric && w[i] * extreme < 0.0f && std::fabs(w[i]) > 7.5f * step;
          if (w4_symmetric && w[i] == extreme && extreme != 0.0f) {
            // The extreme itself is code -8 exactly: off by the scale's BF16 rounding only.
            CHECK(std::fabs(back[i] - w[i]) <= std::fabs(w[i]) / 256.0f);
          }
          // Half a step (a step where clamped), plus the BF16 rounding of the scale over up to
          // 2^bits steps.
          const float within = (clamped ? 1.0f : 0.5f) * step + step * (1 << f.bits) / 256.0f + 1e-9f;
          if (!(std::fabs(back[i] - w[i]) <= within)) {
            FAIL_CHECK(describe(f) << " r " << r << " c " << c << ": " << w[i] << " -> " << back[i] << " step "
                                   << step);
            r = n;
            break;
          }
        }
      }
    }
    CHECK(back[3] == 0.0f);
    for (int c = 0; c < k; ++c) CHECK(back[static_cast<size_t>(7) * k + c] == 0.0f);
  }
}

TEST_CASE("quantized linear matches the reference on ragged shapes for every format and ISA", "[quant]") {
  std::mt19937 rng(2024);
  const std::vector<Isa> isas = test::quant_isas();
  for (const auto& [f, fractional] : formats_with_fractional_zeros()) {
    for (auto [n, k] : {std::pair{1, 40}, std::pair{17, 200}, std::pair{40, 333}, std::pair{70, 130}}) {
      const QuantMatrix q = make_matrix(f, n, k, rng, fractional);
      for (int m : {1, 2, 3, 4, 5, 7, 8, 9, 13, 17, 33, 70}) {
        const Inputs in = make_inputs(m, n, k, rng);
        std::vector<float> scalar_bits;
        for (Isa isa : isas) {
          const std::vector<float> got = run(q, in, Options{}, isa, 1);
          check_against_reference(q, in, Options{}, got, isa);
          // The integer sums are exact and the FP32 epilogue runs the same operations (INT8
          // activations batched, INT16 ones in decode): every ISA gives the scalar path's bits.
          if (isa == Isa::scalar) {
            scalar_bits = got;
          } else if (std::memcmp(got.data(), scalar_bits.data(), got.size() * sizeof(float)) != 0) {
            FAIL_CHECK(isa_name(isa) << " differs from scalar: " << describe(f)
                                     << (fractional ? " fractional zeros" : "") << " m=" << m << " n=" << n
                                     << " k=" << k);
          }
        }
      }
    }
  }
}

TEST_CASE("W8 decode: INT16 activations keep small blocks, zero blocks and rows' bits", "[quant]") {
  // Blocks of x of very different sizes: the decode tiles scale each activation block on its own,
  // so a block of small values keeps its precision beside a block of large ones.
  std::mt19937 rng(77);
  const std::vector<Isa> isas = test::quant_isas();
  const int n = 48, k = 512;
  for (const QuantFormat& f :
       {QuantFormat{8, 0, false}, QuantFormat{8, 32, false}, QuantFormat{8, 128, false}, QuantFormat{8, 32, true}}) {
    const QuantMatrix q = make_matrix(f, n, k, rng);
    Inputs in = make_inputs(3, n, k, rng);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (int r = 0; r < 3; ++r) {
      bf16_t* x = in.x.data() + static_cast<size_t>(r) * in.ldx;
      for (int c = 0; c < 128; ++c) x[c] = f32_to_bf16(1e-3f * dist(rng));  // a small block
      for (int c = 128; c < 256; ++c) {  // a large value among small ones: these get rounded
        x[c] = f32_to_bf16(c % 37 == 0 ? 3.0f : 1e-4f * dist(rng));
      }
      for (int c = 256; c < 384; ++c) x[c] = 0;
      for (int c = 384; c < k; ++c) x[c] = f32_to_bf16(1e-36f * dist(rng));  // below 2^-112
      if (r == 2) {                                                          // a row of nothing but such values
        for (int c = 0; c < k; ++c) x[c] = f32_to_bf16(1e-36f * dist(rng));
      }
    }
    for (Isa isa : isas) {
      const std::vector<float> together = run(q, in, Options{}, isa, 1);
      check_against_reference(q, in, Options{}, together, isa);
      for (float v : together) REQUIRE(std::isfinite(v));
      // Against BF16 x as it is: INT16 activations are off by at most half their step, 2^(E − 16)
      // <= max|x| · 2^-15 of each block, or 2^-127 where max|x| < 2^-112 (the smallest scale), so
      // the output by that times Σ|w| over the block.
      for (int r = 0; r < 3; ++r) {
        for (int c = 0; c < n; ++c) {
          double exact = 0.0, allowed = 1e-44;  // FP32's subnormal steps, for the tiny row
          for (int lo = 0; lo < k; lo += 32) {
            double amax = 0.0, wsum = 0.0;
            for (int kk = lo; kk < lo + 32; ++kk) {
              const double xv = bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + kk]);
              const double wv = q.w[static_cast<size_t>(c) * k + kk];
              exact += xv * wv;
              wsum += std::fabs(wv);
              amax = std::max(amax, std::fabs(xv));
            }
            // Blocks of 128 take their max over four of these 32s: a bound for each.
            double block_max = 0.0;
            for (int kk = lo / 128 * 128; kk < lo / 128 * 128 + 128; ++kk)
              block_max =
                  std::max(block_max, double{std::fabs(bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + kk]))});
            allowed += (std::max(block_max * std::ldexp(1.0, -15), std::ldexp(1.0, -127)) + 4e-6 * amax) * wsum;
          }
          const double got = together[static_cast<size_t>(r) * n + c];
          if (!(std::fabs(got - exact) <= allowed)) {
            FAIL_CHECK(isa_name(isa) << " " << describe(f) << " row " << r << " col " << c << ": got " << got
                                     << " want " << exact << " allowed " << allowed);
          }
        }
      }
      // Each row alone gives the bits it had among the three (speculative decoding relies on it).
      for (int r = 0; r < 3; ++r) {
        Inputs one = in;
        one.m = 1;
        one.x.assign(in.x.begin() + static_cast<std::ptrdiff_t>(r * in.ldx), in.x.end());
        const std::vector<float> alone = run(q, one, Options{}, isa, 1);
        for (int c = 0; c < n; ++c) {
          if (alone[static_cast<size_t>(c)] != together[static_cast<size_t>(r) * n + c]) {
            FAIL_CHECK(isa_name(isa) << " " << describe(f) << " row " << r << " alone differs at col " << c);
            break;
          }
        }
      }
    }
  }
}
