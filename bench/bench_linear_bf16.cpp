// BF16 linear kernel on real layer shapes (TinyLlama-1.1B, Qwen2.5-0.5B) at M = 1..512, against
// the machine's read bandwidth (M <= 64) and BF16 peak (M >= 16) measured in the same run; the
// MLP's gate+up both plain (FP32 sums out) and fused with SiLU·up (op "swiglu", BF16 out), and
// RMSNorm rows to BF16. The output heads (TinyLlama's 32k vocabulary, Qwen2.5's 152k over a
// hidden size of 896) run up to M = 64, a batched decode step's logit rows.
//
// Rows of M <= 64 cycle through distinct packed weight copies totalling >= 16x the L3, so each
// call reads its weights from DRAM as in a real decode step. Figures are medians over
// repetitions; the machine is shared, so rerun when the spread (min..max) is wide.
//
// Usage: bench_linear_bf16 [--quick] [--threads N] [--reps N] [--model tinyllama|qwen|all]
//                          [--cycle-x N] [--m 1,4,16,64,128,512] [--isa scalar|avx2|amx]
//                          [--op NAME] [--blocking k=512,tile=6x64,prefetch=on,amx=0] [--sweep]
//                          [--limits-only]
// --blocking runs every row with that cache blocking (default: this CPU's entry of
// model/linear_tuning.h); --sweep runs each M > 16 row once per candidate blocking (the K block,
// the register tile, prefetch; with --isa amx the AMX K block, the rows from which AMX splits as
// prefill (amxprefill) and its panel prefetch (amxpf)) and marks the fastest, which is
// how the per-microarchitecture entries are chosen. --limits-only prints the machine's limits
// (read bandwidth, the vdpbf16ps / tdpbf16ps / FMA peaks, an empty region) and stops: how the
// peaks scale from 2 threads to all of them bounds any compute-bound ratio between the two.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/rowwise_bf16.h"
#include "machine_limits.h"
#include "model/linear_tuning.h"
#include "runtime/aligned_buffer.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;
using namespace slab::kern;

