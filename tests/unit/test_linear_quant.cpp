// Quantized linear (INT8 / INT4 weights) against references written here from the documented
// format, not from the kernel's helpers: W = scale · (code − zero) in double, activations
// quantized to INT8 by the documented rule for M > 8.
//
// W8 decode (M <= 8, weight-only) turns x to INT16 first (quant_int16_activations): per
// activation block, with max|x| = m · 2^E (0.5 <= m < 1, E at least −111), x16 = round(x ·
// 2^(15 − E)) and scale 2^(E − 15). The reference takes those x16 · scale values (computed here
// from that rule) in place of x. The kernels' integer sums are exact and each block's epilogue
// rounds a few times relative to
//   S = Σ_k |x16_k · scale| · scale_g · (code + 128 + zero),
// so the check allows 2e-6·S (a wrong code, scale or column shifts the result by at least
// ~scale·|x|, far above that); every SIMD path must equal the scalar one bit for bit.
// INT8 activations (M > 8, and W4 at every M, as linear_quant.h documents): activations are
// quantized per block of 32 along K (one scale per block); the integer part is exact, so every
// SIMD path must equal the scalar path bit for bit; against the double reference the only
// rounding is FP32 scale arithmetic.
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
#include "quant_isas.h"
#include "runtime/thread_pool.h"

using namespace slab;
using namespace slab::kern;

namespace {

int top_code(const QuantFormat& f) { return (1 << f.bits) - 1; }
// The documented rule, written out here: INT8 activations above 8 rows, and always for W4.
bool int8_activations(const QuantFormat& f, int m) { return m > 8 || f.bits == 4; }
int implied_zero_of(const QuantFormat& f) { return f.bits == 8 ? 128 : 8; }

std::string describe(const QuantFormat& f) {
  std::ostringstream s;
  s << "W" << f.bits << " group " << f.group << (f.zero_point ? " zero-point" : " symmetric");
  return s.str();
}

// A quantized matrix given by its codes, scales and zeros, and its reference values.
struct QuantMatrix {
  QuantFormat f;
  int n = 0, k = 0, groups = 0, gs = 0;
  std::vector<uint8_t> codes;        // [n][k]
  std::vector<float> scales, zeros;  // [n][groups], BF16-representable
  std::vector<double> w;             // [n][k] = scale · (code − zero)
  std::vector<uint8_t> packed;
};

// fractional_zeros: zero points anywhere in [0, top code] (GGUF K-quant mins), not only integers.
QuantMatrix make_matrix(const QuantFormat& f, int n, int k, std::mt19937& rng, bool fractional_zeros = false) {
  QuantMatrix q;
  q.f = f;
  q.n = n;
  q.k = k;
  // Independent of quant_groups(): one group for the whole row, else ceil(k / group).
  q.groups = f.group ? (k + f.group - 1) / f.group : 1;
  q.gs = f.group ? f.group : k;
  std::uniform_int_distribution<int> code(0, top_code(f));
  std::uniform_real_distribution<float> scale(0.001f, 0.02f);
  q.codes.resize(static_cast<size_t>(n) * k);
  for (auto& c : q.codes) c = static_cast<uint8_t>(code(rng));
  q.scales.resize(static_cast<size_t>(n) * q.groups);
  for (auto& s : q.scales) s = round_to_bf16(scale(rng));
  q.zeros.resize(q.scales.size());
  std::uniform_real_distribution<float> real_zero(0.0f, static_cast<float>(top_code(f)));
  for (auto& z : q.zeros) {
    if (!f.zero_point) {
      z = static_cast<float>(implied_zero_of(f));
    } else {
      // Not below 2^-6, so that code − zero stays exact in FP32 (as dequantize's test expects).
      const float real = std::min(round_to_bf16(real_zero(rng)), static_cast<float>(top_code(f)));
      z = fractional_zeros ? (real < 0.015625f ? 0.0f : real) : static_cast<float>(code(rng));
    }
  }
  q.w.resize(q.codes.size());
  for (int r = 0; r < n; ++r) {
    for (int kk = 0; kk < k; ++kk) {
      const size_t g = static_cast<size_t>(r) * q.groups + static_cast<size_t>(kk / q.gs);
      q.w[static_cast<size_t>(r) * k + kk] =
          double{q.scales[g]} * (q.codes[static_cast<size_t>(r) * k + kk] - double{q.zeros[g]});
    }
  }
  q.packed.assign(packed_quant_bytes(f, n, k), 0xa5);
  pack_quant_linear_codes(q.packed.data(), f, q.codes.data(), static_cast<size_t>(k), q.scales.data(),
                          f.zero_point ? q.zeros.data() : nullptr, n, k);
  return q;
}

struct Options {
  bool bias = false;
  bool residual = false;
  bool bf16_out = false;
  bool in_place = false;  // residual == out_f32
};

struct Inputs {
  int m = 0;
  size_t ldx = 0, ldo = 0, ldr = 0;
  std::vector<bf16_t> x;  // [m][ldx], padding NaN
  std::vector<float> bias, residual;
};

Inputs make_inputs(int m, int n, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Inputs in;
  in.m = m;
  in.ldx = static_cast<size_t>(k) + 3;
  in.ldo = static_cast<size_t>(n) + 5;
  in.ldr = static_cast<size_t>(n) + 2;
  in.x.assign(static_cast<size_t>(m) * in.ldx + 1, 0x7fc0);  // NaN padding must not be read
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) in.x[static_cast<size_t>(r) * in.ldx + c] = f32_to_bf16(dist(rng));
  }
  in.bias.resize(static_cast<size_t>(n));
  for (float& v : in.bias) v = dist(rng);
  in.residual.resize(static_cast<size_t>(m) * in.ldr);
  for (float& v : in.residual) v = 4.0f * dist(rng);
  return in;
}

