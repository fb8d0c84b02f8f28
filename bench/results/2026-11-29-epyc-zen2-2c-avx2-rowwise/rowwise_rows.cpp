#include "kernels/rowwise_bf16.h"
#include <chrono>
#include <cstdio>
#include <vector>
#include <random>
using namespace slab::kern;
int main() {
  const int n = 5632, rows = 512;
  std::vector<float> g(n * rows), u(n * rows), x(2048 * rows), w(2048, 1.0f);
  std::mt19937 rng(1); std::normal_distribution<float> d(0, 2);
  for (auto& v : g) v = d(rng); for (auto& v : u) v = d(rng); for (auto& v : x) v = d(rng);
  std::vector<bf16_t> out(n * rows);
  for (int rep = 0; rep < 3; ++rep) {
    auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < rows; ++r) silu_mul_to_bf16(out.data() + r * n, g.data() + r * n, u.data() + r * n, n, Isa::avx2);
    auto t1 = std::chrono::steady_clock::now();
    for (int r = 0; r < rows; ++r) rmsnorm_to_bf16(out.data() + r * 2048, x.data() + r * 2048, w.data(), 2048, 1e-5f, Isa::avx2);
    auto t2 = std::chrono::steady_clock::now();
    printf("silu_mul 512x5632: %.2f ms (x22 layers %.0f ms); rmsnorm 512x2048: %.2f ms (x44: %.0f ms)\n",
      std::chrono::duration<double, std::milli>(t1 - t0).count(), 22 * std::chrono::duration<double, std::milli>(t1 - t0).count(),
      std::chrono::duration<double, std::milli>(t2 - t1).count(), 44 * std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
}