namespace {

struct Shape {
  const char* model;
  const char* op;
  int n, k;
  bool swiglu = false;  // gate+up packed as one SwiGLU matrix: n = 2 x intermediate, BF16 out
};

const Shape kShapes[] = {
    // TinyLlama-1.1B: hidden 2048, intermediate 5632, 32 heads / 4 KV heads of 64.
    {"tinyllama", "qkv", 2048 + 2 * 4 * 64, 2048},
    {"tinyllama", "o", 2048, 2048},
    {"tinyllama", "gate_up", 2 * 5632, 2048},
    {"tinyllama", "swiglu", 2 * 5632, 2048, true},
    {"tinyllama", "down", 2048, 5632},
    {"tinyllama", "lm_head", 32000, 2048},
    // Qwen2.5-0.5B: hidden 896, intermediate 4864, 14 heads / 2 KV heads of 64.
    {"qwen2.5", "qkv", 896 + 2 * 2 * 64, 896},
    {"qwen2.5", "o", 896, 896},
    {"qwen2.5", "gate_up", 2 * 4864, 896},
    {"qwen2.5", "swiglu", 2 * 4864, 896, true},
    {"qwen2.5", "down", 896, 4864},
    {"qwen2.5", "lm_head", 151936, 896},
};

struct Config {
  bool quick = false;
  int threads = 0;
  int reps = 11;
  std::string model = "all";
  std::string op;  // "": every op of the model
  int cycle_x = 16;
  std::vector<int> ms = {1, 4, 16, 64, 128, 512};
  std::string isa;  // "" = best the CPU has; or scalar / avx2 / amx
  LinearBlocking blocking;
  bool sweep = false;
  bool limits_only = false;  // --limits-only: the bandwidth, peaks and dispatch cost, no kernels
};

// The candidates of --sweep: around the defaults, one knob at a time.
std::vector<LinearBlocking> sweep_candidates(const LinearBlocking& base, bool amx) {
  std::vector<LinearBlocking> out;
  LinearBlocking flipped_split = base;
  flipped_split.dynamic_split = !base.dynamic_split;
  if (amx) {
    for (int kb : {0, 128, 256, 512, 1024}) {
      LinearBlocking b = base;
      b.amx_k_block = kb;
      out.push_back(b);
    }
    for (int from : {9, 64, 128, 256, 1 << 30}) {
      if (from == base.amx_prefill_min_m) continue;
      LinearBlocking b = base;
      b.amx_prefill_min_m = from;
      out.push_back(b);
    }
    for (int pf : {0, 4096, 16384}) {
      if (pf == base.amx_prefetch_bytes) continue;
      LinearBlocking b = base;
      b.amx_prefetch_bytes = pf;
      out.push_back(b);
    }
    out.push_back(flipped_split);
    return out;
  }
  for (int pairs : {128, 256, 512, 1024}) {
    LinearBlocking b = base;
    b.k_block_pairs = pairs;
    out.push_back(b);
  }
  for (auto [rows, panels] : {std::pair{4, 2}, std::pair{5, 2}, std::pair{8, 1}}) {
    LinearBlocking b = base;
    b.tile_rows = rows;
    b.tile_panels = panels;
    out.push_back(b);
  }
  LinearBlocking b = base;
  b.prefetch = !base.prefetch;
  out.push_back(b);
  out.push_back(flipped_split);
  return out;
}

// Fills n bf16 values of magnitude in [2^-7, 1) with random signs and mantissas (xorshift:
// fast enough for the GBs of weight copies).
void fill_random(bf16_t* p, size_t n, uint64_t seed) {
  uint64_t r = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < n; ++i) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    const auto bits = static_cast<uint32_t>(r >> 32);
    const uint32_t exponent = 120 + (bits >> 8) % 7;  // 2^-7 .. 2^-1
    p[i] = static_cast<bf16_t>(((bits & 1u) << 15) | (exponent << 7) | ((bits >> 1) & 0x7fu));
  }
}

// Distinct packed copies of one weight matrix: enough that one cycle through them is at least
// cycle_x times the L3. Zen's L3 does not evict in LRU order, so a cyclic sweep only a few
// times its size still partly hits in it (~ L3 / sweep): 4x the L3 showed up to 160 % of the
// DRAM bandwidth here; 16x keeps that under ~6 %.
std::vector<AlignedBuffer> make_weight_copies(ThreadPool& pool, const Shape& s, int copies) {
  const size_t elems = packed_bf16_elems(s.n, s.k);
  std::vector<AlignedBuffer> weights;
  weights.reserve(static_cast<size_t>(copies));
  for (int c = 0; c < copies; ++c) {
    weights.emplace_back(elems * sizeof(bf16_t));
    // Fill on the pool so pages land where the threads run; content only needs to be finite.
    bf16_t* w = weights.back().as<bf16_t>();
    pool.run_on_all([&](int t, int nt) {
      const auto [lo, hi] = ThreadPool::chunk(static_cast<int>(elems / 64), nt, t);
      fill_random(w + static_cast<size_t>(lo) * 64, static_cast<size_t>(hi - lo) * 64,
                  static_cast<uint64_t>(c) * 131 + static_cast<uint64_t>(t));
    });
  }
  return weights;
}

struct Result {
  double us = 0, gbs = 0, gflops = 0;   // wall time: medians
  double bw = 0, bw_ratio = 0;          // memory-bound rows: adjacent bandwidth samples, ratio
  double cpu_us = 0, cpu_bw_ratio = 0;  // the same from the busiest thread's CPU time
  bench::Stat spread;                   // per-call microseconds (wall)
};

