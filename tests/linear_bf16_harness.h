#pragma once
// The BF16 linear tests' harness (test_linear_bf16*.cpp): random problems on BF16-rounded inputs,
// the kernel run as n threads would run it, and the scalar FP32 reference with its tolerance.
//
// Tolerance: inputs are exactly representable (rounded to BF16 before the reference sees them),
// products of two BF16 values are exact in FP32, so the only differences are the order and
// rounding of FP32 sums. Both sides accumulate at most K terms in FP32, so
//   |kernel - ref| <= 2e-5 * (sum_k |x_k||w_k| + |bias| + |residual|)
// (K ≤ 600 here, 2048 on the AMX tiles: K·2^-24 ≈ 4e-5 / 1.2e-4 worst case, ~1e-6 typical).
// BF16 outputs also carry their own rounding: + 2^-8 |ref|.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/reference.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

namespace slab::test::bf16_harness {

using namespace slab::kern;

struct Problem {
  int m, n, k;
  size_t ldx, ldo, ldr;
  std::vector<float> x, w, bias, residual;  // BF16-representable values
  std::vector<bf16_t> xb, packed;
};

inline Problem make_problem(int m, int n, int k, std::mt19937& rng, bool pad_strides) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p{m, n, k, 0, 0, 0, {}, {}, {}, {}, {}, {}};
  p.ldx = static_cast<size_t>(k) + (pad_strides ? 5 : 0);
  p.ldo = static_cast<size_t>(n) + (pad_strides ? 3 : 0);
  p.ldr = static_cast<size_t>(n) + (pad_strides ? 7 : 0);
  p.x.assign(static_cast<size_t>(m) * k, 0.0f);
  p.xb.assign(static_cast<size_t>(m) * p.ldx + 1, 0x7fc0);  // padding holds NaN: must not be read
  for (int r = 0; r < m; ++r) {
    for (int c = 0; c < k; ++c) {
      const float v = round_to_bf16(dist(rng));
      p.x[static_cast<size_t>(r) * k + c] = v;
      p.xb[static_cast<size_t>(r) * p.ldx + c] = f32_to_bf16(v);
    }
  }
  p.w.resize(static_cast<size_t>(n) * k);
  for (float& v : p.w) v = round_to_bf16(dist(rng));
  p.bias.resize(static_cast<size_t>(n));
  for (float& v : p.bias) v = dist(rng);
  p.residual.assign(static_cast<size_t>(m) * p.ldr, 0.0f);
  for (float& v : p.residual) v = 4.0f * dist(rng);
  p.packed.assign(packed_bf16_elems(n, k), 0xffff);
  pack_linear_bf16(p.packed.data(), p.w.data(), n, k, static_cast<size_t>(k));
  return p;
}

struct Options {
  bool bias = false;
  bool residual = false;
  bool bf16_out = false;
  bool in_place = false;      // residual == out_f32
  bool amx = false;           // LinearArgs::amx (with Isa::avx512_bf16; checked to take the AMX path)
  bool amx_emulated = false;  // LinearArgs::amx_emulated: the AMX path on kern::AmxEmulator
  LinearBlocking blocking;
  // With a work cursor, the n_threads run phase 1 one after another: thread 0 takes its own
  // first task and every task the counter deals, each later thread only its own first one.
  bool cursor_in_turn = false;
};

