// K-quant formats of the quantized linear (GGUF Q4_K / Q5_K / Q6_K kept in super-blocks) against
// references written here from the documented formulas, not from the kernel's helpers:
//   4/5-bit: w = d·sc[g]·code − dmin·m[g] (groups of 32);  6-bit: w = d·sc[j]·(code − 32) (16s);
// in double, with the activations quantized to INT8 per block of 32 by the documented rule. The
// integer part is exact and every ISA runs the scalar tile's FP32 operations, so SIMD results
// must equal the scalar ones bit for bit.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/linear_quant.h"
#include "kernels/rowwise_bf16.h"
#include "quant_isas.h"
#include "quant_linear_args.h"
#include "runtime/thread_pool.h"

using namespace slab;
using namespace slab::kern;

namespace {

// A normal FP16 number (1 + frac / 1024) · 2^(exp − 15), as bits and as a double.
uint16_t half_bits(int exp, int frac) { return static_cast<uint16_t>((exp << 10) | frac); }
double half_value(uint16_t h) { return std::ldexp(1.0 + (h & 0x3ff) / 1024.0, ((h >> 10) & 0x1f) - 15); }

struct KMatrix {
  QuantFormat f;
  int n = 0, k = 0;
  std::vector<uint8_t> codes;     // [n][k]
  std::vector<uint16_t> d, dmin;  // [n][k / 256]
  std::vector<int8_t> scales;     // [n][k / group]
  std::vector<uint8_t> mins;      // [n][k / 32]
  std::vector<double> w;          // [n][k]
  std::vector<double> w_terms;    // [n][k]: |d·sc·code| + |dmin·m| (6-bit: |d·sc|·(code + 32)), for error bounds
  std::vector<uint8_t> packed;

  KQuantSource source() const {
    return {codes.data(),  static_cast<size_t>(k),
            d.data(),      f.bits != 6 ? dmin.data() : nullptr,
            scales.data(), f.bits != 6 ? mins.data() : nullptr};
  }
  void pack() {
    packed.assign(packed_quant_bytes(f, n, k), 0xa5);
    pack_kquant_linear(packed.data(), f, source(), n, k);
  }
  void compute_w() {
    w.resize(codes.size());
    w_terms.resize(codes.size());
    const int sbs = k / 256, groups = k / f.group;
    for (int r = 0; r < n; ++r) {
      for (int kk = 0; kk < k; ++kk) {
        const size_t sb = static_cast<size_t>(r) * sbs + static_cast<size_t>(kk / 256);
        const size_t g = static_cast<size_t>(r) * groups + static_cast<size_t>(kk / f.group);
        const double code = codes[static_cast<size_t>(r) * k + kk];
        double v = 0.0;
        if (f.bits != 6) {
          const size_t g32 = static_cast<size_t>(r) * (k / 32) + static_cast<size_t>(kk / 32);
          v = half_value(d[sb]) * scales[g] * code - half_value(dmin[sb]) * mins[g32];
          w_terms[static_cast<size_t>(r) * k + kk] =
              half_value(d[sb]) * scales[g] * code + half_value(dmin[sb]) * mins[g32];
        } else {
          v = half_value(d[sb]) * scales[g] * (code - 32);
          w_terms[static_cast<size_t>(r) * k + kk] = half_value(d[sb]) * std::abs(scales[g]) * (code + 32);
        }
        w[static_cast<size_t>(r) * k + kk] = v;
      }
    }
  }
};

KMatrix make_kmatrix(const QuantFormat& f, int n, int k, std::mt19937& rng) {
  KMatrix q;
  q.f = f;
  q.n = n;
  q.k = k;
  const int top = (1 << f.bits) - 1;
  std::uniform_int_distribution<int> code(0, top), exp(8, 12), frac(0, 1023), six(0, 63), i8(-128, 127);
  q.codes.resize(static_cast<size_t>(n) * k);
  for (auto& c : q.codes) c = static_cast<uint8_t>(code(rng));
  q.d.resize(static_cast<size_t>(n) * (k / 256));
  q.dmin.resize(q.d.size());
  for (auto& v : q.d) v = half_bits(exp(rng), frac(rng));
  for (auto& v : q.dmin) v = half_bits(exp(rng), frac(rng));
  q.scales.resize(static_cast<size_t>(n) * (k / f.group));
  for (auto& s : q.scales) s = static_cast<int8_t>(f.bits != 6 ? six(rng) : i8(rng));
  q.mins.resize(static_cast<size_t>(n) * (k / 32));
  for (auto& m : q.mins) m = static_cast<uint8_t>(six(rng));
  q.compute_w();
  q.pack();
  return q;
}

struct Rows {
  int m = 0;
  size_t ldx = 0;
  std::vector<bf16_t> x;
};

Rows make_rows(int m, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Rows in;
  in.m = m;
  in.ldx = static_cast<size_t>(k) + 5;
  in.x.assign(static_cast<size_t>(m) * in.ldx, 0x7fc0);  // NaN padding must not be read
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) in.x[static_cast<size_t>(r) * in.ldx + c] = f32_to_bf16(dist(rng));
  }
  return in;
}

