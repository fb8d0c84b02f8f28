// One L1-resident KV block of 32 tokens, head_dim 64, P rounded to BF16, run 200,000 times:
// mode 0 the AMX block on NopTiles (its AVX-512 work alone), 1 the AVX-512 block, 2 the AMX block
// on NopTiles with a causal diagonal (vector i sees 1 + (i / 8) * 4 tokens). Prints the median of
// 5 rounds. See README.md for the build line.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "kernels/attention_block.h"
using namespace slab::kern::detail;
using slab::kern::bf16_t;
namespace slab::kern::detail {
void attn_block_amx_nop(const AttnBlock& b, const AmxScratch& w, AmxTiles& tiles);
}
int main(int argc, char** argv) {
  const int m = argc > 1 ? atoi(argv[1]) : 64, nt = 32, hd = 64;
  const int mode = argc > 2 ? atoi(argv[2]) : 0;  // 0 amx-nop full block, 1 avx512 full block, 2 amx diag
  std::vector<float> qhl(m * 64), kt(nt * hd), s(m * nt), o(m * hd), mx(m), l(m);
  std::vector<uint16_t> k(nt * hd), v(nt * hd), p(2 * m * 32), vt(32 * hd);
  srand(1);
  for (auto& x : k) x = 0x3f80 + (rand() % 64) - 32;
  for (auto& x : v) x = 0x3f80 + (rand() % 64) - 32;
  for (auto& x : qhl) {
    uint32_t u = (0x3c00 + rand() % 256) | ((0x3c00u + rand() % 256) << 16);
    memcpy(&x, &u, 4);
  }
  std::vector<int> lo(m, 0), hi(m, nt);
  if (mode == 2)
    for (int i = 0; i < m; ++i) hi[i] = 1 + (i / 8) * 4;
  int pfn = 0;
  AttnBlock b;
  b.kraw = reinterpret_cast<const bf16_t*>(k.data());
  b.k_tiled = true;
  b.kt = kt.data();
  b.vraw = reinterpret_cast<const bf16_t*>(v.data());
  b.qhl = qhl.data();
  b.pf_k = reinterpret_cast<const char*>(k.data());
  b.pf_v = reinterpret_cast<const char*>(v.data());
  b.pf_lines = 0;
  b.pf_next = &pfn;
  b.s = s.data();
  b.lds = nt;
  b.o = o.data();
  b.mx = mx.data();
  b.l = l.data();
  b.lo = lo.data();
  b.hi = hi.data();
  b.m = m;
  b.nt = nt;
  b.hd = hd;
  b.round_p_to_bf16 = true;
  AmxScratch w;
  w.p = reinterpret_cast<bf16_t*>(p.data());
  w.p_lo = w.p + m * 32;
  w.ldp = 32;
  w.vt = reinterpret_cast<bf16_t*>(vt.data());
  AmxTiles tiles;
  const int reps = 200000;
  std::vector<double> t;
  for (int r = 0; r < 5; ++r) {
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) {
      // scores as the tiles would leave them: re-init (nop tiles do not write s)
      for (int j = 0; j < m; ++j) {
        mx[j] = 0.5f;
        l[j] = 1;
      }
      if (mode == 1)
        attn_block_avx512(b);
      else
        attn_block_amx_nop(b, w, tiles);
    }
    t.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count() / reps);
  }
  std::sort(t.begin(), t.end());
  printf("mode %d m %d: %.0f ns/block (%.1f ns/vector)\n", mode, m, t[2], t[2] / m);
}