// The arguments every call shares: q's weights and in's rows (no output, scratch or epilogue yet).
QuantLinearArgs args_for(const QuantMatrix& q, const Inputs& in, Isa isa) {
  QuantLinearArgs a;
  a.x = in.x.data();
  a.ldx = in.ldx;
  a.w = {q.packed.data(), q.f, q.n, q.k};
  a.m = in.m;
  a.isa = isa;
  return a;
}

// Runs the kernel as n_threads threads would: every thread's phase 1, then every phase 2.
std::vector<float> run(const QuantMatrix& q, const Inputs& in, const Options& o, Isa isa, int n_threads) {
  const int m = in.m, n = q.n;
  std::vector<float> out(static_cast<size_t>(m) * in.ldo + 1, 12345.0f);
  std::vector<bf16_t> out_b(out.size(), 0x4242);
  if (o.in_place) {
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n; ++c)
        out[static_cast<size_t>(r) * in.ldo + c] = in.residual[static_cast<size_t>(r) * in.ldr + c];
    }
  }
  QuantLinearArgs a;
  a.x = in.x.data();
  a.ldx = in.ldx;
  a.w = {q.packed.data(), q.f, n, q.k};
  a.m = m;
  if (o.bf16_out) {
    a.out_bf16 = out_b.data();
  } else {
    a.out_f32 = out.data();
  }
  a.ldo = in.ldo;
  a.bias = o.bias ? in.bias.data() : nullptr;
  if (o.in_place) {
    a.residual = out.data();
    a.ldr = in.ldo;
  } else if (o.residual) {
    a.residual = in.residual.data();
    a.ldr = in.ldr;
  }
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(m, a.w, n_threads) / 8 + 8, 0xdeadbeefdeadbeefull);
  a.workspace = ws.data();
  a.isa = isa;
  if (quant_linear_needs_prepare(m)) {
    for (int t = 0; t < n_threads; ++t) quant_linear_prepare(a, t, n_threads);
  }
  for (int t = 0; t < n_threads; ++t) quant_linear_compute(a, t, n_threads);
  for (int r = 0; r < m; ++r) {  // columns between n and ldo are never written
    for (size_t c = static_cast<size_t>(n); c < in.ldo; ++c) {
      REQUIRE(out[static_cast<size_t>(r) * in.ldo + c] == 12345.0f);
      REQUIRE(out_b[static_cast<size_t>(r) * in.ldo + c] == 0x4242);
    }
  }
  REQUIRE(out.back() == 12345.0f);
  std::vector<float> result(static_cast<size_t>(m) * n);
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) {
      const size_t i = static_cast<size_t>(r) * in.ldo + c;
      result[static_cast<size_t>(r) * n + c] = o.bf16_out ? bf16_to_f32(out_b[i]) : out[i];
    }
  }
  return result;
}

