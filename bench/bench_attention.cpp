// SLAB attention on TinyLlama-1.1B heads (32 query heads, 4 KV heads, head_dim 64, 22 layers,
// block 32): decode steps at contexts 128 / 1k / 4k and batch 1 / 16 against the read bandwidth,
// and causal prefill against the BF16 peak (the FP32 FMA peak for --isa avx2), both limits
// measured in the same run.
//
// Decode: one step = the attention of all 22 layers (22 calls, each at its layer's offset in
// the blocks), so a step reads the KV of every layer of every sequence exactly once, as the
// forward pass does. Sequences' blocks are shuffled through a pool of at least --cycle-x times
// the L3, and successive steps cycle through distinct sets of sequences in it, so the KV comes
// from DRAM. GB/s counts the K and V bytes a step must read; %bw divides by a bandwidth sample
// taken just before each repetition (median of per-repetition ratios).
// Prefill: one sequence of N new tokens (no prefix), causal FLOPs = 4 · n_heads · head_dim ·
// N(N+1)/2 (Q·K and P·V); %peak is over the vdpbf16ps peak. The AVX-512 block spends two
// vdpbf16ps per Q·K product (Q as BF16 hi + lo) and one per P·V product (P rounded to BF16, as
// the model runner runs it; --split-p: two, the exact path), so 2/3 of the peak is its ceiling
// (1/2 with --split-p). The AVX2 blocks run FP32 FMAs on widened K/V: %peak is over the 8-lane
// FMA peak there.
//
// With --isa avx2 these heads (8 query heads a KV head) run the vectors-in-lanes AVX2 block
// (kernels/attention.h); --no-lanes runs the one-vector block instead. With --amx (CPUs with
// AMX-BF16 and the kernel's tile permission) prefill runs on the AMX tiles, and its %peak is over
// the tdpbf16ps peak measured in the same run; decode rows stay on AVX-512. K is in the tiled
// order the runner keeps for the AVX-512 and AMX blocks (kernels/kv_block.h); --k-rows keeps it in
// rows, transposed per block at every read, as before.
//
// --fp32-products runs the AVX-512 block on FP32 FMAs instead (K, V widened in registers; what
// the runner does where LinearBlocking::fp32_products is set, the Intel cores whose vdpbf16ps
// runs at a quarter of the FMA's rate): %peak is then over the 512-bit FMA peak.
//
// Usage: bench_attention [--quick] [--threads N] [--reps N] [--cycle-x N] [--isa scalar|avx2|avx512_bf16] [--split-p]
//                        [--fp32-products] [--no-lanes] [--amx] [--k-rows] [--only decode|prefill]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kernels/attention.h"
#include "machine_limits.h"
#include "runtime/aligned_buffer.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;
using namespace slab::kern;

