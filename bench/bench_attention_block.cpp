// One KV block of SLAB attention at a time, on one pinned core, its K, V, scores and sums in L1:
// the AVX-512 block (on vdpbf16ps and on FP32 products), the AMX block's AVX-512 work alone (softmax, P rows, rescale, V relayout:
// every tile call a no-op, kern::detail::NoTiles) and, where the CPU has AMX-BF16 and the kernel
// grants the tiles, the whole AMX block. The AMX block less its AVX-512 work is what the tiles
// cost. TinyLlama heads (head_dim 64, 8 query heads a KV head), blocks of 32 tokens, P rounded
// to BF16 as the model runner runs it, K in the cache's tiled order. Three blocks:
//   prefill  64 vectors (8 rows x 8 heads), every one seeing all 32 tokens (off the diagonal)
//   diagonal 64 vectors on the causal diagonal: row r sees 4r + 4 tokens
//   decode   8 vectors (one row), all 32 tokens
// Steady state: each block is run over and over on the same data, so after the first call its
// maxima do not move (no rescale), as in a prefill past its first blocks. GFLOP/s counts
// 4 · head_dim per visible (vector, token) pair (Q·K and P·V), against the vdpbf16ps peak of
// one thread (the AVX-512 block on FP32 products against the 512-bit FMA peak, the AMX block
// against the tdpbf16ps peak).
//
// Usage: bench_attention_block [--reps N]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "kernels/amx_tiles.h"
#include "kernels/attention_block.h"
#include "machine_limits.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;
using namespace slab::kern;

namespace {

constexpr int kHeadDim = 64, kTokens = 32, kGroup = 8;

enum class Kernel { avx512, avx512_fp32, amx_avx512_work, amx };

// A block and everything it reads and writes, filled with plausible values.
struct BlockData {
  int m = 0;
  std::vector<float> q, qhl, kt, s, o, mx, l;
  std::vector<bf16_t> k, v, p, vt;
  std::vector<int> lo, hi;
  int pf_next = 0;
  detail::AttnBlock b;
  detail::AmxScratch w;