// The documented activation quantization, per block along K: scale = max|x| / 127 over the
// block, xq = round(x · 127 / max|x|). The block is 128 for g128 weights and for per-channel ones
// whose K rounded up to 32 is a multiple of 128, else 32 (linear_quant.h). xscale is
// [m][ceil(k / block)].
int act_block(const QuantFormat& f, int k) {
  const int k32 = (k + 31) / 32 * 32;
  return f.group == 128 || (f.group == 0 && k32 % 128 == 0) ? 128 : 32;
}
int act_blocks(const QuantFormat& f, int k) { return (k + act_block(f, k) - 1) / act_block(f, k); }
void quantize_activations(const QuantFormat& f, const Inputs& in, int k, std::vector<int>& xq,
                          std::vector<float>& xscale) {
  const int kActBlock = act_block(f, k);
  const int blocks = act_blocks(f, k);
  xq.assign(static_cast<size_t>(in.m) * k, 0);
  xscale.assign(static_cast<size_t>(in.m) * blocks, 0.0f);
  for (int r = 0; r < in.m; ++r) {
    for (int b = 0; b < blocks; ++b) {
      const int lo = b * kActBlock, hi = std::min(k, lo + kActBlock);
      float amax = 0.0f;
      for (int c = lo; c < hi; ++c)
        amax = std::max(amax, std::fabs(bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c])));
      xscale[static_cast<size_t>(r) * blocks + b] = amax / 127.0f;
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int c = lo; c < hi; ++c) {
        const float v = bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c]) * inv;
        xq[static_cast<size_t>(r) * k + c] = std::clamp(static_cast<int>(std::nearbyint(v)), -127, 127);
      }
    }
  }
}

// The W8 decode's INT16 activations by the rule above, as values: x16 · scale, [m][k].
std::vector<double> int16_activation_values(const QuantFormat& f, const Inputs& in, int k) {
  const int block = act_block(f, k);
  std::vector<double> xv(static_cast<size_t>(in.m) * k, 0.0);
  for (int r = 0; r < in.m; ++r) {
    for (int lo = 0; lo < k; lo += block) {
      const int hi = std::min(k, lo + block);
      float amax = 0.0f;
      for (int c = lo; c < hi; ++c)
        amax = std::max(amax, std::fabs(bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c])));
      if (amax == 0.0f) continue;
      int e = 0;
      std::frexp(amax, &e);
      e = std::max(e, -111);
      for (int c = lo; c < hi; ++c) {
        const double x16 = std::nearbyint(std::ldexp(bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c]), 15 - e));
        xv[static_cast<size_t>(r) * k + c] = std::ldexp(x16, e - 15);
      }
    }
  }
  return xv;
}

// Checks got against the double reference: decode on the INT16 x, batched on the INT8 x.
void check_against_reference(const QuantMatrix& q, const Inputs& in, const Options& o, const std::vector<float>& got,
                             Isa isa) {
  const char* what = isa_name(isa);
  const int m = in.m, n = q.n, k = q.k;
  const bool batched = int8_activations(q.f, m);
  std::vector<int> xq;
  std::vector<float> xscale;
  if (batched) quantize_activations(q.f, in, k, xq, xscale);
  const std::vector<double> x16 = batched ? std::vector<double>{} : int16_activation_values(q.f, in, k);
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < n; ++c) {
      double sum = 0.0, bound = 0.0;
      for (int g = 0; g < q.groups; ++g) {
        const size_t gi = static_cast<size_t>(c) * q.groups + g;
        double group_sum = 0.0, group_bound = 0.0;
        for (int kk = g * q.gs; kk < std::min(k, (g + 1) * q.gs); ++kk) {
          const double wv = q.w[static_cast<size_t>(c) * k + kk];
          const double code = q.codes[static_cast<size_t>(c) * k + kk];
          if (batched) {
            const double xs = xscale[static_cast<size_t>(r) * act_blocks(q.f, k) + kk / act_block(q.f, k)];
            group_sum += xs * xq[static_cast<size_t>(r) * k + kk] * wv;
            group_bound += std::fabs(xs * xq[static_cast<size_t>(r) * k + kk] * wv);
          } else {
            const double xv = x16[static_cast<size_t>(r) * k + kk];
            group_sum += xv * wv;
            group_bound += std::fabs(xv) * q.scales[gi] * (code + 128 + q.zeros[gi]);
          }
        }
        sum += group_sum;
        bound += group_bound;
      }
      double tol = batched ? 1e-6 * bound : 2e-6 * bound;
      double extra = 0.0;
      if (o.bias) extra += in.bias[static_cast<size_t>(c)];
      if (o.residual || o.in_place) extra += in.residual[static_cast<size_t>(r) * in.ldr + c];
      const double expect = sum + extra;
      tol += 1e-6 * std::fabs(extra) + 1e-30;
      if (o.bf16_out) tol += std::ldexp(std::fabs(expect), -8);
      const float v = got[static_cast<size_t>(r) * n + c];
      if (!(std::fabs(v - expect) <= tol)) {
        FAIL_CHECK(what << " " << describe(q.f) << " m=" << m << " n=" << n << " k=" << k << " row " << r << " col "
                        << c << ": got " << v << " want " << expect << " tol " << tol);
        return;
      }
    }
  }
}

