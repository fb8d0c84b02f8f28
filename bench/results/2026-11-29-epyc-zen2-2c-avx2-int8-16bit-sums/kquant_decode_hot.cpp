// Quantized decode (M rows, one thread, AVX2) over N x 2048 weights, repeated: with N small the
// weights stay in L2 and the tile's compute rate shows; with N large they come from memory.
//   ./kquant_decode_hot N BITS M          Q4_K / Q5_K / Q6_K (BITS 4, 5, 6)
//   ./kquant_decode_hot N BITS M GROUP    W4 / W8 (BITS 4, 8), GROUP 32, 128 or 0 (per channel)
// g++ -O2 -std=c++20 -I. -Iinclude -o kquant_decode_hot THIS build/libslab_kernels.a build/libslab_runtime.a -lpthread
// (The W form was w4_decode_hot.cpp in ../2026-11-29-epyc-zen2-2c-avx2-w4-side-by-side until merged here.)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>
#include "kernels/linear_quant.h"
using namespace slab::kern;

// Random codes of `bits` packed as K-quant super-blocks (d = 1, dmin = 0.25, sub-scales and mins
// below 63).
std::vector<uint8_t> pack_kquant(const QuantFormat& f, int n, int k, std::mt19937& rng) {
  std::vector<uint8_t> codes(size_t(n) * k);
  for (auto& c : codes) c = rng() % (1 << f.bits);
  std::vector<uint16_t> d(size_t(n) * k / 256, 0x3c00), dmin(d.size(), 0x3000);
  std::vector<int8_t> sc(size_t(n) * k / f.group);
  for (auto& s : sc) s = rng() % 63;
  std::vector<uint8_t> mins(size_t(n) * k / 32);
  for (auto& s : mins) s = rng() % 63;
  std::vector<uint8_t> packed(packed_quant_bytes(f, n, k));
  const bool has_mins = f.bits != 6;
  pack_kquant_linear(packed.data(), f,
                     {codes.data(), size_t(k), d.data(), has_mins ? dmin.data() : nullptr, sc.data(),
                      has_mins ? mins.data() : nullptr},
                     n, k);
  return packed;
}

// Random W4/W8 codes with scale 0.01 per group.
std::vector<uint8_t> pack_w(const QuantFormat& f, int n, int k, std::mt19937& rng) {
  std::vector<uint8_t> codes(size_t(n) * k);
  for (auto& c : codes) c = rng() % (1 << f.bits);
  std::vector<float> scales(size_t(n) * (f.group ? k / f.group : 1), 0.01f);
  std::vector<uint8_t> packed(packed_quant_bytes(f, n, k));
  pack_quant_linear_codes(packed.data(), f, codes.data(), size_t(k), scales.data(), nullptr, n, k);
  return packed;
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? atoi(argv[1]) : 256, k = 2048, bits = argc > 2 ? atoi(argv[2]) : 4;
  const int m = argc > 3 ? atoi(argv[3]) : 1;
  const bool w_format = argc > 4;
  const int group = w_format ? atoi(argv[4]) : 0;
  const QuantFormat f = w_format    ? QuantFormat{bits, group, false, false}
                        : bits == 4 ? kquant4_format()
                        : bits == 5 ? kquant5_format()
                                    : kquant6_format();
  std::mt19937 rng(1);
  const std::vector<uint8_t> packed = w_format ? pack_w(f, n, k, rng) : pack_kquant(f, n, k, rng);
  std::vector<bf16_t> x(size_t(m) * k);
  for (auto& v : x) v = f32_to_bf16(float(rng() % 200) / 100.0f - 1.0f);
  QuantLinearArgs a;
  a.x = x.data(); a.ldx = k; a.w = {packed.data(), f, n, k}; a.m = m;
  std::vector<float> out(size_t(m) * n); a.out_f32 = out.data(); a.ldo = n;
  std::vector<uint64_t> ws(quant_linear_workspace_bytes(m, a.w, 1) / 8 + 8); a.workspace = ws.data();
  a.isa = Isa::avx2;
  char name[32];
  if (w_format) std::snprintf(name, sizeof(name), "W%d g%d", bits, group);
  else std::snprintf(name, sizeof(name), "Q%d_K", bits);
  const int reps = int(2e9 / packed.size()) + 1;
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) { if (quant_linear_needs_prepare(m)) quant_linear_prepare(a, 0, 1); quant_linear_compute(a, 0, 1); }
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s n=%d m=%d: %.1f KB weights, %.1f GB/s, %.2f ns per 64-byte step\n", name, n, m, packed.size() / 1024.0, reps * packed.size() / s / 1e9, s / reps / (packed.size() / 64.0) * 1e9);
  }
}
