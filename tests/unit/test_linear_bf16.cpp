// BF16 linear kernel against the scalar FP32 reference on BF16-rounded inputs (harness and
// tolerance: linear_bf16_harness.h).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/reference.h"
#include "linear_bf16_harness.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

using namespace slab;
using namespace slab::kern;
using namespace slab::test::bf16_harness;

TEST_CASE("bf16 conversions round to nearest even", "[kernels]") {
  CHECK(f32_to_bf16(1.0f) == 0x3f80);
  CHECK(bf16_to_f32(0x3f80) == 1.0f);
  CHECK(f32_to_bf16(-2.0f) == 0xc000);
  // 1 + 2^-8 is a tie between 1 and 1 + 2^-7: to even (1). 1 + 3*2^-8 ties up to 1 + 2^-6.
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)) == 0x3f80);
  CHECK(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)) == 0x3f82);
  CHECK(f32_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)) == 0x3f81);
  CHECK(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
  CHECK(std::isinf(bf16_to_f32(f32_to_bf16(INFINITY))));
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  for (size_t n : {size_t{1}, size_t{15}, size_t{16}, size_t{33}, size_t{100}}) {
    std::vector<float> src(n);
    for (float& v : src) v = dist(rng);
    for (Isa isa : isas()) {
      std::vector<bf16_t> dst(n + 1, 0x1234);
      convert_f32_to_bf16(dst.data(), src.data(), n, isa);
      for (size_t i = 0; i < n; ++i) CHECK(dst[i] == f32_to_bf16(src[i]));
      CHECK(dst[n] == 0x1234);
      std::vector<float> back(n);
      convert_bf16_to_f32(back.data(), dst.data(), n);
      for (size_t i = 0; i < n; ++i) CHECK(back[i] == round_to_bf16(src[i]));
    }
  }
  // Ties, NaNs, infinities, overflow to infinity and denormals, in the vector loop and the tail,
  // on every path that keeps denormals (AVX-512's vcvtneps2bf16 flushes them to zero).
  const float tie = 1.0f + std::ldexp(1.0f, -8), odd_tie = 1.0f + 3 * std::ldexp(1.0f, -8);
  const uint32_t low_payload_nan_bits = 0x7f800001u;  // rounding alone would carry it to infinity
  float low_payload_nan;
  std::memcpy(&low_payload_nan, &low_payload_nan_bits, sizeof(float));
  const float specials[] = {tie,   odd_tie, -tie,    NAN,    -NAN,    low_payload_nan, INFINITY, -INFINITY,   0.0f,
                            -0.0f, 1e-40f,  -3e-39f, 1e-45f, 3.4e38f, -3.39e38f,       65504.0f, 1.00390625f, 0.1f};
  std::vector<float> src;
  for (int rep = 0; rep < 3; ++rep) src.insert(src.end(), std::begin(specials), std::end(specials));
  for (Isa isa : isas()) {
    if (isa == Isa::avx512_bf16) continue;
    std::vector<bf16_t> dst(src.size());
    convert_f32_to_bf16(dst.data(), src.data(), src.size(), isa);
    for (size_t i = 0; i < src.size(); ++i) {
      INFO("isa " << isa_name(isa) << " value " << src[i]);
      CHECK(dst[i] == f32_to_bf16(src[i]));
    }
  }
}

TEST_CASE("packing lays out 32-column panels of interleaved k-pairs", "[kernels]") {
  const int n = 37, k = 5;
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i + 1);
  std::vector<bf16_t> packed(packed_bf16_elems(n, k), 0xffff);
  REQUIRE(packed.size() == 2u * 3u * 64u);
  pack_linear_bf16(packed.data(), w.data(), n, k, static_cast<size_t>(k));
  for (int p = 0; p < 2; ++p) {
    for (int pair = 0; pair < 3; ++pair) {
      for (int col = 0; col < 32; ++col) {
        for (int j = 0; j < 2; ++j) {
          const int row = 32 * p + col, kk = 2 * pair + j;
          const float want = (row < n && kk < k) ? w[static_cast<size_t>(row) * k + kk] : 0.0f;
          CHECK(bf16_to_f32(packed[((static_cast<size_t>(p) * 3 + pair) * 32 + col) * 2 + j]) == want);
        }
      }
    }
  }
  // From a BF16 source: identical bytes.
  std::vector<bf16_t> wb(w.size());
  for (size_t i = 0; i < w.size(); ++i) wb[i] = f32_to_bf16(w[i]);
  std::vector<bf16_t> packed2(packed.size(), 0);
  pack_linear_bf16(packed2.data(), wb.data(), n, k, static_cast<size_t>(k));
  CHECK(packed2 == packed);
}