Result bench_shape(ThreadPool& pool, bench::ReadBandwidthProbe& probe, const Shape& s, int m, Isa isa,
                   const std::vector<AlignedBuffer>& weights, const Config& cfg) {
  const size_t bytes = packed_bf16_elems(s.n, s.k) * sizeof(bf16_t);
  // Batched-decode sizes (up to 64 rows) read their weights from DRAM, as a decode step does;
  // prefill sizes reuse one copy, which is what the K blocking is for.
  const bool memory_bound = m <= 64;
  const int copies = memory_bound ? static_cast<int>(weights.size()) : 1;
  AlignedBuffer x(static_cast<size_t>(m) * s.k * sizeof(bf16_t));
  fill_random(x.as<bf16_t>(), static_cast<size_t>(m) * s.k, 3);
  AlignedBuffer out(static_cast<size_t>(m) * s.n * sizeof(float));
  const size_t ws_floats = linear_bf16_workspace_floats(m, s.n, s.k, pool.size(), s.swiglu);
  AlignedBuffer ws(std::max<size_t>(ws_floats, 16) * sizeof(float));

  LinearArgs a;
  a.x = x.as<bf16_t>();
  a.ldx = static_cast<size_t>(s.k);
  a.m = m;
  if (s.swiglu) {
    a.out_bf16 = out.as<bf16_t>();
    a.ldo = static_cast<size_t>(s.n / 2);
    a.swiglu = true;
  } else {
    a.out_f32 = out.as<float>();
    a.ldo = static_cast<size_t>(s.n);
  }
  a.workspace = ws.as<float>();
  a.isa = isa;
  a.amx = cfg.isa == "amx";
  a.blocking = cfg.blocking;
  // CPU time each thread spends inside the kernel (not in the dispatch barrier).
  std::vector<double> cpu(static_cast<size_t>(pool.size()) * 8, 0.0);
  auto run_on_all = [&pool, &cpu](auto&& f) {
    pool.run_on_all([&](int t, int n) {
      const double c0 = bench::thread_cpu_seconds();
      f(t, n);
      cpu[static_cast<size_t>(t) * 8] += bench::thread_cpu_seconds() - c0;
    });
  };

  // Calls per timed sample: one full cycle through the copies, and at least ~20 ms of work.
  const double flops = 2.0 * m * s.n * static_cast<double>(s.k);
  a.w = {weights[0].as<bf16_t>(), s.n, s.k};
  const double t_probe0 = bench::now_seconds();
  linear_bf16(a, pool.size(), run_on_all);  // warm-up + probe
  const double probe_s = bench::now_seconds() - t_probe0;
  int calls = copies;
  while (calls * probe_s < 0.02 && calls < 100000) calls += copies;
  const int reps = cfg.quick ? 5 : cfg.reps;
  // Bytes a call must move: the packed weights, the activations, the output.
  const double moved = static_cast<double>(bytes) + m * s.k * 2.0 + m * (s.swiglu ? s.n : s.n * 4.0);
  std::vector<double> per_call_us, bws, ratios, cpu_us, cpu_ratios;
  for (int r = 0; r < reps + 1; ++r) {
    const bench::Rate bw = memory_bound ? probe.once() : bench::Rate{};  // adjacent sample
    std::fill(cpu.begin(), cpu.end(), 0.0);
    const double t0 = bench::now_seconds();
    for (int i = 0; i < calls; ++i) {
      a.w.data = weights[static_cast<size_t>(i % copies)].as<bf16_t>();
      linear_bf16(a, pool.size(), run_on_all);
    }
    const double dt = bench::now_seconds() - t0;
    if (r == 0) continue;
    per_call_us.push_back(dt / calls * 1e6);
    const double cpu_call = *std::max_element(cpu.begin(), cpu.end()) / calls;
    cpu_us.push_back(cpu_call * 1e6);
    if (memory_bound) {
      bws.push_back(bw.wall);
      ratios.push_back(moved / (dt / calls) / 1e9 / bw.wall);
      cpu_ratios.push_back(moved / cpu_call / 1e9 / bw.cpu);
    }
  }
  Result res;
  res.spread = bench::summarize(per_call_us);
  res.us = res.spread.median;
  res.cpu_us = bench::summarize(cpu_us).median;
  if (memory_bound) {
    res.bw = bench::summarize(bws).median;
    res.bw_ratio = bench::summarize(ratios).median;
    res.cpu_bw_ratio = bench::summarize(cpu_ratios).median;
  }
  res.gbs = moved / (res.us * 1e-6) / 1e9;
  res.gflops = flops / (res.us * 1e-6) / 1e9;
  return res;
}

