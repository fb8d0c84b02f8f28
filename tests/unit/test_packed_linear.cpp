// packed_linear over a segmented matrix (PackedMatrix::segments: parts of one projection stacked
// along N in different quantized formats) against each segment run on its own: the segments'
// output columns, bias and residual must line up, bit for bit.
#include <catch2/catch.hpp>

#include <cstring>
#include <random>
#include <vector>

#include "model/packed_linear.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

using namespace slab;

namespace {

PackedMatrix rtn_matrix(const kern::QuantFormat& f, int n, int k, std::mt19937& rng) {
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  std::vector<float> w(static_cast<size_t>(n) * k);
  for (float& v : w) v = dist(rng);
  PackedMatrix m;
  m.n = n;
  m.k = k;
  m.quantized = true;
  m.quant = f;
  m.buf = AlignedBuffer(m.bytes());
  kern::pack_quant_linear(m.buf.as<uint8_t>(), f, w.data(), n, k, static_cast<size_t>(k));
  return m;
}

}  // namespace

TEST_CASE("a segmented matrix gives each segment's columns, bias and residual included", "[model][quant]") {
  std::mt19937 rng(12);
  ThreadPool pool({.n_threads = 2});
  const auto run_on_all = [&pool](auto&& fn) { pool.run_on_all(fn); };
  const kern::Isa isa = quant_isa_for(cpu_features().has_avx512_bf16_kernels() ? kern::Isa::avx512_bf16
                                      : cpu_features().has_avx2_kernels()      ? kern::Isa::avx2
                                                                               : kern::Isa::scalar);
  const int k = 96;
  // 40 rows: 24 in W4 g32 (not a whole number of panels), then 16 in W8 g32.
  PackedMatrix parts[2] = {rtn_matrix({4, 32, false}, 24, k, rng), rtn_matrix({8, 32, false}, 16, k, rng)};
  PackedMatrix segmented;
  segmented.n = 40;
  segmented.k = k;
  segmented.quantized = true;
  segmented.quant = parts[0].quant;
  const size_t part_bytes = parts[0].bytes() + parts[1].bytes();
  for (PackedMatrix& p : parts) segmented.segments.push_back(std::move(p));
  REQUIRE(segmented.bytes() == part_bytes);
  REQUIRE(segmented.format_name() == "W4 g32 + W8 g32");
  REQUIRE_FALSE(fused_gate_up(segmented));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int m : {1, 5, 12}) {
    const size_t ldx = k + 3, ldo = 40 + 5;
    std::vector<kern::bf16_t> x(static_cast<size_t>(m) * ldx);
    for (auto& v : x) v = kern::f32_to_bf16(dist(rng));
    std::vector<float> bias(40), residual(static_cast<size_t>(m) * ldo);
    for (float& v : bias) v = dist(rng);
    for (float& v : residual) v = dist(rng);
    std::vector<float> ws(packed_linear_workspace_floats(segmented, m, pool.size()) + 16);
    kern::LinearArgs a;
    a.x = x.data();
    a.ldx = ldx;
    a.m = m;
    a.ldo = ldo;
    a.bias = bias.data();
    a.residual = residual.data();
    a.ldr = ldo;
    a.workspace = ws.data();
    a.isa = isa;
    std::vector<float> got(static_cast<size_t>(m) * ldo, -7.0f), want(got.size(), -7.0f);
    a.out_f32 = got.data();
    packed_linear(a, segmented, isa, pool.size(), run_on_all);
    int n0 = 0;
    for (const PackedMatrix& s : segmented.segments) {
      kern::LinearArgs b = a;
      b.out_f32 = want.data() + n0;
      b.bias = bias.data() + n0;
      b.residual = residual.data() + n0;
      std::vector<float> ws_s(packed_linear_workspace_floats(s, m, pool.size()) + 16);
      REQUIRE(ws_s.size() <= ws.size());
      b.workspace = ws_s.data();
      packed_linear(b, s, isa, pool.size(), run_on_all);
      n0 += s.n;
    }
    INFO("m = " << m);
    REQUIRE(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0);
    REQUIRE(got[40] == -7.0f);  // columns past n untouched
  }
}