TEST_CASE("linear_bf16 matches the reference on ragged shapes", "[kernels]") {
  std::mt19937 rng(1234);
  const int ms[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 20, 100};
  const int ns[] = {1, 31, 32, 33, 97};
  const int ks[] = {1, 3, 63, 130, 513};
  for (int m : ms) {
    for (int n : ns) {
      for (int k : ks) {
        const bool pad = (m + n + k) % 2 == 0;
        const Problem p = make_problem(m, n, k, rng, pad);
        Options o;
        o.bias = (m + k) % 3 != 0;
        o.residual = (n + k) % 2 == 0;
        o.in_place = !o.residual && m % 4 == 1;
        o.bf16_out = !o.in_place && (m * 7 + n + k) % 5 == 0;
        for (Isa isa : isas()) {
          for (int threads : {1, 3}) {
            INFO("isa " << isa_name(isa) << " threads " << threads << " m " << m << " n " << n << " k " << k);
            check_against_reference(p, o, run(p, o, isa, threads));
          }
        }
      }
    }
  }
}

TEST_CASE("linear_bf16 epilogues: bias, residual, in place, bf16 out", "[kernels]") {
  std::mt19937 rng(99);
  for (int m : {1, 6, 11}) {
    const Problem p = make_problem(m, 70, 300, rng, true);
    for (int mode = 0; mode < 6; ++mode) {
      Options o;
      o.bias = mode & 1;
      o.residual = mode == 2 || mode == 3;
      o.in_place = mode == 4;
      o.bf16_out = mode == 5;
      for (Isa isa : isas()) {
        INFO("isa " << isa_name(isa) << " m " << m << " mode " << mode);
        check_against_reference(p, o, run(p, o, isa, 2));
      }
    }
  }
}

TEST_CASE("linear_bf16 thread counts agree and split-K decode and a real pool", "[kernels]") {
  std::mt19937 rng(5);
  ThreadPool pool({.n_threads = 2, .pin = false});
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{1, 33, 2048}, Shape{3, 1, 1000}, Shape{8, 64, 777}, Shape{4, 200, 64}, Shape{16, 40, 400},
                        Shape{64, 130, 515}, Shape{20, 70, 1537}}) {  // the last: 4 K blocks, odd K
    const Problem p = make_problem(s.m, s.n, s.k, rng, false);
    Options o;
    o.bias = true;
    o.residual = true;
    for (Isa isa : isas()) {
      INFO("isa " << isa_name(isa) << " m " << s.m << " n " << s.n << " k " << s.k);
      const std::vector<float> one = run(p, o, isa, 1);
      check_against_reference(p, o, one);
      for (int threads : {2, 4, 7, 16}) {
        INFO("threads " << threads << " split-K " << linear_bf16_needs_reduce(s.m, s.n, s.k, threads));
        const std::vector<float> many = run(p, o, isa, threads);
        check_against_reference(p, o, many);
        if (!linear_bf16_needs_reduce(s.m, s.n, s.k, threads)) CHECK(many == one);
      }
      check_against_reference(p, o, run(p, o, isa, 2, &pool));
    }
  }
  // Split-K really happens for narrow decode shapes.
  CHECK(linear_bf16_needs_reduce(1, 33, 2048, 4));
  CHECK(linear_bf16_needs_reduce(3, 1, 1000, 2));
  CHECK_FALSE(linear_bf16_needs_reduce(1, 2048, 2048, 2));
  CHECK_FALSE(linear_bf16_needs_reduce(16, 1, 2048, 4));
}