// --sweep: the row again under each candidate blocking, GFLOP/s and the ratio to the row above.
void sweep_shape(ThreadPool& pool, bench::ReadBandwidthProbe& probe, const Shape& s, int m, Isa isa,
                 const std::vector<AlignedBuffer>& weights, const Config& cfg, double peak, double base_gflops) {
  double best = base_gflops;
  std::string best_name = describe_linear_blocking(cfg.blocking) + " (the row above)";
  for (const LinearBlocking& b : sweep_candidates(cfg.blocking, cfg.isa == "amx")) {
    Config c = cfg;
    c.blocking = b;
    const Result r = bench_shape(pool, probe, s, m, isa, weights, c);
    std::printf("    sweep %-40s %7.0f GFLOP/s %5.0f%% of peak  %.2fx\n", describe_linear_blocking(b).c_str(), r.gflops,
                peak > 0 ? 100.0 * r.gflops / peak : 0.0, r.gflops / base_gflops);
    if (r.gflops > best) {
      best = r.gflops;
      best_name = describe_linear_blocking(b);
    }
  }
  std::printf("    best: %s, %.0f GFLOP/s (%.2fx the row above)\n", best_name.c_str(), best, best / base_gflops);
  std::fflush(stdout);
}

// RMSNorm of M rows of `dim` FP32 values to BF16 (the input of every QKV and gate+up linear),
// rows cycling through a buffer of 16x the L3 so they come from DRAM as in prefill.
void bench_rmsnorm(ThreadPool& pool, bench::ReadBandwidthProbe& probe, Isa isa, int dim, size_t l3) {
  const size_t row_bytes = static_cast<size_t>(dim) * 4;
  const int total_rows = static_cast<int>(16 * l3 / row_bytes);
  AlignedBuffer x(static_cast<size_t>(total_rows) * row_bytes), w(row_bytes),
      out(static_cast<size_t>(total_rows) * dim * 2);
  pool.run_on_all([&](int t, int n) {  // first touch on the threads that read it
    const auto [lo, hi] = ThreadPool::chunk(total_rows * dim, n, t);
    for (int i = lo; i < hi; ++i) x.as<float>()[i] = 0.001f * static_cast<float>(i % 1000);
  });
  for (int i = 0; i < dim; ++i) w.as<float>()[i] = 1.0f;
  for (int m : {1, 16, 512}) {
    std::vector<double> us, ratios;
    int at = 0;
    for (int r = 0; r < 12; ++r) {
      const bench::Rate bw = probe.once();
      const int calls = std::max(1, 4096 / m);
      const double t0 = bench::now_seconds();
      for (int c = 0; c < calls; ++c) {
        if (at + m > total_rows) at = 0;
        const int first = at;
        pool.parallel_for(m, [&](int row, int) {
          const size_t i = static_cast<size_t>(first + row);
          rmsnorm_to_bf16(out.as<bf16_t>() + i * dim, x.as<float>() + i * dim, w.as<float>(), dim, 1e-5f, isa);
        });
        at += m;
      }
      const double per_call = (bench::now_seconds() - t0) / calls;
      if (r == 0) continue;
      us.push_back(per_call * 1e6);
      ratios.push_back(static_cast<double>(m) * dim * 6 / per_call / 1e9 / bw.wall);
    }
    const double med = bench::summarize(us).median;
    std::printf(
        "rmsnorm   dim %4d  M %3d: %8.2f us/call  %6.1f GB/s (read FP32 + write BF16)  %3.0f%% of read bandwidth\n",
        dim, m, med, static_cast<double>(m) * dim * 6 / (med * 1e-6) / 1e9, 100.0 * bench::summarize(ratios).median);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  bool blocking_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      cfg.quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      cfg.threads = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      cfg.reps = std::atoi(argv[++i]);
    } else if (arg == "--isa" && i + 1 < argc) {
      cfg.isa = argv[++i];
    } else if (arg == "--cycle-x" && i + 1 < argc) {
      cfg.cycle_x = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--m" && i + 1 < argc) {
      cfg.ms = bench::parse_int_list(argv[++i]);
    } else if (arg == "--model" && i + 1 < argc) {
      cfg.model = argv[++i];
    } else if (arg == "--blocking" && i + 1 < argc) {
      try {
        cfg.blocking = parse_linear_blocking(argv[++i]);
        blocking_given = true;
      } catch (const std::invalid_argument& e) {
        std::fprintf(stderr, "--blocking: %s\n", e.what());
        return 2;
      }
    } else if (arg == "--op" && i + 1 < argc) {
      cfg.op = argv[++i];
    } else if (arg == "--sweep") {
      cfg.sweep = true;
    } else if (arg == "--limits-only") {
      cfg.limits_only = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--threads N] [--reps N] [--model tinyllama|qwen|all]\n"
                   "       [--cycle-x N (weights cycled per memory-bound row, x L3; default 16)] [--m 1,4,16] [--isa "
                   "scalar|avx2|amx]\n"
                   "       [--op qkv|o|gate_up|swiglu|down|lm_head] [--blocking k=512,tile=6x64,prefetch=on,amx=0] "
                   "[--sweep] [--limits-only]\n",
                   argv[0]);
      return 2;
    }
  }
  const CpuFeatures& cpu = cpu_features();
  const TopologyInfo topo = Topology::system().process_info();
  // The tile permission before any pool thread exists (as ModelRunner asks before its pool):
  // asked after, the first AMX run crashed on the 16-core Xeon.
  const bool amx = amx_bf16_usable();
  ThreadPool pool({.n_threads = cfg.threads});
  Isa isa = cpu.has_avx512_bf16_kernels() ? Isa::avx512_bf16 : cpu.has_avx2_kernels() ? Isa::avx2 : Isa::scalar;
  if (cfg.isa == "scalar") isa = Isa::scalar;
  if (cfg.isa == "avx2" && cpu.has_avx2_kernels()) isa = Isa::avx2;
  if (cfg.isa == "amx" && (isa != Isa::avx512_bf16 || !amx)) {
    std::fprintf(stderr, "--isa amx: this CPU (or its kernel) offers no AMX-BF16 tiles: %s\n", cpu.summary().c_str());
    return 2;
  }
  const size_t l3 = topo.l3_bytes ? topo.l3_bytes : (size_t{32} << 20);
  const LinearTuning tuning = linear_tuning_for(cpu);
  if (!blocking_given) cfg.blocking = tuning.blocking;

  std::printf("cpu:      %s\n", cpu.summary().c_str());
  std::printf("topology: %s\n", topo.summary().c_str());
  std::printf("threads:  %d (pinned: %s), kernel isa: %s%s\n", pool.size(), pool.bindings()[0].empty() ? "no" : "yes",
              isa_name(isa), cfg.isa == "amx" ? " + amx_bf16 tiles for M >= 9" : "");
  std::printf("blocking: %s (%s)\n", describe_linear_blocking(cfg.blocking).c_str(),
              blocking_given ? "--blocking" : ("this CPU's entry: " + tuning.source).c_str());

  // The kernels' rows compare with a sweep of their own size; the limits alone are DRAM's.
  const size_t probe_bytes = cfg.limits_only ? bench::dram_probe_bytes() : static_cast<size_t>(cfg.cycle_x) * l3;
  bench::ReadBandwidthProbe probe(pool, probe_bytes);
  const bench::Stat bw = probe.measure(cfg.quick ? 5 : 15);
  // With AMX the compute-bound rows are measured against the tiles' peak; both peaks are shown.
  bench::Stat vdp_cpu, amx_cpu;
  const bench::Stat vdp_peak = bench::measure_bf16_peak(pool, cfg.quick ? 3 : 7, &vdp_cpu);
  const bench::Stat amx_peak = amx ? bench::measure_amx_bf16_peak(pool, cfg.quick ? 3 : 7, &amx_cpu) : bench::Stat{};
  // The FP32 products' limit: 256-bit FMAs on AVX2, 512-bit with LinearBlocking::fp32_products.
  const bool fma512 = isa == Isa::avx512_bf16 && cfg.blocking.fp32_products;
  bench::Stat fma_cpu;
  const bench::Stat fma_peak = isa == Isa::avx2 ? bench::measure_fma_peak(pool, cfg.quick ? 3 : 7, &fma_cpu)
                               : fma512         ? bench::measure_fma512_peak(pool, cfg.quick ? 3 : 7, &fma_cpu)
                                                : bench::Stat{};
  const bool fma_bound = isa == Isa::avx2 || fma512;
  const bench::Stat peak = cfg.isa == "amx" ? amx_peak : fma_bound ? fma_peak : vdp_peak;
  const bench::Stat peak_cpu = cfg.isa == "amx" ? amx_cpu : fma_bound ? fma_cpu : vdp_cpu;
  const char* peak_name = cfg.isa == "amx"   ? "tdpbf16ps"
                          : isa == Isa::avx2 ? "vfmadd231ps ymm"
                          : fma512           ? "vfmadd231ps zmm"
                                             : "vdpbf16ps";
  const bench::Stat disp = bench::measure_dispatch_us(pool, 9, 20000);
  std::printf("read bandwidth (%zu MB, %d threads): %.1f GB/s  [min %.1f, max %.1f]\n", probe_bytes >> 20, pool.size(),
              bw.median, bw.min, bw.max);
  std::printf("bf16 peak (vdpbf16ps, %d threads):    %.0f GFLOP/s  [min %.0f, max %.0f]; from CPU time %.0f\n",
              pool.size(), vdp_peak.median, vdp_peak.min, vdp_peak.max, vdp_cpu.median);
  if (amx) {
    std::printf("bf16 peak (tdpbf16ps, %d threads):    %.0f GFLOP/s  [min %.0f, max %.0f]; from CPU time %.0f\n",
                pool.size(), amx_peak.median, amx_peak.min, amx_peak.max, amx_cpu.median);
  }
  if (fma_bound) {
    std::printf("fp32 peak (vfmadd231ps %s, %d threads): %.0f GFLOP/s  [min %.0f, max %.0f]; from CPU time %.0f\n",
                fma512 ? "zmm" : "ymm", pool.size(), fma_peak.median, fma_peak.min, fma_peak.max, fma_cpu.median);
  }
  std::printf("%%peak below: against the %s peak\n", peak_name);
  std::printf("empty parallel_for:                  %.3f us  [min %.3f, max %.3f]\n\n", disp.median, disp.min,
              disp.max);
  if (cfg.limits_only) return 0;

  std::printf(
      "Wall-time medians. M <= 64: %%bw = kernel GB/s over the read bandwidth sampled just before\n"
      "each repetition (median of per-repetition ratios; 'bw' = median sample). M >= 16:\n"
      "%%peak = GFLOP/s over the peak above (16..64, batched decode, show both: the nearer limit\n"
      "is the one that binds). 'cpu' columns: the same from the busiest thread's CPU time\n"
      "(kernel and probe alike), robust to other processes taking the cores.\n\n");
  std::printf("%-12s %-7s %3s %5s %4s %6s %9s %9s %6s %5s %5s %5s %7s %6s %5s  %s\n", "model", "op", "M", "N", "K",
              "W MB", "us/call", "cpu us", "GB/s", "bw", "%bw", "cpu%", "GFLOP/s", "%peak", "cpu%", "wall us min..max");
  for (const Shape& s : kShapes) {
    if (cfg.model != "all" && std::string(s.model).rfind(cfg.model, 0) != 0) continue;
    if (!cfg.op.empty() && cfg.op != s.op) continue;
    const size_t bytes = packed_bf16_elems(s.n, s.k) * sizeof(bf16_t);  // = packed_swiglu_elems for whole panels
    const size_t sweep = static_cast<size_t>(cfg.cycle_x) * l3;
    const auto weights =
        make_weight_copies(pool, s, static_cast<int>(std::max<size_t>(2, (sweep + bytes - 1) / bytes)));
    for (int m : cfg.ms) {
      // Logits are computed for each sequence's last row: up to a batched decode step's rows
      // (64 sequences), never a prompt's 128 or 512.
      if (std::string(s.op) == "lm_head" && m > 64) continue;
      const Result r = bench_shape(pool, probe, s, m, isa, weights, cfg);
      const double wmb = static_cast<double>(packed_bf16_elems(s.n, s.k)) * 2 / 1e6;
      char bw_ratio[16] = "", bw_adj[16] = "", cpu_bw[16] = "", peak_ratio[16] = "", cpu_peak[16] = "";
      if (m <= 64) {
        std::snprintf(bw_ratio, sizeof bw_ratio, "%.0f%%", 100.0 * r.bw_ratio);
        std::snprintf(bw_adj, sizeof bw_adj, "%.1f", r.bw);
        std::snprintf(cpu_bw, sizeof cpu_bw, "%.0f%%", 100.0 * r.cpu_bw_ratio);
      }
      if (m >= 16 && peak.median > 0) {
        std::snprintf(peak_ratio, sizeof peak_ratio, "%.0f%%", 100.0 * r.gflops / peak.median);
        const double cpu_gflops = 2.0 * m * s.n * static_cast<double>(s.k) / (r.cpu_us * 1e3);
        std::snprintf(cpu_peak, sizeof cpu_peak, "%.0f%%", 100.0 * cpu_gflops / peak_cpu.median);
      }
      std::printf("%-12s %-7s %3d %5d %4d %6.1f %9.1f %9.1f %6.1f %5s %5s %5s %7.0f %6s %5s  %.0f..%.0f\n", s.model,
                  s.op, m, s.n, s.k, wmb, r.us, r.cpu_us, r.gbs, bw_adj, bw_ratio, cpu_bw, r.gflops, peak_ratio,
                  cpu_peak, r.spread.min, r.spread.max);
      std::fflush(stdout);
      if (cfg.sweep && m > 16) sweep_shape(pool, probe, s, m, isa, weights, cfg, peak.median, r.gflops);
    }
  }
  std::printf("\n");
  for (int dim : {2048, 896}) bench_rmsnorm(pool, probe, isa, dim, l3);
  const bench::Stat peak_end = cfg.isa == "amx"   ? bench::measure_amx_bf16_peak(pool, 3)
                               : isa == Isa::avx2 ? bench::measure_fma_peak(pool, 3)
                               : fma512           ? bench::measure_fma512_peak(pool, 3)
                                                  : bench::measure_bf16_peak(pool, 3);
  const bench::Stat bw_end = probe.measure(cfg.quick ? 5 : 15);
  std::printf("\nat the end: read bandwidth %.1f GB/s [%.1f..%.1f], %s peak %.0f GFLOP/s\n", bw_end.median, bw_end.min,
              bw_end.max, peak_name, peak_end.median);
  return 0;
}
