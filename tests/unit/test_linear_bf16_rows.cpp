// A row's product does not depend on the rows computed with it, on the scalar, AVX2 and AVX-512
// kernels without AMX: their decode tiles (1..8 rows; the AVX2 ones of 1 or 2 rows read up to 4
// panels as concurrent streams, linear_bf16_avx2.cpp) and their K-blocked tiles beyond 8 rows
// (AVX-512: vdpbf16ps, or FMAs on FP32 products in vdpbf16ps's order) sum every column's k-pairs
// in the same order, so a verification step of speculative decoding (several rows of one
// sequence) gives the logits plain decoding (one row) gives. Asserted bit for bit here; the AMX
// tiles (M >= 9) round their sums their own way, so their rows differ by design
// (docs/ARCHITECTURE.md).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/reference.h"
#include "linear_bf16_harness.h"

using namespace slab;
using namespace slab::kern;
using namespace slab::test::bf16_harness;

namespace {

// Rows [row0, row0 + m) of p as a problem of their own (same weights, bias and strides).
Problem rows_of(const Problem& p, int row0, int m) {
  Problem q = p;
  q.m = m;
  // Element by element: GCC 12 warns (-Wstringop-overread, falsely) on assign() from p's ranges.
  const auto take = [row0, m](auto& dst, const auto& src, size_t row_elems, size_t extra) {
    dst.resize(static_cast<size_t>(m) * row_elems + extra);
    for (size_t i = 0; i < static_cast<size_t>(m) * row_elems; ++i)
      dst[i] = src[static_cast<size_t>(row0) * row_elems + i];
  };
  take(q.x, p.x, static_cast<size_t>(p.k), 0);
  take(q.xb, p.xb, p.ldx, 1);
  q.xb.back() = 0x7fc0;
  take(q.residual, p.residual, p.ldr, 0);
  return q;
}

// A kernel set and the blocking it runs under: AVX-512 twice, with its large-M tiles on
// vdpbf16ps and on FP32 products (LinearBlocking::fp32_products, the Xeons' tuning).
struct Variant {
  Isa isa;
  LinearBlocking blocking;
  const char* label;
};

std::vector<Variant> row_invariant_variants() {
  std::vector<Variant> v;
  for (Isa isa : isas()) {
    v.push_back({isa, LinearBlocking{}, isa_name(isa)});
    if (isa == Isa::avx512_bf16) {
      LinearBlocking fma;
      fma.fp32_products = true;
      v.push_back({isa, fma, "avx512_bf16 fp32_products"});
    }
  }
  if (!cpu_features().has_avx2_kernels()) WARN("no AVX2 on this CPU: only the scalar kernels were checked");
  if (cpu_features().has_avx2_kernels() && !cpu_features().has_avx512_bf16_kernels())
    WARN("no AVX-512 BF16 on this CPU: its tiles were not checked");
  return v;
}

// out_bf16[m][n_out] of the fused SwiGLU linear over x (BF16 rows, ldx) and packed gate/up.
std::vector<bf16_t> swiglu(const bf16_t* x, size_t ldx, int m, const std::vector<bf16_t>& packed, int n_out, int k,
                           const Variant& variant, int threads) {
  std::vector<bf16_t> out(static_cast<size_t>(m) * n_out, 0x4242);
  std::vector<float> ws(linear_bf16_workspace_floats(m, 2 * n_out, k, threads, true) + 1, NAN);
  LinearArgs a;
  a.x = x;
  a.ldx = ldx;
  a.w = {packed.data(), 2 * n_out, k};
  a.m = m;
  a.out_bf16 = out.data();
  a.ldo = static_cast<size_t>(n_out);
  a.workspace = ws.data();
  a.isa = variant.isa;
  a.blocking = variant.blocking;
  a.swiglu = true;
  int cursor = 0;
  a.work_cursor = &cursor;
  for (int t = 0; t < threads; ++t) linear_bf16_compute(a, t, threads);
  return out;
}

}  // namespace