  BlockData(int vectors, bool diagonal) : m(vectors) {
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int m16 = (m + 15) / 16 * 16;
    q.resize(static_cast<size_t>(m16) * kHeadDim);
    for (size_t i = 0; i < static_cast<size_t>(m) * kHeadDim; ++i) q[i] = 0.125f * u(rng);
    qhl.assign(static_cast<size_t>(m16) * detail::q_hilo_floats(kHeadDim), 0.0f);
    detail::stage_q_hilo_avx512(qhl.data(), q.data(), m, kHeadDim);
    k.resize(static_cast<size_t>(kTokens) * kHeadDim);
    v.resize(k.size());
    for (bf16_t& x : k) x = f32_to_bf16(u(rng));
    for (bf16_t& x : v) x = f32_to_bf16(u(rng));
    kt.resize(k.size());
    s.resize(static_cast<size_t>(m16) * kTokens);
    for (float& x : s) x = 4.0f * u(rng);  // what the no-op tiles leave: scores from an earlier call
    o.assign(static_cast<size_t>(m16) * kHeadDim, 0.0f);
    mx.assign(static_cast<size_t>(m16), -std::numeric_limits<float>::infinity());
    l.assign(static_cast<size_t>(m16), 0.0f);
    lo.assign(static_cast<size_t>(m), 0);
    hi.assign(static_cast<size_t>(m), kTokens);
    if (diagonal) {
      for (int i = 0; i < m; ++i) hi[static_cast<size_t>(i)] = 4 * (i / kGroup) + 4;
    }
    const int ldp = detail::amx_attention_ldp(kTokens);
    p.assign(2 * static_cast<size_t>(m16) * ldp, 0);
    b.q = q.data();
    b.kraw = k.data();
    b.k_tiled = true;
    b.kt = kt.data();
    b.vraw = v.data();
    b.qhl = qhl.data();
    b.pf_next = &pf_next;  // no later block to prefetch: pf_lines stays 0
    b.s = s.data();
    b.lds = kTokens;
    b.o = o.data();
    b.mx = mx.data();
    b.l = l.data();
    b.lo = lo.data();
    b.hi = hi.data();
    b.m = m;
    b.nt = kTokens;
    b.hd = kHeadDim;
    b.round_p_to_bf16 = true;
    w.p = p.data();
    w.p_lo = p.data() + static_cast<size_t>(m16) * ldp;
    w.ldp = ldp;
    vt.assign(detail::amx_attention_vt_elems(kTokens, kHeadDim), 0);
    w.vt = vt.data();
  }
  double flops() const {
    double pairs = 0;
    for (int i = 0; i < m; ++i) pairs += hi[static_cast<size_t>(i)] - lo[static_cast<size_t>(i)];
    return 4.0 * kHeadDim * pairs;
  }
};

// Median ns per block over `reps` rounds of ~20 ms each.
double time_block(BlockData& d, Kernel kernel, int reps) {
  detail::AmxTiles tiles;
  auto run = [&] {
    d.pf_next = 0;
    switch (kernel) {
      case Kernel::avx512: detail::attn_block_avx512(d.b); break;
      case Kernel::avx512_fp32:
        d.b.fp32_products = true;
        detail::attn_block_avx512(d.b);
        break;
      case Kernel::amx_avx512_work: detail::attn_block_amx_avx512_work(d.b, d.w); break;
      case Kernel::amx: detail::attn_block_amx(d.b, d.w, tiles); break;
    }
  };
  run();  // the maxima settle; tiles configured
  const double t0 = bench::now_seconds();
  int calls = 0;
  while (bench::now_seconds() - t0 < 0.005) {
    run();
    ++calls;
  }
  const int per_round = std::max(1, static_cast<int>(calls * 0.02 / std::max(bench::now_seconds() - t0, 1e-9)));
  std::vector<double> ns;
  for (int r = 0; r < reps; ++r) {
    const double s0 = bench::now_seconds();
    for (int i = 0; i < per_round; ++i) run();
    ns.push_back((bench::now_seconds() - s0) / per_round * 1e9);
  }
  if (kernel == Kernel::amx) detail::amx_release(tiles);
  return bench::summarize(ns).median;
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--reps" && i + 1 < argc) {
      reps = std::max(1, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: %s [--reps N]\n", argv[0]);
      return 2;
    }
  }
  const CpuFeatures& cpu = cpu_features();
  if (!cpu.has_avx512_bf16_kernels()) {
    std::fprintf(stderr, "bench_attention_block: the blocks it times need AVX-512 BF16: %s\n", cpu.summary().c_str());
    return 2;
  }
  const bool amx = amx_bf16_usable();
  ThreadPool pool({.n_threads = 1});  // pins this thread to one core
  std::printf("cpu:      %s\n", cpu.summary().c_str());
  std::printf("topology: %s\n", Topology::system().process_info().summary().c_str());
  std::printf("thread:   1 (pinned: %s); AMX-BF16 tiles: %s\n", pool.bindings()[0].empty() ? "no" : "yes",
              amx ? "yes" : "no (the whole AMX block is not timed)");
  const bench::Stat peak = bench::measure_bf16_peak(pool, 5);
  const bench::Stat fma_peak = bench::measure_fma512_peak(pool, 5);
  const bench::Stat amx_peak = amx ? bench::measure_amx_bf16_peak(pool, 5) : bench::Stat{};
  std::printf("vdpbf16ps peak (1 thread): %.0f GFLOP/s; 512-bit FMA peak: %.0f GFLOP/s", peak.median, fma_peak.median);
  if (amx) std::printf("; tdpbf16ps peak: %.0f GFLOP/s", amx_peak.median);
  std::printf("\n\n%-9s %7s %7s  %-28s %9s %8s %6s\n", "block", "vectors", "pairs", "kernel", "ns/block", "GFLOP/s",
              "%peak");
  struct Shape {
    const char* name;
    int vectors;
    bool diagonal;
  };
  for (const Shape sh : {Shape{"prefill", 64, false}, Shape{"diagonal", 64, true}, Shape{"decode", 8, false}}) {
    double amx_work = 0;
    for (const Kernel k : {Kernel::avx512, Kernel::avx512_fp32, Kernel::amx_avx512_work, Kernel::amx}) {
      if (k == Kernel::amx && !amx) continue;
      pool.run_on_all([&](int, int) {
        BlockData d(sh.vectors, sh.diagonal);
        const double ns = time_block(d, k, reps);
        const double gflops = d.flops() / ns;
        const char* name = k == Kernel::avx512            ? "avx512"
                           : k == Kernel::avx512_fp32     ? "avx512, FP32 products"
                           : k == Kernel::amx_avx512_work ? "amx: its avx512 work alone"
                                                          : "amx: whole block";
        const double lim = k == Kernel::amx           ? amx_peak.median
                           : k == Kernel::avx512_fp32 ? fma_peak.median
                                                      : peak.median;
        std::printf("%-9s %7d %7.0f  %-28s %9.0f", sh.name, sh.vectors, d.flops() / (4.0 * kHeadDim), name, ns);
        if (k == Kernel::amx_avx512_work) {
          amx_work = ns;  // not a computation of the block: no rate
        } else {
          std::printf(" %8.1f %5.0f%%", gflops, 100.0 * gflops / lim);
        }
        if (k == Kernel::amx) std::printf("  (tiles and the rest: %.0f ns)", ns - amx_work);
        std::printf("\n");
      });
    }
  }
  return 0;
}
