// Q4_K / Q5_K / Q6_K decode (M rows, one thread, AVX2) over N x 2048 weights, repeated: with N small the
// weights stay in L2 and the tile's compute rate shows; with N large they come from memory.
// g++ -O2 -std=c++20 -I. -o kquant_decode_hot THIS build/libslab_kernels.a; ./kquant_decode_hot N BITS M
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "kernels/linear_quant.h"
using namespace slab::kern;
int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 256, k = 2048, bits = argc > 2 ? atoi(argv[2]) : 4;
  const int m = argc > 3 ? atoi(argv[3]) : 1;
  const QuantFormat f = bits == 4 ? kquant4_format() : bits == 5 ? kquant5_format() : kquant6_format();
  std::mt19937 rng(1);
  std::vector<uint8_t> codes(size_t(n) * k);
  for (auto& c : codes) c = rng() % (1 << bits);
  std::vector<uint16_t> d(size_t(n) * k / 256, 0x3c00), dmin(d.size(), 0x3000);
  std::vector<int8_t> sc(size_t(n) * k / f.group);
  for (auto& s : sc) s = rng() % 63;
  std::vector<uint8_t> mins(size_t(n) * k / 32);
  for (auto& s : mins) s = rng() % 63;
  std::vector<uint8_t> packed(packed_quant_bytes(f, n, k));
  pack_kquant_linear(packed.data(), f, {codes.data(), size_t(k), d.data(), bits != 6 ? dmin.data() : nullptr, sc.data(), bits != 6 ? mins.data() : nullptr}, n, k);
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
    std::printf("Q%d_K n=%d m=%d: %.1f KB weights, %.1f GB/s, %.2f ns per 64-byte step\n", bits, n, m, packed.size() / 1024.0, reps * packed.size() / s / 1e9, s / reps / (packed.size() / 64.0) * 1e9);
  }
}