TEST_CASE("scalar, avx2 and avx512 paths agree", "[kernels]") {
  if (isas().size() == 1) {
    WARN("no avx2 or avx512_bf16 on this CPU: only the scalar path was tested");
    return;
  }
  std::mt19937 rng(11);
  for (int m : {1, 5, 12, 30}) {
    const Problem p = make_problem(m, 96, 2 * 300 + 1, rng, false);
    Options o;
    o.bias = true;
    const std::vector<float> a = run(p, o, Isa::scalar, 2);
    for (Isa isa : isas()) {
      INFO("isa " << isa_name(isa) << " m " << m);
      const std::vector<float> b = run(p, o, isa, 2);
      for (size_t i = 0; i < a.size(); ++i) CHECK(std::fabs(a[i] - b[i]) <= 1e-4f);
    }
  }
}

// The AMX path (on the hardware, or emulated) with the epilogue the combination number picks:
// bias or not, residual, in place, BF16 out.
namespace {
Options amx_options(int combo, bool emulated) {
  Options o;
  o.amx = !emulated;
  o.amx_emulated = emulated;
  o.bias = combo % 3 != 0;
  o.residual = combo % 4 == 1;
  o.in_place = !o.residual && combo % 5 == 2;
  o.bf16_out = !o.in_place && !o.residual && combo % 3 == 0;
  return o;
}

// False, with a warning naming what went untested, on a CPU without the AVX-512 BF16 kernels
// (the emulated AMX paths' epilogues and the FP32-product form need them).
bool avx512_bf16_or_warn(const char* untested) {
  if (cpu_features().has_avx512_bf16_kernels()) return true;
  WARN(untested << " not tested: no AVX-512 BF16 kernels on this CPU (" << cpu_features().summary() << ")");
  return false;
}
}  // namespace

// The AMX path on the tile emulator (kernels/amx_tiles.h), so that CPUs without AMX (CI) run its
// tiling, tile configuration, K blocking and epilogue: ragged rows (one A tile, two, a partial
// second), ragged columns, K from one step to several K blocks, every epilogue; against the
// reference, and bit for bit across thread counts and the shared counter. On an AMX CPU the next
// test runs the same on the hardware.
TEST_CASE("linear_bf16 on emulated AMX tiles matches the reference", "[kernels]") {
  if (!avx512_bf16_or_warn("emulated AMX-BF16 path")) return;
  std::mt19937 rng(2468);
  int combo = 0;
  for (int m : {9, 16, 17, 33, 48}) {
    for (int n : {32, 97}) {
      for (int k : {32, 544}) {
        for (int amx_k : {0, 64, 256}) {
          if (amx_k >= k) continue;
          ++combo;
          const Problem p = make_problem(m, n, k, rng, combo % 2 == 0);
          Options o = amx_options(combo, true);
          o.blocking.amx_k_block = amx_k;
          INFO("m " << m << " n " << n << " k " << k << " amx k-block " << amx_k);
          o.blocking.dynamic_split = false;
          const std::vector<float> one = run(p, o, Isa::avx512_bf16, 1);
          check_against_reference(p, o, one);
          CHECK(run(p, o, Isa::avx512_bf16, 3) == one);
          o.cursor_in_turn = true;
          o.blocking.dynamic_split = true;
          CHECK(run(p, o, Isa::avx512_bf16, 3) == one);
          // Work split as prefill from every M (two-panel groups, rows cut), or from none
          // (one-panel groups): every panel pass and epilogue is the same, so are the bits.
          // The panel prefetch (a hint) leaves them alone too.
          o.blocking.amx_prefill_min_m = combo % 2 == 0 ? 1 : 1 << 30;
          o.blocking.amx_prefetch_bytes = combo % 3 == 0 ? 1024 : 0;  // the default is 16 KB
          INFO("prefill split from " << o.blocking.amx_prefill_min_m << " rows, prefetch "
                                     << o.blocking.amx_prefetch_bytes);
          CHECK(run(p, o, Isa::avx512_bf16, 3) == one);
        }
      }
    }
  }
}