std::vector<float> run(const KMatrix& q, const Rows& in, Isa isa, int n_threads) {
  std::vector<float> out(static_cast<size_t>(in.m) * q.n + 1, 12345.0f);
  QuantLinearArgs a = args_for(q, in, isa);
  a.out_f32 = out.data();
  a.ldo = static_cast<size_t>(q.n);
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(in.m, a.w, n_threads) / 8 + 8, 0xdeadbeefdeadbeefull);
  a.workspace = ws.data();
  if (quant_linear_needs_prepare(in.m)) {
    for (int t = 0; t < n_threads; ++t) quant_linear_prepare(a, t, n_threads);
  }
  for (int t = 0; t < n_threads; ++t) quant_linear_compute(a, t, n_threads);
  REQUIRE(out.back() == 12345.0f);
  out.pop_back();
  return out;
}

// q over `in` on the pool (threads take runs of panels from the shared counter): FP32 out, or
// with swiglu act(gate)·up as BF16 [m][n / 2].
struct PoolOut {
  std::vector<float> f32;
  std::vector<bf16_t> fused;
};
PoolOut run_on_pool(const KMatrix& q, const Rows& in, Isa isa, ThreadPool& pool, bool swiglu) {
  QuantLinearArgs a = args_for(q, in, isa);
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(in.m, a.w, pool.size()) / 8 + 8);
  a.workspace = ws.data();
  PoolOut out;
  if (swiglu) {
    out.fused.resize(static_cast<size_t>(in.m) * (q.n / 2));
    a.out_bf16 = out.fused.data();
    a.ldo = static_cast<size_t>(q.n / 2);
    a.swiglu = true;
  } else {
    out.f32.resize(static_cast<size_t>(in.m) * q.n);
    a.out_f32 = out.f32.data();
    a.ldo = static_cast<size_t>(q.n);
  }
  quant_linear(a, [&pool](auto&& fn) { pool.run_on_all(fn); });
  return out;
}

// act(gate)·up of FP32 sums [m][n] (gate the first n / 2 columns) as BF16, the fused linear's rule.
std::vector<bf16_t> swiglu_of(const std::vector<float>& sums, int m, int n, Isa isa) {
  const int n_out = n / 2;
  std::vector<bf16_t> want(static_cast<size_t>(m) * n_out);
  for (int r = 0; r < m; ++r) {
    const float* row = sums.data() + static_cast<size_t>(r) * n;
    silu_mul_to_bf16(want.data() + static_cast<size_t>(r) * n_out, row, row + n_out, n_out, isa);
  }
  return want;
}

