#include <immintrin.h>
#include <chrono>
#include <cstdio>
// Throughput of vpmaddubsw / vpmaddwd / vpaddw ymm with 8 independent chains.
template <int KIND>
__attribute__((target("avx2"), noinline)) __m256i loop(long n, __m256i a, __m256i b) {
  __m256i c0 = a, c1 = b, c2 = a, c3 = b, c4 = a, c5 = b, c6 = a, c7 = b;
  for (long i = 0; i < n; ++i) {
#define OP(c) c = KIND == 0 ? _mm256_maddubs_epi16(c, b) : KIND == 1 ? _mm256_madd_epi16(c, b) : KIND == 2 ? _mm256_add_epi16(c, b) : _mm256_add_epi32(_mm256_maddubs_epi16(c, b), c);
    OP(c0) OP(c1) OP(c2) OP(c3) OP(c4) OP(c5) OP(c6) OP(c7)
    __asm__ volatile("" : "+x"(c0), "+x"(c1), "+x"(c2), "+x"(c3), "+x"(c4), "+x"(c5), "+x"(c6), "+x"(c7));
  }
  return _mm256_or_si256(_mm256_or_si256(_mm256_or_si256(c0, c1), _mm256_or_si256(c2, c3)), _mm256_or_si256(_mm256_or_si256(c4, c5), _mm256_or_si256(c6, c7)));
}
__attribute__((target("avx2"))) int main() {
  const long n = 100000000;
  __m256i a = _mm256_set1_epi8(3), b = _mm256_set1_epi8(1);
  const char* names[] = {"maddubs", "madd", "add16", "maddubs+add32"};
  for (int rep = 0; rep < 2; ++rep) {
    double ns[4];
    auto t0 = std::chrono::steady_clock::now(); volatile __m256i r0 = loop<0>(n, a, b); auto t1 = std::chrono::steady_clock::now();
    volatile __m256i r1 = loop<1>(n, a, b); auto t2 = std::chrono::steady_clock::now();
    volatile __m256i r2 = loop<2>(n, a, b); auto t3 = std::chrono::steady_clock::now();
    volatile __m256i r3 = loop<3>(n, a, b); auto t4 = std::chrono::steady_clock::now();
    (void)r0; (void)r1; (void)r2; (void)r3;
    ns[0] = std::chrono::duration<double, std::nano>(t1 - t0).count();
    ns[1] = std::chrono::duration<double, std::nano>(t2 - t1).count();
    ns[2] = std::chrono::duration<double, std::nano>(t3 - t2).count();
    ns[3] = std::chrono::duration<double, std::nano>(t4 - t3).count();
    // add16 sets the scale: assume 3 per cycle? print ns per op instead
    for (int k = 0; k < 4; ++k) std::printf("%-14s %.3f ns per instruction (8 chains)\n", names[k], ns[k] / (8.0 * n));
  }
}
