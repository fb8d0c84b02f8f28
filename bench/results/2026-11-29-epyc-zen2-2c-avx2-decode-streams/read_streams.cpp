// Read bandwidth of one core (or two) from S concurrent sequential streams: what the probe in
// bench/machine_limits.cpp now does with 4 streams, and why.
//   g++ -O2 -o read_streams read_streams.cpp -lpthread && ./read_streams THREADS MB SKEW_BYTES
// Each thread sums its share of an MB-sized buffer as S parts read at once, one 64-byte line of
// each part per step, the parts SKEW_BYTES further apart than their length (a multiple of 16 KB).
#include <immintrin.h>
#include <pthread.h>
#include <sys/mman.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <int S>
__attribute__((target("avx2"))) float sum_streams(const float* p, size_t n, size_t skew) {
  __m256 a[S][2];
  for (int s = 0; s < S; ++s) a[s][0] = a[s][1] = _mm256_setzero_ps();
  // A multiple of 16 KB: with a skew the parts then start `skew` apart modulo 16 KB.
  const size_t len = (n / S - skew) / 4096 * 4096;
  for (size_t i = 0; i < len; i += 16) {
    for (int s = 0; s < S; ++s) {
      const float* q = p + s * (len + skew) + i;
      a[s][0] = _mm256_add_ps(a[s][0], _mm256_load_ps(q));
      a[s][1] = _mm256_add_ps(a[s][1], _mm256_load_ps(q + 8));
    }
  }
  __m256 t = _mm256_setzero_ps();
  for (int s = 0; s < S; ++s) t = _mm256_add_ps(t, _mm256_add_ps(a[s][0], a[s][1]));
  float o[8];
  _mm256_storeu_ps(o, t);
  return o[0] + o[7];
}

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 1;
  const size_t bytes = (argc > 2 ? strtoull(argv[2], nullptr, 10) : 256) << 20;
  const size_t skew = (argc > 3 ? strtoull(argv[3], nullptr, 10) : 0) / sizeof(float);
  const size_t per = bytes / threads;
  char* buf = static_cast<char*>(aligned_alloc(2 << 20, bytes));
  madvise(buf, bytes, MADV_HUGEPAGE);
  memset(buf, 1, bytes);
  for (int S : {1, 2, 4, 8}) {
    double best = 0;
    for (int rep = 0; rep < 5; ++rep) {
      std::vector<std::thread> ts;
      std::vector<float> sink(threads * 16);
      const double t0 = now();
      for (int t = 0; t < threads; ++t) {
        ts.emplace_back([&, t] {
          cpu_set_t c;
          CPU_ZERO(&c);
          CPU_SET(t, &c);
          pthread_setaffinity_np(pthread_self(), sizeof c, &c);
          const float* p = reinterpret_cast<const float*>(buf + per * t);
          const size_t n = per / sizeof(float);
          sink[t * 16] = S == 1 ? sum_streams<1>(p, n, skew)
                         : S == 2 ? sum_streams<2>(p, n, skew)
                         : S == 4 ? sum_streams<4>(p, n, skew)
                                  : sum_streams<8>(p, n, skew);
        });
      }
      for (auto& t : ts) t.join();
      const double gbs = static_cast<double>(bytes) / (now() - t0) / 1e9;
      if (gbs > best) best = gbs;
    }
    std::printf("threads %d, %zu MB, skew %zu B, streams %d: %.1f GB/s (best of 5)\n", threads, bytes >> 20,
                skew * sizeof(float), S, best);
  }
}