// Σ_k xs·xq·w in double, with the documented INT8 rule (max|x| / 127 per block of 32).
void check_reference(const KMatrix& q, const Rows& in, const std::vector<float>& got, const char* what) {
  for (int r = 0; r < in.m; ++r) {
    std::vector<double> xv(static_cast<size_t>(q.k));
    for (int b = 0; b < q.k / 32; ++b) {
      float amax = 0.0f;
      for (int c = 32 * b; c < 32 * b + 32; ++c)
        amax = std::max(amax, std::fabs(bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c])));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      for (int c = 32 * b; c < 32 * b + 32; ++c) {
        const float v = bf16_to_f32(in.x[static_cast<size_t>(r) * in.ldx + c]) * inv;
        const int xq = std::clamp(static_cast<int>(std::nearbyint(v)), -127, 127);
        xv[static_cast<size_t>(c)] = double{amax / 127.0f} * xq;
      }
    }
    for (int c = 0; c < q.n; ++c) {
      double sum = 0.0, bound = 0.0;
      for (int kk = 0; kk < q.k; ++kk) {
        const double t = xv[static_cast<size_t>(kk)] * q.w[static_cast<size_t>(c) * q.k + kk];
        sum += t;
        bound += std::fabs(xv[static_cast<size_t>(kk)]) * q.w_terms[static_cast<size_t>(c) * q.k + kk];
      }
      const float v = got[static_cast<size_t>(r) * q.n + c];
      if (!(std::fabs(v - sum) <= 2e-6 * bound)) {
        FAIL_CHECK(what << " W" << q.f.bits << " K-quant m=" << in.m << " n=" << q.n << " k=" << q.k << " row " << r
                        << " col " << c << ": got " << v << " want " << sum);
        return;
      }
    }
  }
}

const QuantFormat kKFormats[] = {kquant4_format(), kquant5_format(), kquant6_format()};

}  // namespace

TEST_CASE("K-quant packing keeps every code, scale and min: dequantized rows equal the formula", "[quant][kquant]") {
  std::mt19937 rng(5);
  for (const QuantFormat& f : kKFormats) {
    const KMatrix q = make_kmatrix(f, 21, 512, rng);
    REQUIRE(packed_quant_bytes(f, 21, 512) == 2 * 2 * (f.bits == 4 ? 2368u : f.bits == 5 ? 2880u : 3392u));
    std::vector<float> w(static_cast<size_t>(q.n) * q.k);
    dequantize_quant_linear(w.data(), static_cast<size_t>(q.k), q.packed.data(), f, q.n, q.k);
    for (size_t i = 0; i < w.size(); ++i) {
      // d·sc·code and dmin·m are exact in FP32; only their difference rounds.
      if (std::fabs(w[i] - q.w[i]) > std::ldexp(std::fabs(q.w[i]) + 1e-3, -22)) {
        FAIL_CHECK("W" << f.bits << " element " << i << ": " << w[i] << " vs " << q.w[i]);
        break;
      }
    }
    // One row on its own (an embedding lookup) reads the same values.
    std::vector<float> row(static_cast<size_t>(q.k));
    dequantize_quant_rows(row.data(), static_cast<size_t>(q.k), q.packed.data(), f, q.k, 19, 1);
    REQUIRE(std::memcmp(row.data(), w.data() + 19 * static_cast<size_t>(q.k), row.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("K-quant packing refuses what it cannot hold", "[quant][kquant]") {
  std::mt19937 rng(6);
  KMatrix q = make_kmatrix(kquant4_format(), 16, 256, rng);
  std::vector<uint8_t> dst(packed_quant_bytes(q.f, 16, 512));
  REQUIRE_THROWS_WITH(pack_kquant_linear(dst.data(), q.f, q.source(), 16, 200), Catch::Contains("multiple of 256"));
  q.codes[7] = 16;
  REQUIRE_THROWS_WITH(pack_kquant_linear(dst.data(), q.f, q.source(), 16, 256), Catch::Contains("code out of range"));
  q.codes[7] = 15;
  q.scales[3] = 64;
  REQUIRE_THROWS_WITH(pack_kquant_linear(dst.data(), q.f, q.source(), 16, 256), Catch::Contains("scale out of"));
  q.scales[3] = 1;
  q.mins[2] = 70;
  REQUIRE_THROWS_WITH(pack_kquant_linear(dst.data(), q.f, q.source(), 16, 256), Catch::Contains("min out of"));
  REQUIRE_THROWS(check_quant_format(QuantFormat{6, 32, false, true}));
  REQUIRE_THROWS(check_quant_format(QuantFormat{4, 32, false, true}));
  REQUIRE_THROWS(pack_quant_linear_codes(dst.data(), q.f, q.codes.data(), 256, nullptr, nullptr, 16, 256));
}

TEST_CASE("K-quant linear matches the reference on ragged shapes, every ISA the scalar bits", "[quant][kquant]") {
  std::mt19937 rng(2026);
  const std::vector<Isa> isas = test::quant_isas();
  for (const QuantFormat& f : kKFormats) {
    for (auto [n, k] : {std::pair{1, 256}, std::pair{17, 512}, std::pair{40, 768}, std::pair{70, 256}}) {
      const KMatrix q = make_kmatrix(f, n, k, rng);
      for (int m : {1, 2, 3, 4, 5, 8, 9, 13, 33}) {
        const Rows in = make_rows(m, k, rng);
        std::vector<float> scalar;
        for (Isa isa : isas) {
          const std::vector<float> got = run(q, in, isa, isa == Isa::scalar ? 1 : 2);
          check_reference(q, in, got, isa_name(isa));
          if (isa == Isa::scalar) {
            scalar = got;
          } else if (std::memcmp(got.data(), scalar.data(), got.size() * sizeof(float)) != 0) {
            FAIL_CHECK(isa_name(isa) << " differs from scalar: W" << f.bits << " m=" << m << " n=" << n << " k=" << k);
          }
        }
      }
    }
  }
}

// Runs integer activations v ([m][k], |v| <= 127 with one 127 per block: scale 1) through q on
// every ISA and requires Σ v·w exactly (every partial sum an integer below 2^24).
static void require_exact(const KMatrix& q, int m, const std::vector<long>& v, std::mt19937& rng) {
  Rows in = make_rows(m, q.k, rng);
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < q.k; ++c)
      in.x[static_cast<size_t>(r) * in.ldx + c] = f32_to_bf16(static_cast<float>(v[static_cast<size_t>(r) * q.k + c]));
  }
  for (Isa isa : test::quant_isas()) {
    const std::vector<float> got = run(q, in, isa, 1);
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < q.n; ++c) {
        double want = 0.0;
        for (int kk = 0; kk < q.k; ++kk)
          want += static_cast<double>(v[static_cast<size_t>(r) * q.k + kk]) * q.w[static_cast<size_t>(c) * q.k + kk];
        REQUIRE(std::fabs(want) < (1 << 24));
        if (got[static_cast<size_t>(r) * q.n + c] != static_cast<float>(want)) {
          FAIL_CHECK(isa_name(isa) << " W" << q.f.bits << " m=" << m << " row " << r << " col " << c << ": "
                                   << got[static_cast<size_t>(r) * q.n + c] << " vs " << want);
          r = m;  // the first difference of each ISA
          break;
        }
      }
    }
  }
}