const QuantFormat kFormats[] = {
    {8, 0, false}, {8, 128, false}, {8, 32, true}, {4, 32, false}, {4, 128, false}, {4, 32, true}, {4, 128, true},
};

// Every format, and the zero-point ones once more with fractional zeros.
std::vector<std::pair<QuantFormat, bool>> formats_with_fractional_zeros() {
  std::vector<std::pair<QuantFormat, bool>> v;
  for (const QuantFormat& f : kFormats) {
    v.emplace_back(f, false);
    if (f.zero_point) v.emplace_back(f, true);
  }
  return v;
}

}  // namespace

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

TEST_CASE("quantized linear epilogues: bias, residual, in place, BF16 out, several threads", "[quant]") {
  std::mt19937 rng(99);
  const std::vector<Isa> isas = test::quant_isas();
  const Options variants[] = {
      {true, false, false, false}, {false, true, false, false}, {true, true, false, false},
      {true, false, true, false},  {false, false, false, true}, {true, true, true, false},
  };
  for (const QuantFormat& f : {QuantFormat{8, 128, false}, QuantFormat{4, 32, true}}) {
    const QuantMatrix q = make_matrix(f, 75, 260, rng);
    for (int m : {1, 6, 8, 12, 40}) {
      const Inputs in = make_inputs(m, 75, 260, rng);
      for (Isa isa : isas) {
        for (const Options& o : variants) {
          for (int threads : {1, 3, 8}) check_against_reference(q, in, o, run(q, in, o, isa, threads), isa);
        }
      }
    }
  }
}

// Every format at 21 rows, and W4 at 1 and 3 rows too (INT8 activations in decode).
static std::vector<std::pair<QuantFormat, int>> batched_cases() {
  std::vector<std::pair<QuantFormat, int>> v;
  for (const QuantFormat& f : kFormats) {
    v.emplace_back(f, 21);
    if (f.bits == 4) {
      v.emplace_back(f, 1);
      v.emplace_back(f, 3);
    }
  }
  return v;
}

