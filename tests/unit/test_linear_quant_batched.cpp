// Quantized linear (INT8 / INT4 weights): epilogues, exact batched integer math, threads and the
// fused SwiGLU, against the references in linear_quant_reference.h (which documents the rules).
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

TEST_CASE("batched integer sums are exact at the largest codes and activations", "[quant]") {
  // Codes at the top of their range (even columns) and at 0 (odd ones), activations all +127, all
  // -127, or +127 and -127 in runs of 64: the SIMD tiles' 16-bit partial sums (W8: |code − 128| ·
  // ±x pairs; W4: several steps added before widening) reach their bounds. Weight scales 1 and
  // each block's activation scale 1, so the result is the exact integer dot product.
  std::mt19937 rng(5);
  const std::vector<Isa> isas = test::quant_isas();
  for (const QuantFormat& f : kFormats) {
    const int n = 32, k = 512, m = 3;
    QuantMatrix q = make_matrix(f, n, k, rng);
    for (int c = 0; c < n; ++c) {
      std::fill_n(q.codes.begin() + static_cast<long>(c) * k, k, static_cast<uint8_t>(c % 2 ? 0 : top_code(f)));
    }
    std::fill(q.scales.begin(), q.scales.end(), 1.0f);
    pack_quant_linear_codes(q.packed.data(), f, q.codes.data(), static_cast<size_t>(k), q.scales.data(),
                            f.zero_point ? q.zeros.data() : nullptr, n, k);
    Inputs in = make_inputs(m, n, k, rng);
    std::vector<int> v(static_cast<size_t>(m) * k);
    for (int c = 0; c < k; ++c) {
      v[static_cast<size_t>(c)] = 127;
      v[static_cast<size_t>(k + c)] = -127;
      v[static_cast<size_t>(2 * k + c)] = c / 64 % 2 ? 127 : -127;
    }
    for (int r = 0; r < m; ++r) {
      for (int c = 0; c < k; ++c)
        in.x[static_cast<size_t>(r) * in.ldx + c] = f32_to_bf16(static_cast<float>(v[static_cast<size_t>(r) * k + c]));
    }
    for (Isa isa : isas) {
      const std::vector<float> got = run(q, in, Options{}, isa, 1);
      for (int r = 0; r < m; ++r) {
        for (int c = 0; c < n; ++c) {
          double want = 0.0;
          for (int kk = 0; kk < k; ++kk) {
            const size_t gi = static_cast<size_t>(c) * q.groups + static_cast<size_t>(kk / q.gs);
            want += double{1.0} * v[static_cast<size_t>(r) * k + kk] *
                    (q.codes[static_cast<size_t>(c) * k + kk] - static_cast<double>(q.zeros[gi]));
          }
          REQUIRE(std::fabs(want) < (1 << 24));
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
        // With the shared counter run in turn, thread 0 takes all but the others' first units.
        std::vector<float> solo(out.size(), 0.0f);
        QuantLinearArgs b = a;
        b.out_f32 = solo.data();
        int cursor = 0;
        b.work_cursor = &cursor;
        if (quant_linear_needs_prepare(m)) {
          for (int t = 0; t < pool.size(); ++t) quant_linear_prepare(b, t, pool.size());
        }
        for (int t = 0; t < pool.size(); ++t) quant_linear_compute(b, t, pool.size());
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
      // 272: 17 gate panels, runs of 4 on one thread, so decode tiles of two units form (W8 one
      // row on AVX2: four panels) and one unit is left alone.
      for (int n_out : {48, 112, 272}) {
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