TEST_CASE("K-quant integer math is exact with unit scales", "[quant][kquant]") {
  // d = dmin = 1 and sub-scales 1 (6-bit: ±1), activations integers v with one |v| = 127 per block
  // (scale exactly 1): the result must be Σ v·w exactly. A lost top bit, a swapped half or a
  // misplaced min changes it by at least 1.
  std::mt19937 rng(8);
  for (const QuantFormat& f : kKFormats) {
    KMatrix q = make_kmatrix(f, 33, 512, rng);
    std::fill(q.d.begin(), q.d.end(), half_bits(15, 0));
    std::fill(q.dmin.begin(), q.dmin.end(), half_bits(15, 0));
    for (auto& s : q.scales) s = static_cast<int8_t>(f.bits != 6 ? 1 : (rng() % 2 ? 1 : -1));
    q.compute_w();
    q.pack();
    for (int m : {1, 3, 12}) {
      std::vector<long> v(static_cast<size_t>(m) * q.k);
      std::uniform_int_distribution<int> value(-127, 127);
      for (int r = 0; r < m; ++r) {
        for (int c = 0; c < q.k; ++c) v[static_cast<size_t>(r) * q.k + c] = c % 32 == 5 ? 127 : value(rng);
      }
      require_exact(q, m, v, rng);
    }
  }
}