// Batched decode rows on AMX take runs of neighbouring column groups from the counter (up to 8
// with enough groups a thread), the first row tile prefetching across the run's panels: the same
// bits as one thread's static share, at 1 and 3 threads, alone and with the shared counter.
TEST_CASE("linear_bf16 on emulated AMX tiles: runs of column groups give the same bits", "[kernels]") {
  if (!avx512_bf16_or_warn("emulated AMX-BF16 runs of column groups")) return;
  std::mt19937 rng(1357);
  int combo = 0;
  for (int m : {9, 40, 64}) {
    for (int n : {1100, 2080}) {  // 35 and 65 panels: runs of 8 on one thread, 2 and 5 on three
      ++combo;
      const Problem p = make_problem(m, n, 64, rng, combo % 2 == 0);
      Options o = amx_options(combo, true);
      o.blocking.dynamic_split = false;
      INFO("m " << m << " n " << n);
      const std::vector<float> one = run(p, o, Isa::avx512_bf16, 1);
      check_against_reference(p, o, one);
      o.blocking.dynamic_split = true;
      for (int threads : {1, 3}) {
        INFO("threads " << threads);
        CHECK(run(p, o, Isa::avx512_bf16, threads) == one);
        o.cursor_in_turn = true;
        CHECK(run(p, o, Isa::avx512_bf16, threads) == one);
        o.cursor_in_turn = false;
      }
    }
  }
}

// Threads taking work from the shared counter (LinearBlocking::dynamic_split, the default) compute
// the same bits as fixed shares: tasks are whole output blocks over the whole K, whichever thread
// runs them. Run in turn, one thread takes all but the others' first tasks (a pool whose other
// threads are slow), and a real pool splits them at run time; decode, small and large M, K blocked, AMX where the CPU has it.
TEST_CASE("linear_bf16 work from the shared counter gives the static split's bits", "[kernels]") {
  std::mt19937 rng(77);
  ThreadPool pool({.n_threads = 4, .pin = false});
  struct Shape {
    int m, n, k;
  };
  for (const Shape s : {Shape{1, 600, 512}, Shape{8, 520, 777}, Shape{16, 40, 400}, Shape{20, 70, 1537},
                        Shape{64, 130, 515}, Shape{200, 256, 256}, Shape{130, 97, 2048}}) {
    const Problem p = make_problem(s.m, s.n, s.k, rng, s.m % 2 == 0);
    for (Isa isa : isas()) {
      for (const bool amx : {false, true}) {
        if (amx && (isa != Isa::avx512_bf16 || !amx_bf16_usable() || s.m < 16 || s.k % 32 != 0)) continue;
        INFO("isa " << isa_name(isa) << (amx ? " + amx" : "") << " m " << s.m << " n " << s.n << " k " << s.k);
        Options o;
        o.bias = true;
        o.residual = true;
        o.amx = amx;
        o.blocking.k_block_pairs = 128;  // K blocked above 256 elements
        o.blocking.dynamic_split = false;
        const std::vector<float> fixed = run(p, o, isa, 4);
        check_against_reference(p, o, fixed);
        CHECK(run(p, o, isa, 4, &pool) == fixed);
        o.blocking.dynamic_split = true;
        CHECK(run(p, o, isa, 4, &pool) == fixed);
        o.cursor_in_turn = true;
        CHECK(run(p, o, isa, 4) == fixed);
        CHECK(run(p, o, isa, 16) == fixed);
      }
    }
  }
}

