// W8 / W4 decode (M rows, one thread, AVX2) over N x 2048 weights, repeated: N BITS M [GROUP: 32, 128 or 0 per-channel; 32 when absent].
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "kernels/linear_quant.h"
using namespace slab::kern;
int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 256, k = 2048, bits = argc > 2 ? atoi(argv[2]) : 8;
  const int m = argc > 3 ? atoi(argv[3]) : 1;
  const int group = argc > 4 ? atoi(argv[4]) : 32;
  const QuantFormat f{bits, group, false, false};
  std::mt19937 rng(1);
  std::vector<uint8_t> codes(size_t(n) * k);
  for (auto& c : codes) c = rng() % (1 << bits);
  std::vector<float> scales(size_t(n) * (group ? k / group : 1), 0.01f);
  std::vector<uint8_t> packed(packed_quant_bytes(f, n, k));
  pack_quant_linear_codes(packed.data(), f, codes.data(), size_t(k), scales.data(), nullptr, n, k);
  std::vector<bf16_t> x(size_t(m) * k);
  for (auto& v : x) v = f32_to_bf16(float(rng() % 200) / 100.0f - 1.0f);
  QuantLinearArgs a;
  a.x = x.data(); a.ldx = k; a.w = {packed.data(), f, n, k}; a.m = m;
  std::vector<float> out(size_t(m) * n); a.out_f32 = out.data(); a.ldo = n;
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(m, a.w, 1) / 8 + 8); a.workspace = ws.data();
  a.isa = Isa::avx2;
  const int reps = int(2e9 / packed.size()) + 1;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) { if (quant_linear_needs_prepare(m)) quant_linear_prepare(a, 0, 1); quant_linear_compute(a, 0, 1); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("W%d g32 n=%d m=%d: %.1f KB weights, %.1f GB/s\n", bits, n, m, packed.size() / 1024.0, reps * packed.size() / s / 1e9);
  }
}
