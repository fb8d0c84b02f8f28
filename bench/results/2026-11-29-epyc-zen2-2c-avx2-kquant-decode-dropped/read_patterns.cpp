// Read patterns over a panel-layout buffer (tiles of 4 panels of `panel` bytes), one core.
#include <immintrin.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include <algorithm>
static size_t skew = 0;
__attribute__((target("avx2"))) float run(const char* buf, size_t bytes, size_t panel0, int mode) {
  const size_t panel = panel0 + skew;
  __m256 a[8];
  for (auto& v : a) v = _mm256_setzero_ps();
  const size_t tile = 4 * panel;
  const size_t pl = panel0;
  for (size_t t0 = 0; t0 + tile <= bytes; t0 += tile) {
    const char* p = buf + t0;
    if (mode == 0) {  // 4 streams, 64 B each per step
      for (size_t o = 0; o < pl; o += 64)
        for (int s = 0; s < 4; ++s) {
          a[2*s] = _mm256_add_ps(a[2*s], _mm256_load_ps((const float*)(p + s * panel + o)));
          a[2*s+1] = _mm256_add_ps(a[2*s+1], _mm256_load_ps((const float*)(p + s * panel + o + 32)));
        }
    } else if (mode == 1 || mode == 3) {  // 2 streams x 128 B, chunks of C bytes, pairs alternate
      const size_t C = mode == 1 ? 1024 : 4096;
      for (size_t o0 = 0; o0 < pl; o0 += C)
        for (int s0 = 0; s0 < 4; s0 += 2)
          for (size_t o = o0; o < std::min(pl, o0 + C); o += 128)
            for (int s = s0; s < s0 + 2; ++s)
              for (int j = 0; j < 4; ++j) a[(s&1)*4+j] = _mm256_add_ps(a[(s&1)*4+j], _mm256_load_ps((const float*)(p + s * panel + o + 32*j)));
    } else if (mode == 2) {  // 4 streams x 128 B per step
      for (size_t o = 0; o < pl; o += 128)
        for (int s = 0; s < 4; ++s)
          for (int j = 0; j < 4; ++j) a[(s&1)*4+j] = _mm256_add_ps(a[(s&1)*4+j], _mm256_load_ps((const float*)(p + s * panel + o + 32*j)));
    } else if (mode == 4) {  // 1 stream linear
      for (size_t o = 0; o < tile; o += 128)
          for (int j = 0; j < 4; ++j) a[j] = _mm256_add_ps(a[j], _mm256_load_ps((const float*)(p + o + 32*j)));
    }
  }
  __m256 s = a[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_ps(s, a[i]);
  float f[8]; _mm256_storeu_ps(f, s); return f[0];
}
int main(int argc, char** argv) {
  const size_t panel = (argc > 1 ? atoi(argv[1]) : 2048) * 64;  // K * 64 bytes
  const size_t bytes = size_t(256) << 20;
  skew = argc > 2 ? atoi(argv[2]) : 0;
  char* buf = (char*)aligned_alloc(4096, bytes);
  memset(buf, 1, bytes);
  const char* names[] = {"4x64", "2x128 1K", "4x128", "2x128 4K", "1 stream"};
  for (int round = 0; round < 3; ++round)
    for (int mode = 0; mode < 5; ++mode) {
      auto t0 = std::chrono::steady_clock::now();
      float r = run(buf, bytes, panel, mode);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::printf("%-10s %.1f GB/s %s", names[mode], bytes / s / 1e9, mode == 4 ? "\n" : "| ");
      if (r == 12345) puts("");
    }
}