namespace {

constexpr int kLayers = 22, kHeads = 32, kKvHeads = 4, kHeadDim = 64, kBlock = 32;

struct Config {
  bool quick = false;
  int threads = 0;
  int reps = 9;
  int cycle_x = 16;
  std::string isa;
  bool round_p_to_bf16 = true;   // as the model runner runs it; --split-p: P as BF16 hi + lo
  bool fp32_products = false;    // --fp32-products: the AVX-512 block on FP32 FMAs
  bool vectors_in_lanes = true;  // --no-lanes: the AVX2 one-vector block for these heads
  bool amx = false;              // --amx: prefill on the AMX-BF16 tiles
  bool k_rows = false;           // --k-rows: K in rows, transposed per block, instead of the runner's tiled K
  std::string only;              // "", "decode" or "prefill"
};

// The engine's block layout (KvGeometry): [layer][kv_head][K then V][token][head_dim].
size_t kv_stride() { return static_cast<size_t>(kBlock) * kHeadDim; }  // K -> V
size_t head_stride() { return 2 * kv_stride(); }
size_t layer_stride() { return head_stride() * kKvHeads; }
size_t block_stride() { return layer_stride() * kLayers; }

struct Result {
  double us = 0, gbs = 0, bw = 0, ratio = 0, gflops = 0;
  double cpu_us = 0, cpu_ratio = 0;  // from the busiest thread's CPU time inside the kernel
  bench::Stat spread;
  size_t items = 0, merges = 0;
};

AttentionArgs base_args(const bf16_t* pool, float* q, float* out, float* ws, Isa isa, const Config& cfg) {
  AttentionArgs a;
  a.q = q;
  a.ldq = static_cast<size_t>(kHeads) * kHeadDim;
  a.out = out;
  a.ldo = a.ldq;
  a.kv = {pool, kBlock, block_stride(), 0, kv_stride(), head_stride()};
  a.scale = 0.125f;
  a.workspace = ws;
  a.isa = isa;
  a.round_p_to_bf16 = cfg.round_p_to_bf16;
  a.fp32_products = cfg.fp32_products;
  a.vectors_in_lanes = cfg.vectors_in_lanes;
  a.amx = cfg.amx;
  // The runner keeps K tiled wherever the AVX-512 block runs (kernels/kv_block.h); the pool here is
  // filled with one value, so its rows and its tiled order hold the same bytes.
  a.kv.k_tiled = !cfg.k_rows && attention_k_tiled({kHeads, kKvHeads, kHeadDim, kBlock, 0}, isa);
  return a;
}

Result bench_decode(ThreadPool& pool, bench::ReadBandwidthProbe& probe, int batch, int context, size_t sweep_bytes,
                    Isa isa, const Config& cfg) {
  const int blocks_per_seq = (context + kBlock - 1) / kBlock;
  const size_t set_bytes = static_cast<size_t>(batch) * blocks_per_seq * block_stride() * 2;
  const int sets = static_cast<int>(std::max<size_t>(1, (sweep_bytes + set_bytes - 1) / set_bytes));
  const size_t n_blocks = static_cast<size_t>(sets) * batch * blocks_per_seq;
  AlignedBuffer kv(n_blocks * block_stride() * sizeof(bf16_t));
  bf16_t* kvp = kv.as<bf16_t>();
  pool.run_on_all([&](int t, int nt) {  // first touch on the threads; small finite values
    const auto [lo, hi] = ThreadPool::chunk(static_cast<int>(n_blocks), nt, t);
    std::fill(kvp + static_cast<size_t>(lo) * block_stride(), kvp + static_cast<size_t>(hi) * block_stride(),
              bf16_t{0x3c00});
  });
  std::vector<int32_t> ids(n_blocks);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), std::mt19937(42));

  std::vector<std::vector<AttnSeq>> seqs(static_cast<size_t>(sets));
  for (int s = 0; s < sets; ++s) {
    for (int b = 0; b < batch; ++b) {
      const size_t first = (static_cast<size_t>(s) * batch + b) * blocks_per_seq;
      seqs[static_cast<size_t>(s)].push_back({b, 1, context, ids.data() + first});
    }
  }
  const AttnShape shape{kHeads, kKvHeads, kHeadDim, kBlock, 0};
  const AttentionPlan plan = plan_attention(shape, seqs[0].data(), batch, pool.size());
  AlignedBuffer ws(std::max<size_t>(16, plan.workspace_floats) * sizeof(float));
  std::vector<float> q(static_cast<size_t>(batch) * kHeads * kHeadDim, 0.01f);
  std::vector<float> out(q.size());
  AttentionArgs a = base_args(kvp, q.data(), out.data(), ws.as<float>(), isa, cfg);
  a.n_seqs = batch;
  std::vector<double> cpu(static_cast<size_t>(pool.size()) * 8, 0.0);
  auto run_on_all = [&pool, &cpu](auto&& f) {
    pool.run_on_all([&](int t, int nt) {
      const double c0 = bench::thread_cpu_seconds();
      f(t, nt);
      cpu[static_cast<size_t>(t) * 8] += bench::thread_cpu_seconds() - c0;
    });
  };
  auto step = [&](int set) {
    a.seqs = seqs[static_cast<size_t>(set)].data();
    for (int l = 0; l < kLayers; ++l) {
      a.kv.k_offset = static_cast<size_t>(l) * layer_stride();
      a.kv.v_offset = a.kv.k_offset + kv_stride();
      attention(a, plan, run_on_all);
    }
  };
  const double t0 = bench::now_seconds();
  step(0);
  const double probe_s = bench::now_seconds() - t0;
  int steps = sets;
  while (steps * probe_s < 0.03 && steps < 100000) steps += sets;
  const double bytes = static_cast<double>(batch) * context * kLayers * kKvHeads * kHeadDim * 2 * 2;
  std::vector<double> us, bws, ratios, cpu_us, cpu_ratios;
  const int reps = cfg.quick ? 3 : cfg.reps;
  for (int r = 0; r < reps + 1; ++r) {
    const bench::Rate bw = probe.once();
    std::fill(cpu.begin(), cpu.end(), 0.0);
    const double s0 = bench::now_seconds();
    for (int i = 0; i < steps; ++i) step(i % sets);
    const double dt = (bench::now_seconds() - s0) / steps;
    if (r == 0) continue;
    us.push_back(dt * 1e6);
    bws.push_back(bw.wall);
    ratios.push_back(bytes / dt / 1e9 / bw.wall);
    const double cpu_step = *std::max_element(cpu.begin(), cpu.end()) / steps;
    cpu_us.push_back(cpu_step * 1e6);
    cpu_ratios.push_back(bytes / cpu_step / 1e9 / bw.cpu);
  }
  Result res;
  res.spread = bench::summarize(us);
  res.us = res.spread.median;
  res.gbs = bytes / (res.us * 1e-6) / 1e9;
  res.bw = bench::summarize(bws).median;
  res.ratio = bench::summarize(ratios).median;
  res.cpu_us = bench::summarize(cpu_us).median;
  res.cpu_ratio = bench::summarize(cpu_ratios).median;
  res.items = plan.items.size();
  res.merges = plan.merges.size();
  return res;
}