// Runs the kernel as n_threads threads would (each thread index in turn, then the reduction),
// or really in parallel on `pool` when given.
inline std::vector<float> run(const Problem& p, const Options& o, Isa isa, int n_threads, ThreadPool* pool = nullptr) {
  std::vector<float> out(static_cast<size_t>(p.m) * p.ldo + 1, 12345.0f);
  std::vector<bf16_t> out_b(out.size(), 0x4242);
  if (o.in_place) {
    for (int r = 0; r < p.m; ++r) {
      for (int c = 0; c < p.n; ++c) {
        out[static_cast<size_t>(r) * p.ldo + c] = p.residual[static_cast<size_t>(r) * p.ldr + c];
      }
    }
  }
  std::vector<float> ws(linear_bf16_workspace_floats(p.m, p.n, p.k, n_threads) + 1, NAN);
  LinearArgs a;
  a.x = p.xb.data();
  a.ldx = p.ldx;
  a.w = {p.packed.data(), p.n, p.k};
  a.m = p.m;
  if (o.bf16_out) {
    a.out_bf16 = out_b.data();
  } else {
    a.out_f32 = out.data();
  }
  a.ldo = p.ldo;
  a.bias = o.bias ? p.bias.data() : nullptr;
  if (o.in_place) {
    a.residual = out.data();
    a.ldr = p.ldo;
  } else if (o.residual) {
    a.residual = p.residual.data();
    a.ldr = p.ldr;
  }
  a.workspace = ws.data();
  a.isa = isa;
  a.amx = o.amx;
  a.amx_emulated = o.amx_emulated;
  a.blocking = o.blocking;
  if (o.amx || o.amx_emulated) REQUIRE(linear_bf16_uses_amx(a));
  if (pool) {
    REQUIRE(pool->size() == n_threads);
    linear_bf16(a, n_threads, [pool](auto&& f) { pool->run_on_all(f); });
  } else if (o.cursor_in_turn) {
    REQUIRE_FALSE(linear_bf16_needs_reduce(p.m, p.n, p.k, n_threads));
    int cursor = 0;
    a.work_cursor = &cursor;
    for (int t = 0; t < n_threads; ++t) linear_bf16_compute(a, t, n_threads);
  } else {
    for (int t = 0; t < n_threads; ++t) linear_bf16_compute(a, t, n_threads);
    if (linear_bf16_needs_reduce(p.m, p.n, p.k, n_threads)) {
      for (int t = 0; t < n_threads; ++t) linear_bf16_reduce(a, t, n_threads);
    }
  }
  // Columns between n and ldo are never written.
  for (int r = 0; r < p.m; ++r) {
    for (size_t c = static_cast<size_t>(p.n); c < p.ldo; ++c) {
      REQUIRE(out[static_cast<size_t>(r) * p.ldo + c] == 12345.0f);
      REQUIRE(out_b[static_cast<size_t>(r) * p.ldo + c] == 0x4242);
    }
  }
  REQUIRE(out.back() == 12345.0f);
  std::vector<float> result(static_cast<size_t>(p.m) * p.n);
  for (int r = 0; r < p.m; ++r) {
    for (int c = 0; c < p.n; ++c) {
      const size_t i = static_cast<size_t>(r) * p.ldo + c;
      result[static_cast<size_t>(r) * p.n + c] = o.bf16_out ? bf16_to_f32(out_b[i]) : out[i];
    }
  }
  return result;
}

inline void check_against_reference(const Problem& p, const Options& o, const std::vector<float>& got) {
  std::vector<float> ref(static_cast<size_t>(p.m) * p.n);
  ref::linear(ref.data(), p.x.data(), p.w.data(), o.bias ? p.bias.data() : nullptr, p.m, p.n, p.k);
  for (int r = 0; r < p.m; ++r) {
    for (int c = 0; c < p.n; ++c) {
      const size_t i = static_cast<size_t>(r) * p.n + c;
      double scale = 0.0;
      for (int kk = 0; kk < p.k; ++kk) {
        scale += std::fabs(p.x[static_cast<size_t>(r) * p.k + kk] * p.w[static_cast<size_t>(c) * p.k + kk]);
      }
      float expect = ref[i];
      if (o.bias) scale += std::fabs(p.bias[static_cast<size_t>(c)]);
      if (o.residual || o.in_place) {
        const float res = p.residual[static_cast<size_t>(r) * p.ldr + c];
        expect += res;
        scale += std::fabs(res);
      }
      double tol = 2e-5 * scale + 1e-30;
      if (o.bf16_out) tol += std::ldexp(std::fabs(expect), -8);
      if (!(std::fabs(got[i] - expect) <= tol)) {
        FAIL_CHECK("m=" << p.m << " n=" << p.n << " k=" << p.k << " row " << r << " col " << c << ": got " << got[i]
                        << " want " << expect << " tol " << tol);
        return;
      }
    }
  }
}

inline std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::scalar};
  if (cpu_features().has_avx2_kernels()) v.push_back(Isa::avx2);
  if (cpu_features().has_avx512_bf16_kernels()) v.push_back(Isa::avx512_bf16);
  return v;
}

}  // namespace slab::test::bf16_harness