// The AMX tiles (M >= 9, K a multiple of 32): ragged rows (one or two A tiles, shortened),
// ragged columns, K from one tdpbf16ps step to TinyLlama's hidden size, every epilogue, thread
// counts that split rows as well as columns; and bit-for-bit the same for every thread count.
TEST_CASE("linear_bf16 on AMX tiles matches the reference", "[kernels]") {
  if (!amx_bf16_usable()) {
    WARN("no AMX-BF16 tiles on this CPU (or no tile permission from the kernel): the AMX path was not tested ("
         << cpu_features().summary() << ")");
    return;
  }
  std::mt19937 rng(4321);
  ThreadPool pool({.n_threads = 4, .pin = false});
  const int ms[] = {9, 12, 16, 17, 31, 32, 33, 48, 100, 130};
  const int ns[] = {32, 33, 97, 200};
  const int ks[] = {32, 64, 544, 2048};
  int combo = 0;
  for (int m : ms) {
    for (int n : ns) {
      for (int k : ks) {
        ++combo;
        const Problem p = make_problem(m, n, k, rng, combo % 2 == 0);
        const Options o = amx_options(combo, false);
        INFO("m " << m << " n " << n << " k " << k);
        const std::vector<float> one = run(p, o, Isa::avx512_bf16, 1);
        check_against_reference(p, o, one);
        for (int threads : {3, 16}) {
          INFO("threads " << threads);
          CHECK(run(p, o, Isa::avx512_bf16, threads) == one);
        }
        CHECK(run(p, o, Isa::avx512_bf16, 4, &pool) == one);
        for (const int prefill_from : {1, 1 << 30}) {
          Options g = o;
          g.blocking.amx_prefill_min_m = prefill_from;
          g.blocking.amx_prefetch_bytes = prefill_from == 1 ? 16384 : 0;
          INFO("prefill split from " << prefill_from << " rows, prefetch " << g.blocking.amx_prefetch_bytes);
          CHECK(run(p, g, Isa::avx512_bf16, 16) == one);
        }
      }
    }
  }
  // Shapes the tiles do not take fall back to the AVX-512 tiles (the flag is a permission).
  LinearArgs a;
  a.isa = Isa::avx512_bf16;
  a.amx = true;
  a.w = {nullptr, 64, 2048};
  a.m = 8;
  CHECK_FALSE(linear_bf16_uses_amx(a));  // decode-size M
  a.m = 9;
  CHECK(linear_bf16_uses_amx(a));
  a.m = 64;
  CHECK(linear_bf16_uses_amx(a));
  a.w.k = 2047;
  CHECK_FALSE(linear_bf16_uses_amx(a));  // K not a multiple of 32
  a.w.k = 2048;
  a.isa = Isa::avx2;
  CHECK_FALSE(linear_bf16_uses_amx(a));
}

// Every cache blocking a CPU's entry (model/linear_tuning.h) or --blocking may choose computes the
// same product: K blocks down to 64 elements and past K, every register tile shape, prefetch off,
// the decode tiles' software prefetch (5 and 8 rows; its lines run past the matrix); on the AMX tiles, K blocks of 64..1024 elements with x packed per block, bit-identical across
// thread counts.
TEST_CASE("linear_bf16 cache blockings match the reference", "[kernels]") {
  std::mt19937 rng(99);
  const LinearBlocking blockings[] = {
      {.k_block_pairs = 32},
      {.k_block_pairs = 4096},
      {.k_block_pairs = 64, .tile_rows = 4, .tile_panels = 2},
      {.tile_rows = 5, .tile_panels = 2, .prefetch = false},
      {.k_block_pairs = 128, .tile_rows = 8, .tile_panels = 1},
      {.tile_rows = 3, .tile_panels = 1},
      {.decode_prefetch_bytes = 1024},
      {.decode_prefetch_bytes = 8192},
  };
  for (Isa isa : isas()) {
    for (const LinearBlocking& b : blockings) {
      for (int m : {5, 8, 17, 37}) {
        INFO("isa " << isa_name(isa) << " m " << m << " k_block_pairs " << b.k_block_pairs << " tile " << b.tile_rows
                    << "x" << 32 * b.tile_panels << " prefetch " << b.prefetch << " decode prefetch "
                    << b.decode_prefetch_bytes);
        const Problem p = make_problem(m, 100, 2 * 300 + 9, rng, true);
        Options o;
        o.bias = true;
        o.residual = true;
        o.blocking = b;
        check_against_reference(p, o, run(p, o, isa, 3));
      }
    }
  }
  if (!amx_bf16_usable()) {
    WARN("no AMX-BF16 tiles on this CPU: the K-blocked AMX path was not tested (" << cpu_features().summary() << ")");
    return;
  }
  for (int amx_k : {64, 96, 256, 1024}) {
    for (int m : {16, 33, 100}) {
      for (int k : {64, 608, 2048}) {
        INFO("amx k-block " << amx_k << " m " << m << " k " << k);
        const Problem p = make_problem(m, 97, k, rng, m == 33);
        Options o;
        o.amx = true;
        o.bias = true;
        o.in_place = m == 100;
        o.blocking.amx_k_block = amx_k;
        const std::vector<float> one = run(p, o, Isa::avx512_bf16, 1);
        check_against_reference(p, o, one);
        CHECK(run(p, o, Isa::avx512_bf16, 3) == one);
        CHECK(run(p, o, Isa::avx512_bf16, 16) == one);
      }
    }
  }
}