Result bench_prefill(ThreadPool& pool, int n, Isa isa, const Config& cfg) {
  const int blocks = (n + kBlock - 1) / kBlock;
  AlignedBuffer kv(static_cast<size_t>(blocks) * block_stride() * sizeof(bf16_t));
  std::fill(kv.as<bf16_t>(), kv.as<bf16_t>() + static_cast<size_t>(blocks) * block_stride(), bf16_t{0x3c00});
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  std::iota(table.begin(), table.end(), 0);
  const AttnSeq seq{0, n, n, table.data()};
  const AttnShape shape{kHeads, kKvHeads, kHeadDim, kBlock, 0};
  const AttentionPlan plan = plan_attention(shape, &seq, 1, pool.size());
  AlignedBuffer ws(std::max<size_t>(16, plan.workspace_floats) * sizeof(float));
  std::vector<float> q(static_cast<size_t>(n) * kHeads * kHeadDim, 0.01f);
  std::vector<float> out(q.size());
  AttentionArgs a = base_args(kv.as<bf16_t>(), q.data(), out.data(), ws.as<float>(), isa, cfg);
  a.seqs = &seq;
  a.n_seqs = 1;
  std::vector<double> cpu(static_cast<size_t>(pool.size()) * 8, 0.0);
  auto run_on_all = [&pool, &cpu](auto&& f) {
    pool.run_on_all([&](int t, int nt) {
      const double c0 = bench::thread_cpu_seconds();
      f(t, nt);
      cpu[static_cast<size_t>(t) * 8] += bench::thread_cpu_seconds() - c0;
    });
  };
  const double t0 = bench::now_seconds();
  attention(a, plan, run_on_all);
  const double probe_s = bench::now_seconds() - t0;
  const int calls = std::max(1, static_cast<int>(0.05 / std::max(probe_s, 1e-6)));
  std::vector<double> us, cpu_us;
  for (int r = 0; r < (cfg.quick ? 3 : cfg.reps) + 1; ++r) {
    std::fill(cpu.begin(), cpu.end(), 0.0);
    const double s0 = bench::now_seconds();
    for (int i = 0; i < calls; ++i) attention(a, plan, run_on_all);
    if (r == 0) continue;
    us.push_back((bench::now_seconds() - s0) / calls * 1e6);
    cpu_us.push_back(*std::max_element(cpu.begin(), cpu.end()) / calls * 1e6);
  }
  Result res;
  res.spread = bench::summarize(us);
  res.us = res.spread.median;
  const double flops = 4.0 * kHeads * kHeadDim * (static_cast<double>(n) * (n + 1) / 2);
  res.gflops = flops / (res.us * 1e-6) / 1e9;
  res.cpu_us = bench::summarize(cpu_us).median;
  res.cpu_ratio = flops / (res.cpu_us * 1e-6) / 1e9;  // GFLOP/s from CPU time
  res.items = plan.items.size();
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      cfg.quick = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      cfg.threads = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      cfg.reps = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--cycle-x" && i + 1 < argc) {
      cfg.cycle_x = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--split-p") {
      cfg.round_p_to_bf16 = false;
    } else if (arg == "--fp32-products") {
      cfg.fp32_products = true;
    } else if (arg == "--no-lanes") {
      cfg.vectors_in_lanes = false;
    } else if (arg == "--amx") {
      cfg.amx = true;
    } else if (arg == "--k-rows") {
      cfg.k_rows = true;
    } else if (arg == "--only" && i + 1 < argc) {
      cfg.only = argv[++i];
    } else if (arg == "--isa" && i + 1 < argc) {
      cfg.isa = argv[++i];
    } else {
      std::fprintf(
          stderr,
          "usage: %s [--quick] [--threads N] [--reps N] [--cycle-x N] [--isa scalar|avx2|avx512_bf16] [--split-p] "
          "[--fp32-products] [--no-lanes] [--amx] [--k-rows] [--only decode|prefill]\n",
          argv[0]);
      return 2;
    }
  }
  if (!cfg.only.empty() && cfg.only != "decode" && cfg.only != "prefill") {
    std::fprintf(stderr, "bench_attention: --only takes decode or prefill, not '%s'\n", cfg.only.c_str());
    return 2;
  }
  const CpuFeatures& cpu = cpu_features();
  const TopologyInfo topo = Topology::system().process_info();
  ThreadPool pool({.n_threads = cfg.threads});
  // The best kernel set the CPU runs, or the one asked for (an AVX2-only CPU used to fall back
  // to scalar here).
  Isa isa = cpu.has_avx512_bf16_kernels() ? Isa::avx512_bf16 : cpu.has_avx2_kernels() ? Isa::avx2 : Isa::scalar;
  if (!cfg.isa.empty()) {
    const bool ok = cfg.isa == "scalar" || (cfg.isa == "avx2" && cpu.has_avx2_kernels()) ||
                    (cfg.isa == "avx512_bf16" && cpu.has_avx512_bf16_kernels());
    if (!ok) {
      std::fprintf(stderr, "bench_attention: --isa %s: not one of scalar, avx2, avx512_bf16 that this CPU runs\n",
                   cfg.isa.c_str());
      return 2;
    }
    isa = cfg.isa == "scalar" ? Isa::scalar : cfg.isa == "avx2" ? Isa::avx2 : Isa::avx512_bf16;
  }
  if (cfg.amx && (isa != Isa::avx512_bf16 || !amx_bf16_usable())) {
    std::fprintf(stderr,
                 "bench_attention: --amx: this CPU (or its kernel) offers no AMX-BF16 tiles with the AVX-512 "
                 "BF16 kernels: %s\n",
                 cpu.summary().c_str());
    return 2;
  }
  const size_t l3 = topo.l3_bytes ? topo.l3_bytes : (size_t{32} << 20);
  const size_t sweep = static_cast<size_t>(cfg.cycle_x) * l3;

  std::printf("cpu:      %s\n", cpu.summary().c_str());
  std::printf("topology: %s\n", topo.summary().c_str());
  std::printf("threads:  %d (pinned: %s), kernel isa: %s%s%s, P for P·V: %s\n", pool.size(),
              pool.bindings()[0].empty() ? "no" : "yes", isa_name(isa), cfg.fp32_products ? " (FP32 products)" : "",
              cfg.amx ? " + amx_bf16 tiles for prefill" : "", cfg.round_p_to_bf16 ? "rounded to BF16" : "BF16 hi + lo");
  if (isa == Isa::avx2) {
    std::printf("avx2 block: %s\n", cfg.vectors_in_lanes ? "vectors in lanes" : "one vector at a time");
  }
  const bool k_tiled = !cfg.k_rows && attention_k_tiled({kHeads, kKvHeads, kHeadDim, kBlock, 0}, isa);
  std::printf("K in the cache: %s\n", k_tiled ? "tiled (read as it is)" : "rows (transposed per block)");
  bench::ReadBandwidthProbe probe(pool, sweep);
  const bench::Stat bw = probe.measure(cfg.quick ? 5 : 15);
  bench::Stat peak_cpu;
  // The limit of the instructions the kernel runs: vdpbf16ps for the AVX-512 blocks (the 512-bit
  // FMA with --fp32-products), 8-lane FP32 FMA for the AVX2 and scalar ones.
  const bool bf16_kernel = isa == Isa::avx512_bf16 && !cfg.fp32_products;
  const bool fma512_kernel = isa == Isa::avx512_bf16 && cfg.fp32_products;
  const int peak_reps = cfg.quick ? 3 : 7;
  const bench::Stat peak = bf16_kernel     ? bench::measure_bf16_peak(pool, peak_reps, &peak_cpu)
                           : fma512_kernel ? bench::measure_fma512_peak(pool, peak_reps, &peak_cpu)
                                           : bench::measure_fma_peak(pool, peak_reps, &peak_cpu);
  std::printf("read bandwidth (%zu MB, %d threads): %.1f GB/s  [min %.1f, max %.1f]\n", sweep >> 20, pool.size(),
              bw.median, bw.min, bw.max);
  std::printf("%s peak (%s, %d threads):    %.0f GFLOP/s  [min %.0f, max %.0f]; from CPU time %.0f\n\n",
              bf16_kernel ? "bf16" : "fp32",
              bf16_kernel     ? "vdpbf16ps"
              : fma512_kernel ? "16-lane FMA"
                              : "8-lane FMA",
              pool.size(), peak.median, peak.min, peak.max, peak_cpu.median);
  bench::Stat amx_peak_cpu;
  const bench::Stat amx_peak =
      cfg.amx ? bench::measure_amx_bf16_peak(pool, cfg.quick ? 3 : 7, &amx_peak_cpu) : bench::Stat{};
  if (cfg.amx) {
    std::printf(
        "amx peak (tdpbf16ps, %d threads):  %.0f GFLOP/s  [min %.0f, max %.0f]; from CPU time %.0f "
        "(prefill %%peak below is over this)\n\n",
        pool.size(), amx_peak.median, amx_peak.min, amx_peak.max, amx_peak_cpu.median);
  }
  std::printf(
      "Wall-time medians; 'cpu' columns: the same from the busiest thread's CPU time inside\n"
      "the kernel (and the probe / peak loop), robust to other processes taking the cores.\n\n");

  std::printf("decode: TinyLlama heads 32/4 x 64, %d layers per step, KV swept over >= %zu MB\n", kLayers, sweep >> 20);
  std::printf("%5s %7s %8s %6s %7s %10s %10s %7s %6s %6s %6s  %s\n", "batch", "context", "KV MB", "items", "merges",
              "us/step", "cpu us", "GB/s", "bw", "%bw", "cpu%", "us min..max");
  for (int batch : {1, 16}) {
    if (cfg.only == "prefill") break;
    for (int context : {128, 1024, 4096}) {
      const Result r = bench_decode(pool, probe, batch, context, sweep, isa, cfg);
      const double mb = static_cast<double>(batch) * context * kLayers * kKvHeads * kHeadDim * 4 / 1e6;
      std::printf("%5d %7d %8.1f %6zu %7zu %10.1f %10.1f %7.1f %6.1f %5.0f%% %5.0f%%  %.0f..%.0f\n", batch, context, mb,
                  r.items, r.merges, r.us, r.cpu_us, r.gbs, r.bw, 100.0 * r.ratio, 100.0 * r.cpu_ratio, r.spread.min,
                  r.spread.max);
      std::fflush(stdout);
    }
  }
  std::printf("\nprefill: one sequence, causal, 32/4 heads x 64, one layer\n");
  std::printf("%6s %6s %10s %10s %8s %6s %6s  %s\n", "tokens", "items", "us/call", "cpu us", "GFLOP/s", "%peak", "cpu%",
              "us min..max");
  for (int n : {512, 2048}) {
    if (cfg.quick && n > 512) continue;
    if (cfg.only == "decode") break;
    const Result r = bench_prefill(pool, n, isa, cfg);
    const double lim = cfg.amx ? amx_peak.median : peak.median;
    const double lim_cpu = cfg.amx ? amx_peak_cpu.median : peak_cpu.median;
    std::printf("%6d %6zu %10.1f %10.1f %8.1f %5.0f%% %5.0f%%  %.0f..%.0f\n", n, r.items, r.us, r.cpu_us, r.gflops,
                lim > 0 ? 100.0 * r.gflops / lim : 0.0, lim_cpu > 0 ? 100.0 * r.cpu_ratio / lim_cpu : 0.0, r.spread.min,
                r.spread.max);
    std::fflush(stdout);
  }
  const bench::Stat bw_end = probe.measure(cfg.quick ? 5 : 15);
  std::printf("\nat the end: read bandwidth %.1f GB/s [%.1f..%.1f]\n", bw_end.median, bw_end.min, bw_end.max);
  return 0;
}