TEST_CASE("batched integer math is exact: power-of-two block scales give the exact dot product", "[quant]") {
  // Weight scales 1; activations v · 2^e with v integer in [-127, 127] and every activation block
  // (32, or 128 for g128 and per-channel weights when K allows) holding one |v| = 127, so each
  // block's scale is exactly 2^e (e = 0 or 1 per block, chosen at random) and xq = v: every
  // product and partial sum is an integer below 2^24, so the result must be the exact
  // Σ_b 2^e_b · d_b. A kernel that used one scale per row, mixed up blocks (or their size) or lost
  // an integer product fails by at least 1. K = 256 gives per-channel weights blocks of 128.
  std::mt19937 rng(3);
  const std::vector<Isa> isas = test::quant_isas();
  for (auto [f, m] : batched_cases()) {
    for (const int k : {301, 256}) {
      const int n = 33;
      const int blocks = act_blocks(f, k), kActBlock = act_block(f, k);
      QuantMatrix q = make_matrix(f, n, k, rng);
      std::fill(q.scales.begin(), q.scales.end(), 1.0f);
      pack_quant_linear_codes(q.packed.data(), f, q.codes.data(), static_cast<size_t>(k), q.scales.data(),
                              f.zero_point ? q.zeros.data() : nullptr, n, k);
      Inputs in = make_inputs(m, n, k, rng);
      std::vector<int> v(static_cast<size_t>(m) * k), e(static_cast<size_t>(m) * blocks);
      std::uniform_int_distribution<int> value(-127, 127), coin(0, 1);
      for (int r = 0; r < m; ++r) {
        for (int b = 0; b < blocks; ++b) {
          const int lo = b * kActBlock, hi = std::min(k, lo + kActBlock);
          e[static_cast<size_t>(r) * blocks + b] = coin(rng);
          for (int c = lo; c < hi; ++c) v[static_cast<size_t>(r) * k + c] = value(rng);
          const int peak = lo + std::uniform_int_distribution<int>(0, hi - lo - 1)(rng);
          v[static_cast<size_t>(r) * k + peak] = coin(rng) ? 127 : -127;
          for (int c = lo; c < hi; ++c) {
            const float x = std::ldexp(static_cast<float>(v[static_cast<size_t>(r) * k + c]),
                                       e[static_cast<size_t>(r) * blocks + b]);
            in.x[static_cast<size_t>(r) * in.ldx + c] = f32_to_bf16(x);  // 8 significant bits: exact
          }
        }
      }
      for (Isa isa : isas) {
        const std::vector<float> got = run(q, in, Options{}, isa, 2);
        for (int r = 0; r < m; ++r) {
          for (int c = 0; c < n; ++c) {
            long want = 0, bound = 0;
            for (int b = 0; b < blocks; ++b) {
              long dot = 0;
              for (int kk = b * kActBlock; kk < std::min(k, (b + 1) * kActBlock); ++kk) {
                const size_t gi = static_cast<size_t>(c) * q.groups + static_cast<size_t>(kk / q.gs);
                dot += long{v[static_cast<size_t>(r) * k + kk]} *
                       (q.codes[static_cast<size_t>(c) * k + kk] - static_cast<long>(q.zeros[gi]));
              }
              const long scaled = dot << e[static_cast<size_t>(r) * blocks + b];
              want += scaled;
              bound += std::labs(scaled);
            }
            REQUIRE(bound < (1l << 24));  // every partial sum exact in FP32
            if (got[static_cast<size_t>(r) * n + c] != static_cast<float>(want)) {
              FAIL_CHECK(isa_name(isa) << " " << describe(f) << " row " << r << " col " << c << ": "
                                       << got[static_cast<size_t>(r) * n + c] << " vs " << want);
              r = m;
              break;
            }
          }
        }
      }
    }
  }
}

TEST_CASE("quantized linear through a thread pool gives the single-thread bits", "[quant]") {
  std::mt19937 rng(17);
  ThreadPool pool({.n_threads = 3});
  for (Isa isa : test::quant_isas()) {
    for (const QuantFormat& f : {QuantFormat{8, 0, false}, QuantFormat{4, 32, false}, QuantFormat{4, 128, true}}) {
      const QuantMatrix q = make_matrix(f, 300, 256, rng);  // 19 panels: runs of 8 and a ragged end
      for (int m : {1, 3, 8, 20, 64}) {
        const Inputs in = make_inputs(m, 300, 256, rng);
        const std::vector<float> single = run(q, in, Options{true, true, false, false}, isa, 1);
        std::vector<float> out(static_cast<size_t>(m) * in.ldo, 0.0f);
        QuantLinearArgs a = args_for(q, in, isa);
        a.out_f32 = out.data();
        a.ldo = in.ldo;
        a.bias = in.bias.data();
        a.residual = in.residual.data();
        a.ldr = in.ldr;
        std::vector<uint64_t> ws(quant_linear_workspace_bytes(m, a.w, pool.size()) / 8 + 8);
        a.workspace = ws.data();
        a.isa = isa;
        quant_linear(a, [&pool](auto&& fn) { pool.run_on_all(fn); });
        // With the shared counter one thread can take every unit (the others never start).
        std::vector<float> solo(out.size(), 0.0f);
        QuantLinearArgs b = a;
        b.out_f32 = solo.data();
        int cursor = 0;
        b.work_cursor = &cursor;
        if (quant_linear_needs_prepare(m)) {
          for (int t = 0; t < pool.size(); ++t) quant_linear_prepare(b, t, pool.size());
        }
        quant_linear_compute(b, 0, pool.size());
        CHECK(solo == out);
        for (int r = 0; r < m; ++r) {
          for (int c = 0; c < q.n; ++c) {
            if (out[static_cast<size_t>(r) * in.ldo + c] != single[static_cast<size_t>(r) * q.n + c]) {
              FAIL_CHECK(isa_name(isa) << " " << describe(f) << " m=" << m << " row " << r << " col " << c);
              r = m;
              break;
            }
          }
        }
        check_against_reference(q, in, Options{true, true, false, false}, single, isa);
      }
    }
  }
}

