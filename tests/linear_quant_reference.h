#pragma once
// The quantized linear tests' references (test_linear_quant*.cpp), written from the documented
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
#include "quant_linear_args.h"
#include "quant_isas.h"
#include "runtime/thread_pool.h"

namespace slab::test::quant_ref {

using namespace slab::kern;

inline int top_code(const QuantFormat& f) { return (1 << f.bits) - 1; }
// The documented rule, written out here: INT8 activations above 8 rows, and always for W4.
inline bool int8_activations(const QuantFormat& f, int m) { return m > 8 || f.bits == 4; }
inline int implied_zero_of(const QuantFormat& f) { return f.bits == 8 ? 128 : 8; }

inline std::string describe(const QuantFormat& f) {
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
inline QuantMatrix make_matrix(const QuantFormat& f, int n, int k, std::mt19937& rng, bool fractional_zeros = false) {
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

inline Inputs make_inputs(int m, int n, int k, std::mt19937& rng) {
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

// Runs the kernel as n_threads threads would: every thread's phase 1, then every phase 2.
inline std::vector<float> run(const QuantMatrix& q, const Inputs& in, const Options& o, Isa isa, int n_threads) {
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
inline int act_block(const QuantFormat& f, int k) {
  const int k32 = (k + 31) / 32 * 32;
  return f.group == 128 || (f.group == 0 && k32 % 128 == 0) ? 128 : 32;
}
inline int act_blocks(const QuantFormat& f, int k) { return (k + act_block(f, k) - 1) / act_block(f, k); }
inline void quantize_activations(const QuantFormat& f, const Inputs& in, int k, std::vector<int>& xq,
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
inline std::vector<double> int16_activation_values(const QuantFormat& f, const Inputs& in, int k) {
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
inline void check_against_reference(const QuantMatrix& q, const Inputs& in, const Options& o,
                                    const std::vector<float>& got, Isa isa) {
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

inline const QuantFormat kFormats[] = {
    {8, 0, false}, {8, 128, false}, {8, 32, true}, {4, 32, false}, {4, 128, false}, {4, 32, true}, {4, 128, true},
};

// Every format, and the zero-point ones once more with fractional zeros.
inline std::vector<std::pair<QuantFormat, bool>> formats_with_fractional_zeros() {
  std::vector<std::pair<QuantFormat, bool>> v;
  for (const QuantFormat& f : kFormats) {
    v.emplace_back(f, false);
    if (f.zero_point) v.emplace_back(f, true);
  }
  return v;
}

}  // namespace slab::test::quant_ref