// The AVX-512 FP32-product form (LinearBlocking::fp32_products, the Intel entries): 6 x 64 tiles
// with 1..5-row tails, one-panel groups (5 and 3 panels), odd K (a half pair) and K blocks of 32
// pairs up to past the form's 256-pair cap, every epilogue; the first row tile of each group
// writes the FP32 block the later ones read, so threads that split a group's rows differently
// (1, 3, 16) must all match the reference.
TEST_CASE("linear_bf16 FP32 products on AVX-512 match the reference", "[kernels]") {
  if (!avx512_bf16_or_warn("the FP32-product form")) return;
  std::mt19937 rng(2026);
  int case_index = 0;
  for (int m : {9, 13, 17, 37, 100}) {
    for (int n : {31, 97, 130}) {
      for (int k : {1, 63, 514, 1031}) {
        for (int k_block : {32, 256, 4096}) {
          ++case_index;
          const Problem p = make_problem(m, n, k, rng, case_index % 2 == 0);
          Options o;
          o.bias = case_index % 3 != 0;
          o.residual = case_index % 4 == 1;
          o.in_place = !o.residual && case_index % 5 == 0;
          o.bf16_out = !o.in_place && !o.residual && case_index % 2 == 0;
          o.blocking.fp32_products = true;
          o.blocking.k_block_pairs = k_block;
          for (int threads : {1, 3, 16}) {
            INFO("m " << m << " n " << n << " k " << k << " k_block_pairs " << k_block << " threads " << threads);
            check_against_reference(p, o, run(p, o, Isa::avx512_bf16, threads));
          }
        }
      }
    }
  }
}

TEST_CASE("check_linear_blocking refuses out-of-range fields", "[kernels]") {
  CHECK_NOTHROW(check_linear_blocking(LinearBlocking{}));
  CHECK_THROWS_WITH(check_linear_blocking({.k_block_pairs = 16}), Catch::Contains("k_block_pairs"));
  CHECK_THROWS_WITH(check_linear_blocking({.tile_rows = 7, .tile_panels = 2}), Catch::Contains("tile_rows"));
  CHECK_THROWS_WITH(check_linear_blocking({.tile_rows = 4, .tile_panels = 3}), Catch::Contains("tile_panels"));
  CHECK_THROWS_WITH(check_linear_blocking({.amx_k_block = 48}), Catch::Contains("amx_k_block"));
  CHECK_THROWS_WITH(check_linear_blocking({.amx_k_block = 2048}), Catch::Contains("amx_k_block"));
  CHECK_THROWS_WITH(check_linear_blocking({.amx_prefill_min_m = 0}), Catch::Contains("amx_prefill_min_m"));
  CHECK_THROWS_WITH(check_linear_blocking({.amx_prefetch_bytes = 100}), Catch::Contains("amx_prefetch_bytes"));
  CHECK_THROWS_WITH(check_linear_blocking({.decode_prefetch_bytes = 64}), Catch::Contains("decode_prefetch_bytes"));
  CHECK_THROWS_WITH(check_linear_blocking({.decode_prefetch_bytes = 1000}), Catch::Contains("decode_prefetch_bytes"));
  LinearArgs a;  // the kernel checks its arguments' blocking too
  a.w = {nullptr, 32, 32};
  a.blocking.tile_rows = 0;
  CHECK_THROWS_AS(linear_bf16_compute(a, 0, 1), std::invalid_argument);
}

