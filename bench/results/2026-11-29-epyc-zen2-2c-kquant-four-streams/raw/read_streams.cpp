#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>
#include <pthread.h>
static inline __m256i work(__m256i acc, const uint8_t* p) {
  __m256i v0 = _mm256_load_si256((const __m256i*)p), v1 = _mm256_load_si256((const __m256i*)(p + 32));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(v0, v1), _mm256_set1_epi16(1)));
}
// runs of R bytes; thread t takes runs t, t+T, ...; within a run, S streams each R/S long, or
// mode 0: pairs of consecutive panels (L bytes each) side by side.
__attribute__((noinline)) long run(const uint8_t* base, size_t nruns, size_t R, size_t L, int S, int t, int T, int pf) {
  __m256i acc = _mm256_setzero_si256();
  const size_t G = 256;
  for (size_t r = t; r < nruns; r += T) {
    const uint8_t* rb = base + r * R;
    if (S == 0) {
      for (size_t p = 0; p + 2 * L <= R; p += 2 * L)
        for (size_t off = 0; off < L; off += G)
          for (int s = 0; s < 2; ++s)
            for (size_t o = off; o < off + G; o += 64) {
              if (pf) _mm_prefetch((const char*)rb + p + s * L + o + 8192, _MM_HINT_T1);
              acc = work(acc, rb + p + s * L + o);
            }
    } else {
      size_t len = R / S;
      for (size_t off = 0; off < len; off += G)
        for (int s = 0; s < S; ++s)
          for (size_t o = off; o < off + G; o += 64) {
            if (pf) _mm_prefetch((const char*)rb + s * len + o + 8192, _MM_HINT_T1);
            acc = work(acc, rb + s * len + o);
          }
    }
  }
  return _mm256_extract_epi32(acc, 0);
}
int main(int argc, char** argv) {
  int threads = atoi(argv[1]);
  size_t L = atoi(argv[2]);
  int panels_per_run = atoi(argv[3]);
  size_t R = L * panels_per_run;
  size_t total = 512u << 20;
  uint8_t* buf = (uint8_t*)aligned_alloc(4096, total);
  memset(buf, 1, total);
  size_t nruns = total / R;
  int Ss[] = {0, 2, 4, 8};
  for (int rep = 0; rep < 2; ++rep)
    for (int S : Ss)
      for (int pf = 0; pf < 2; ++pf) {
        if (S && (size_t)panels_per_run % S) continue;
        std::vector<std::thread> th;
        auto t0 = std::chrono::steady_clock::now();
        for (int t = 0; t < threads; ++t)
          th.emplace_back([&, t] {
            cpu_set_t c; CPU_ZERO(&c); CPU_SET(t, &c); pthread_setaffinity_np(pthread_self(), sizeof c, &c);
            volatile long r = run(buf, nruns, R, L, S, t, threads, pf); (void)r; });
        for (auto& x : th) x.join();
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        printf("S%d pf%d %.1f  ", S, pf, nruns * R / s / 1e9);
      }
  printf("\n");
}