// Fused gated MLP (QuantLinearArgs::swiglu): each tile pairs gate panel p with up panel p + n_out
// / 16, so its sums are the unfused kernel's sums of those columns and the result must be the
// unfused output through the same activation, bit for bit: decode (W8 weight-only with one tile
// of both panels for 1-2 rows and a tile per panel above; W4 on INT8 rows) and batched, static
// shares and a pool's shared cursor, SiLU and GeLU-tanh.
TEST_CASE("fused quantized SwiGLU equals the unfused linear followed by act times up, bit for bit", "[quant]") {
  std::mt19937 rng(23);
  ThreadPool pool({.n_threads = 3});
  for (Isa isa : test::quant_isas()) {
    for (const QuantFormat& f :
         {QuantFormat{8, 0, false}, QuantFormat{8, 32, true}, QuantFormat{4, 32, false}, QuantFormat{4, 128, true}}) {
      for (int n_out : {48, 112}) {
        const QuantMatrix q = make_matrix(f, 2 * n_out, 200, rng);  // [gate; up], K ragged
        for (int m : {1, 2, 3, 8, 9, 21}) {
          const Inputs in = make_inputs(m, 2 * n_out, 200, rng);
          const std::vector<float> sums = run(q, in, Options{}, isa, 1);  // [m][2 · n_out] FP32
          for (const GatedAct act : {GatedAct::silu, GatedAct::gelu_tanh}) {
            std::vector<bf16_t> want(static_cast<size_t>(m) * n_out);
            for (int r = 0; r < m; ++r) {
              const float* gate = sums.data() + static_cast<size_t>(r) * 2 * n_out;
              bf16_t* o = want.data() + static_cast<size_t>(r) * n_out;
              if (act == GatedAct::silu) {
                silu_mul_to_bf16(o, gate, gate + n_out, n_out, isa);
              } else {
                gelu_tanh_mul_to_bf16(o, gate, gate + n_out, n_out, isa);
              }
            }
            for (int threads : {1, 3}) {
              INFO(isa_name(isa) << " " << describe(f) << " n_out " << n_out << " m " << m << " threads " << threads
                                 << (act == GatedAct::silu ? " silu" : " gelu_tanh"));
              const size_t ldo = static_cast<size_t>(n_out) + 3;
              std::vector<bf16_t> out(static_cast<size_t>(m) * ldo, 0x4242);
              QuantLinearArgs a = args_for(q, in, isa);
              a.out_bf16 = out.data();
              a.ldo = ldo;
              a.swiglu = true;
              a.gated_act = act;
              std::vector<uint64_t> ws(quant_linear_workspace_bytes(m, a.w, threads) / 8 + 8);
              a.workspace = ws.data();
              if (threads == 1) {
                quant_linear(a, [](auto&& fn) { fn(0, 1); });
              } else {
                quant_linear(a, [&pool](auto&& fn) { pool.run_on_all(fn); });
              }
              int bad = 0;
              for (int r = 0; r < m; ++r) {
                for (size_t c = 0; c < ldo; ++c) {
                  const bf16_t got = out[static_cast<size_t>(r) * ldo + c];
                  const bf16_t expect =
                      c < static_cast<size_t>(n_out) ? want[static_cast<size_t>(r) * n_out + c] : bf16_t{0x4242};
                  if (got != expect && bad++ < 3)
                    FAIL_CHECK("row " << r << " col " << c << ": " << got << " vs " << expect);
                }
              }
            }
          }
        }
      }
    }
  }
  // Halves that do not start on a panel, and epilogues the fused form has no place for, are refused.
  const QuantMatrix q = make_matrix(QuantFormat{8, 0, false}, 2 * 40, 64, rng);
  const Inputs in = make_inputs(2, 80, 64, rng);
  std::vector<bf16_t> out(2 * 40);
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(2, {q.packed.data(), q.f, 80, 64}, 1) / 8 + 8);
  QuantLinearArgs a = args_for(q, in, Isa::scalar);
  a.out_bf16 = out.data();
  a.ldo = 40;
  a.workspace = ws.data();
  a.swiglu = true;
  CHECK_FALSE(quant_swiglu_fusable(80));
  CHECK(quant_swiglu_fusable(96));
  CHECK_THROWS_AS(quant_linear_compute(a, 0, 1), std::invalid_argument);
}