// N of 34 panels: decode runs of 8 panels at one thread (two 4-panel AVX2 tiles) and of 4 at
// two, and a last run of 2; K odd (a half pair). The 12-row product runs the K-blocked tiles.
TEST_CASE("linear_bf16 gives a row the same bits whatever rows share the call (scalar, AVX2, AVX-512)", "[kernels]") {
  std::mt19937 rng(31);
  const Problem all = make_problem(12, 32 * 33 + 7, 2 * 300 + 1, rng, true);
  Options o;
  o.bias = true;
  o.residual = true;
  for (const Variant& variant : row_invariant_variants()) {
    o.blocking = variant.blocking;
    for (int threads : {1, 2}) {
      const std::vector<float> whole = run(all, o, variant.isa, threads);
      check_against_reference(all, o, whole);
      for (int m : {1, 2, 3, 8}) {
        for (int row0 : {0, 12 - m}) {
          INFO(variant.label << " threads " << threads << " rows " << row0 << ".." << row0 + m - 1);
          const std::vector<float> part = run(rows_of(all, row0, m), o, variant.isa, threads);
          const std::vector<float> want(whole.begin() + static_cast<std::ptrdiff_t>(row0) * all.n,
                                        whole.begin() + static_cast<std::ptrdiff_t>(row0 + m) * all.n);
          CHECK(part == want);
        }
      }
    }
  }
}

// The fused SwiGLU: 10 panel pairs, decode runs of 2 pairs at one thread (one 4-panel AVX2 tile
// of two pairs) and of 1 at two threads.
TEST_CASE("fused SwiGLU linear gives a row the same bits whatever rows share the call (scalar, AVX2, AVX-512)",
          "[kernels]") {
  std::mt19937 rng(32);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  const int m = 12, n_out = 32 * 9 + 5, k = 301;
  const size_t ldx = k + 3;
  std::vector<bf16_t> x(static_cast<size_t>(m) * ldx, 0x7fc0);  // NaN padding: never read
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) x[static_cast<size_t>(r) * ldx + c] = f32_to_bf16(dist(rng));
  }
  std::vector<float> gate(static_cast<size_t>(n_out) * k), up(gate.size());
  for (float& v : gate) v = round_to_bf16(0.2f * dist(rng));
  for (float& v : up) v = round_to_bf16(0.2f * dist(rng));
  std::vector<bf16_t> packed(packed_swiglu_elems(n_out, k));
  pack_swiglu_bf16(packed.data(), gate.data(), up.data(), n_out, k, static_cast<size_t>(k));
  // The reference, with the fused SwiGLU test's tolerance (test_linear_bf16.cpp).
  std::vector<float> xf(static_cast<size_t>(m) * k), g_ref(static_cast<size_t>(m) * n_out), u_ref(g_ref.size());
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) xf[static_cast<size_t>(r) * k + c] = bf16_to_f32(x[static_cast<size_t>(r) * ldx + c]);
  }
  ref::linear(g_ref.data(), xf.data(), gate.data(), nullptr, m, n_out, k);
  ref::linear(u_ref.data(), xf.data(), up.data(), nullptr, m, n_out, k);
  const auto check_whole = [&](const std::vector<bf16_t>& got) {
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < n_out; ++c) {
        double scale = 0;
        for (int kk = 0; kk < k; ++kk) {
          const float xv = xf[static_cast<size_t>(r) * k + kk];
          scale += std::fabs(xv * gate[static_cast<size_t>(c) * k + kk]) +
                   std::fabs(xv * up[static_cast<size_t>(c) * k + kk]);
        }
        const size_t i = static_cast<size_t>(r) * n_out + c;
        const float g = g_ref[i], u = u_ref[i], want = g / (1.0f + std::exp(-g)) * u;
        const double tol = 2e-5 * scale * (1.2 * std::fabs(u) + std::fabs(g) + 1.0) + std::ldexp(std::fabs(want), -8);
        if (!(std::fabs(bf16_to_f32(got[i]) - want) <= tol)) {
          FAIL_CHECK("row " << r << " col " << c << ": got " << bf16_to_f32(got[i]) << " want " << want);
          return;
        }
      }
    }
  };
  for (const Variant& variant : row_invariant_variants()) {
    for (int threads : {1, 2}) {
      const std::vector<bf16_t> whole = swiglu(x.data(), ldx, m, packed, n_out, k, variant, threads);
      check_whole(whole);
      for (int rows : {1, 2, 5}) {
        for (int row0 : {0, m - rows}) {
          INFO(variant.label << " threads " << threads << " rows " << row0 << ".." << row0 + rows - 1);
          const std::vector<bf16_t> part =
              swiglu(x.data() + static_cast<size_t>(row0) * ldx, ldx, rows, packed, n_out, k, variant, threads);
          const std::vector<bf16_t> want(whole.begin() + static_cast<std::ptrdiff_t>(row0) * n_out,
                                         whole.begin() + static_cast<std::ptrdiff_t>(row0 + rows) * n_out);
          CHECK(part == want);
        }
      }
    }
  }
}