// Fused SwiGLU against the reference: gate and up linears in FP32 on the same BF16 inputs, then
// silu(gate)·up. Tolerance: each sum as in the linear tests (2e-5 of sum |x||w|), carried through
// silu (|d silu/dg| <= 1.1; gelu_tanh's is <= 1.13, inside the same bound at these sums) and the
// product, plus the output's BF16 rounding (2^-8 relative).
TEST_CASE("fused SwiGLU linear matches gate and up linears followed by silu·up (and gelu_tanh·up)", "[kernels]") {
  std::mt19937 rng(77);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  ThreadPool pool({.n_threads = 2, .pin = false});
  struct Shape {
    int m, n_out, k;
  };
  // M: decode with one 64-column tile (1..4), two 32-column tiles (5..8), the 6×64 large tile
  // below and above 16 rows. n_out: whole panels and ragged. K: odd, and over one 512 K block.
  for (const Shape s : {Shape{1, 64, 40}, Shape{3, 40, 63}, Shape{4, 96, 1030}, Shape{5, 33, 17}, Shape{8, 130, 600},
                        Shape{9, 64, 64}, Shape{16, 70, 513}, Shape{17, 32, 8}, Shape{40, 100, 1100}, Shape{16, 64, 64},
                        Shape{45, 70, 1024}}) {  // {9, 64, 64} and the last two: AMX shapes
    const size_t ldx = static_cast<size_t>(s.k) + 3, ldo = static_cast<size_t>(s.n_out) + 5;
    std::vector<float> x(static_cast<size_t>(s.m) * s.k), gate(static_cast<size_t>(s.n_out) * s.k), up(gate.size());
    std::vector<bf16_t> xb(static_cast<size_t>(s.m) * ldx, 0x7fc0);  // NaN padding: never read
    for (int r = 0; r < s.m; ++r) {
      for (int c = 0; c < s.k; ++c) {
        const float v = round_to_bf16(dist(rng));
        x[static_cast<size_t>(r) * s.k + c] = v;
        xb[static_cast<size_t>(r) * ldx + c] = f32_to_bf16(v);
      }
    }
    for (float& v : gate) v = round_to_bf16(dist(rng) * 0.2f);
    for (float& v : up) v = round_to_bf16(dist(rng) * 0.2f);
    std::vector<bf16_t> packed(packed_swiglu_elems(s.n_out, s.k), 0xffff);
    pack_swiglu_bf16(packed.data(), gate.data(), up.data(), s.n_out, s.k, static_cast<size_t>(s.k));

    std::vector<float> g_ref(static_cast<size_t>(s.m) * s.n_out), u_ref(g_ref.size());
    ref::linear(g_ref.data(), x.data(), gate.data(), nullptr, s.m, s.n_out, s.k);
    ref::linear(u_ref.data(), x.data(), up.data(), nullptr, s.m, s.n_out, s.k);

    // Each ISA with both activations; then the AMX tiles with both (where they run).
    const int isa_combos = 2 * static_cast<int>(isas().size());
    const bool amx_shape = amx_bf16_usable() && s.m >= 9 && s.k % 32 == 0;
    for (int combo = 0; combo < isa_combos + (amx_shape ? 2 : 0); ++combo) {
      const GatedAct act = combo % 2 == 0 ? GatedAct::silu : GatedAct::gelu_tanh;  // Gemma's activation
      const bool amx = combo >= isa_combos;
      const Isa isa = amx ? Isa::avx512_bf16 : isas()[static_cast<size_t>(combo / 2)];
      for (int threads : {1, 2, 3, 4}) {
        INFO("isa " << isa_name(isa) << (amx ? " + amx" : "") << " act "
                    << (act == GatedAct::silu ? "silu" : "gelu_tanh") << " threads " << threads << " m " << s.m
                    << " n_out " << s.n_out << " k " << s.k);
        CHECK_FALSE(linear_bf16_needs_reduce(s.m, 2 * s.n_out, s.k, threads, true));
        std::vector<bf16_t> out(static_cast<size_t>(s.m) * ldo, 0x4242);
        std::vector<float> ws(linear_bf16_workspace_floats(s.m, 2 * s.n_out, s.k, threads, true) + 1, NAN);
        LinearArgs a;
        a.x = xb.data();
        a.ldx = ldx;
        a.w = {packed.data(), 2 * s.n_out, s.k};
        a.m = s.m;
        a.out_bf16 = out.data();
        a.ldo = ldo;
        a.workspace = ws.data();
        a.isa = isa;
        a.swiglu = true;
        a.gated_act = act;
        a.amx = amx;
        if (threads == 3) {  // another cache blocking: SwiGLU reads both halves from one tile
          a.blocking = amx ? LinearBlocking{.amx_k_block = 64}
                           : LinearBlocking{.k_block_pairs = 32, .tile_rows = 4, .decode_prefetch_bytes = 1024};
        }
        if (threads == 4) a.blocking.fp32_products = true;  // AVX-512: FP32 products (AVX2 always)
        CHECK(linear_bf16_uses_amx(a) == amx);
        if (threads == 2) {
          linear_bf16(a, threads, [&pool](auto&& f) { pool.run_on_all(f); });
        } else {
          for (int t = 0; t < threads; ++t) linear_bf16_compute(a, t, threads);
        }
        int bad = 0;
        for (int r = 0; r < s.m; ++r) {
          for (int c = 0; c < s.n_out; ++c) {
            double scale = 0;
            for (int kk = 0; kk < s.k; ++kk) {
              const float xv = x[static_cast<size_t>(r) * s.k + kk];
              scale += std::fabs(xv * gate[static_cast<size_t>(c) * s.k + kk]) +
                       std::fabs(xv * up[static_cast<size_t>(c) * s.k + kk]);
            }
            const size_t i = static_cast<size_t>(r) * s.n_out + c;
            const float g = g_ref[i], u = u_ref[i];
            float want = g / (1.0f + std::exp(-g)) * u;
            if (act == GatedAct::gelu_tanh) ref::gelu_tanh_mul(&want, &g, &u, 1);
            const double tol =
                2e-5 * scale * (1.2 * std::fabs(u) + std::fabs(g) + 1.0) + std::ldexp(std::fabs(want), -8) + 1e-30;
            const float got = bf16_to_f32(out[static_cast<size_t>(r) * ldo + c]);
            if (!(std::fabs(got - want) <= tol) && bad++ < 3)
              FAIL_CHECK("row " << r << " col " << c << ": got " << got << " want " << want);
          }
          for (size_t c = static_cast<size_t>(s.n_out); c < ldo; ++c)
            REQUIRE(out[static_cast<size_t>(r) * ldo + c] == 0x4242);
        }
      }
    }
  }
  // The wrong combinations are refused, not computed.
  std::vector<bf16_t> packed(packed_swiglu_elems(32, 8), 0), xb(8, 0), out(32, 0);
  std::vector<float> out_f(32, 0);
  LinearArgs a;
  a.x = xb.data();
  a.ldx = 8;
  a.w = {packed.data(), 64, 8};
  a.m = 1;
  a.out_f32 = out_f.data();
  a.ldo = 32;
  a.swiglu = true;
  CHECK_THROWS_AS(linear_bf16_compute(a, 0, 1), std::invalid_argument);  // FP32 output
  a.out_f32 = nullptr;
  a.out_bf16 = out.data();
  a.residual = out_f.data();
  a.ldr = 64;
  CHECK_THROWS_AS(linear_bf16_compute(a, 0, 1), std::invalid_argument);  // residual
}