TEST_CASE("K-quant sums are exact at the largest codes and activations", "[quant][kquant]") {
  // Every code at its top value and every activation ±127 (row 0 all +127, row 1 all -127, row 2
  // alternating in runs): the SIMD tiles add several steps' products in 16 bits before widening,
  // which these values take to their bound. Unit scales: the result is Σ v·w exactly.
  std::mt19937 rng(9);
  for (const QuantFormat& f : kKFormats) {
    KMatrix q = make_kmatrix(f, 32, 512, rng);
    std::fill(q.codes.begin(), q.codes.end(), static_cast<uint8_t>((1 << f.bits) - 1));
    std::fill(q.d.begin(), q.d.end(), half_bits(15, 0));
    std::fill(q.dmin.begin(), q.dmin.end(), half_bits(15, 0));
    std::fill(q.scales.begin(), q.scales.end(), static_cast<int8_t>(1));
    q.compute_w();
    q.pack();
    const int m = 3;
    std::vector<long> v(static_cast<size_t>(m) * q.k);
    for (int c = 0; c < q.k; ++c) {
      v[static_cast<size_t>(c)] = 127;
      v[static_cast<size_t>(q.k + c)] = -127;
      v[static_cast<size_t>(2 * q.k + c)] = c / 64 % 2 ? 127 : -127;
    }
    require_exact(q, m, v, rng);
  }
}

TEST_CASE("K-quant linear through a pool and fused as SwiGLU gives the single-thread bits", "[quant][kquant]") {
  std::mt19937 rng(31);
  ThreadPool pool({.n_threads = 3});
  for (Isa isa : test::quant_isas()) {
    for (const QuantFormat& f : kKFormats) {
      const int n_out = 160;  // 10 gate panels: runs of 8 and a ragged end
      const KMatrix q = make_kmatrix(f, 2 * n_out, 512, rng);
      for (int m : {1, 4, 8, 20}) {
        const Rows in = make_rows(m, q.k, rng);
        const std::vector<float> single = run(q, in, isa, 1);
        const std::vector<float> out = run_on_pool(q, in, isa, pool, false).f32;
        REQUIRE(std::memcmp(out.data(), single.data(), out.size() * sizeof(float)) == 0);
        // Fused: act(gate)·up from the same sums.
        const std::vector<bf16_t> fused = run_on_pool(q, in, isa, pool, true).fused;
        const std::vector<bf16_t> want = swiglu_of(single, m, q.n, isa);
        for (size_t i = 0; i < fused.size(); ++i) {
          if (fused[i] != want[i]) {
            FAIL_CHECK(isa_name(isa) << " W" << f.bits << " SwiGLU m=" << m << " element " << i);
            break;
          }
        }
      }
    }
  }
}

TEST_CASE("K-quant decode of one row over runs of many panels gives the scalar bits", "[quant][kquant]") {
  // One row on AVX2 reads four panels a tile from the quarters of a thread's run (SwiGLU: the
  // gate and up panels of its halves), the rest of the run in pairs: run lengths 1-27 panels, as
  // static shares (1-3 threads) and as the counter's runs (1 and 3 threads: runs of 8, 4 or 2 and
  // a ragged last one). The scalar kernel on one thread, which never takes four panels, gives the
  // sums' bits; the fused output is those sums through the ISA's own activation.
  std::mt19937 rng(77);
  ThreadPool one({.n_threads = 1}), three({.n_threads = 3});
  for (const QuantFormat& f : kKFormats) {
    for (int panels : {27, 54, 100}) {
      const KMatrix q = make_kmatrix(f, 16 * panels, 256, rng);
      const Rows in = make_rows(1, q.k, rng);
      const std::vector<float> scalar = run(q, in, Isa::scalar, 1);
      check_reference(q, in, scalar, "scalar");
      for (Isa isa : test::quant_isas()) {
        const auto where = [&] {
          return std::string(isa_name(isa)) + " W" + std::to_string(f.bits) + " panels=" + std::to_string(panels);
        };
        for (int threads : {1, 2, 3}) {
          const std::vector<float> got = run(q, in, isa, threads);
          if (std::memcmp(got.data(), scalar.data(), got.size() * sizeof(float)) != 0) {
            FAIL_CHECK(where() << " threads=" << threads);
          }
        }
        for (ThreadPool* pool : {&one, &three}) {
          const std::vector<float> pooled = run_on_pool(q, in, isa, *pool, false).f32;
          if (std::memcmp(pooled.data(), scalar.data(), pooled.size() * sizeof(float)) != 0) {
            FAIL_CHECK(where() << " on " << pool->size() << " pool threads");
          }
          if (panels % 2 == 0 && run_on_pool(q, in, isa, *pool, true).fused != swiglu_of(scalar, 1, q.n, isa)) {
            FAIL_CHECK(where() << " SwiGLU on " << pool->size() << " pool threads");
          }
        }
      }
    }
  }
}
