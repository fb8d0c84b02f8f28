// Quantized linear kernels (INT8 / INT4 weights) on TinyLlama-1.1B shapes, with the BF16 kernel
// on the same shapes in the same run for the ratio.
//
// Every call reads its weights from DRAM, as a model's linears do: they cycle through distinct
// copies totalling 16x the L3 (batched rows read one cached copy until 2026-11-30, which hid
// the cost of their first pass over the weights: Q4_K at M = 16 ran 1.25x faster from cache on a
// Zen 2 core). Decode rows (M <= 8): GB/s of the packed quantized bytes (codes + scales; +
// activations and output) against the read bandwidth sampled just before each repetition.
// Batched rows (M > 8): GOP/s (2·M·N·K) against the vpdpbusd peak measured here (the BF16 kernel
// against the vdpbf16ps peak). Medians over repetitions; 'cpu' columns repeat the ratios from the busiest
// thread's CPU time, which stays meaningful while other processes share the cores. Where the CPU
// has AMX-INT8, each quantized row of M >= 16 is followed by a "+amx" row: the same call on the AMX
// tiles, against the tdpbsud peak measured here (--no-amx leaves them out), and where it has
// AMX-BF16 too, each of M >= quant_amx_bf16_min_m with 32-element activation blocks (groups of 32,
// K-quants; the formats that path takes) a "+amxbf16" row: the prefill path that
// dequantizes each panel pair to BF16 and multiplies on the BF16 tiles, against the tdpbf16ps
// peak. --one-copy has
// every row read one copy of the weights every call (from L2/L3 where they fit): the kernel's
// own rate without DRAM, for telling a tile bound by its instructions from one bound by memory
// (the bandwidth ratios then exceed 100 %).
//
// Usage: bench_linear_quant [--quick] [--threads N] [--reps N] [--m 1,4,8,64,256]
//                           [--isa scalar|avx2] [--cycle-x N] [--one-copy] [--ops o,up,down] [--no-amx]
//                           [--kinds bf16,w8,w8g128,w8g32,w8g32z,w4g32,w4g32z,w4g128,w4g128z,q4k,q5k,q6k]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "machine_limits.h"
#include "runtime/aligned_buffer.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;
using namespace slab::kern;

namespace {

struct Shape {
  const char* op;
  int n, k;
};
// TinyLlama-1.1B: hidden 2048, intermediate 5632.
const Shape kShapes[] = {{"o", 2048, 2048}, {"up", 5632, 2048}, {"down", 2048, 5632}};

struct Kind {
  const char* name;
  bool bf16;
  QuantFormat format;
};
const Kind kKinds[] = {
    {"bf16", true, {}},
    {"w8", false, {8, 0, false}},
    {"w8g128", false, {8, 128, false}},
    {"w8g32", false, {8, 32, false}},  // GGUF Q8_0 / Q5_0 / Q6_K repacked
    {"w8g32z", false, {8, 32, true}},  // GGUF Q5_1 / Q5_K repacked
    {"w4g32", false, {4, 32, false}},  // GGUF Q4_0 repacked
    {"w4g32z", false, {4, 32, true}},  // GGUF Q4_1 / Q4_K repacked
    {"w4g128", false, {4, 128, false}},
    {"w4g128z", false, {4, 128, true}},
    {"q4k", false, kquant4_format()},  // GGUF Q4_K kept in its super-blocks
    {"q5k", false, kquant5_format()},  // GGUF Q5_K kept in its super-blocks
    {"q6k", false, kquant6_format()},  // GGUF Q6_K kept in its super-blocks
};

struct Config {
  bool quick = false;
  bool no_amx = false;
  bool one_copy = false;
  int threads = 0;
  int reps = 11;
  int cycle_x = 16;
  std::vector<int> ms = {1, 4, 8, 64, 256};
  std::string isa;
  std::string ops, kinds;  // comma-separated filters ("" = all)
};

bool selected(const std::string& list, const char* name) {
  if (list.empty()) return true;
  const std::string want(name);
  for (size_t at = 0; at <= list.size();) {
    const size_t end = std::min(list.find(',', at), list.size());
    if (list.compare(at, end - at, want) == 0) return true;
    at = end + 1;
  }
  return false;
}

size_t weight_bytes(const Kind& kind, const Shape& s) {
  return kind.bf16 ? packed_bf16_elems(s.n, s.k) * sizeof(bf16_t) : packed_quant_bytes(kind.format, s.n, s.k);
}

// One packed matrix from random weights, copied `copies` times (on the pool: first touch).
std::vector<AlignedBuffer> make_weights(ThreadPool& pool, const Kind& kind, const Shape& s, int copies) {
  std::vector<float> w(static_cast<size_t>(s.n) * s.k);
  uint64_t r = 0x9E3779B97F4A7C15ull;
  for (float& v : w) {
    r ^= r << 13;
    r ^= r >> 7;
    r ^= r << 17;
    v = static_cast<float>(static_cast<int64_t>(r >> 40) - (int64_t{1} << 23)) * (0.05f / (1 << 23));
  }
  const size_t bytes = weight_bytes(kind, s);
  AlignedBuffer first(bytes);
  if (kind.bf16) {
    pack_linear_bf16(first.as<bf16_t>(), w.data(), s.n, s.k, static_cast<size_t>(s.k));
  } else if (kind.format.k_quant) {
    // Random fields: the kernels' speed does not depend on the values.
    const size_t elems = static_cast<size_t>(s.n) * s.k, sbs = elems / kKQuantSuperK;
    std::vector<uint8_t> codes(elems), mins(elems / 32);
    std::vector<uint16_t> d(sbs, 0x2000), dmin(sbs, 0x1c00);
    std::vector<int8_t> scales(elems / static_cast<size_t>(kind.format.group));
    const int top = (1 << kind.format.bits) - 1;
    for (size_t i = 0; i < elems; ++i) codes[i] = static_cast<uint8_t>((i * 2654435761u >> 7) % (top + 1));
    for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<int8_t>(i * 40503u % 64);
    for (size_t i = 0; i < mins.size(); ++i) mins[i] = static_cast<uint8_t>(i * 7919u % 64);
    const KQuantSource src{codes.data(), static_cast<size_t>(s.k), d.data(), dmin.data(), scales.data(), mins.data()};
    pack_kquant_linear(first.as<uint8_t>(), kind.format, src, s.n, s.k);
  } else {
    pack_quant_linear(first.as<uint8_t>(), kind.format, w.data(), s.n, s.k, static_cast<size_t>(s.k));
  }
  std::vector<AlignedBuffer> copies_out;
  for (int c = 0; c < copies; ++c) {
    copies_out.emplace_back(bytes);
    char* dst = copies_out.back().as<char>();
    pool.run_on_all([&](int t, int nt) {
      const auto [lo, hi] = ThreadPool::chunk(static_cast<int>(bytes / 64), nt, t);
      std::memcpy(dst + static_cast<size_t>(lo) * 64, first.as<char>() + static_cast<size_t>(lo) * 64,
                  static_cast<size_t>(hi - lo) * 64);
    });
  }
  return copies_out;
}

struct Result {
  double us = 0, cpu_us = 0, bw_ratio = 0, cpu_bw_ratio = 0;
};

Result bench_one(ThreadPool& pool, bench::ReadBandwidthProbe& probe, const Kind& kind, const Shape& s, int m, Isa isa,
                 bool amx, bool amx_bf16, const std::vector<AlignedBuffer>& weights, const Config& cfg) {
  const bool memory_bound = m <= kQuantDecodeMaxM;
  const int copies = !cfg.one_copy ? static_cast<int>(weights.size()) : 1;
  AlignedBuffer x(static_cast<size_t>(m) * s.k * sizeof(bf16_t));
  for (size_t i = 0; i < static_cast<size_t>(m) * s.k; ++i) {
    x.as<bf16_t>()[i] = f32_to_bf16(static_cast<float>(static_cast<int>(i * 2654435761u % 2001) - 1000) * 1e-3f);
  }
  AlignedBuffer out(static_cast<size_t>(m) * s.n * sizeof(float));
  std::vector<double> cpu(static_cast<size_t>(pool.size()) * 8, 0.0);
  auto run_on_all = [&pool, &cpu](auto&& f) {
    pool.run_on_all([&](int t, int n) {
      const double c0 = bench::thread_cpu_seconds();
      f(t, n);
      cpu[static_cast<size_t>(t) * 8] += bench::thread_cpu_seconds() - c0;
    });
  };
  LinearArgs ab;
  QuantLinearArgs aq;
  AlignedBuffer ws;
  if (kind.bf16) {
    ws = AlignedBuffer(std::max<size_t>(linear_bf16_workspace_floats(m, s.n, s.k, pool.size()), 16) * 4);
    ab.x = x.as<bf16_t>();
    ab.ldx = static_cast<size_t>(s.k);
    ab.m = m;
    ab.out_f32 = out.as<float>();
    ab.ldo = static_cast<size_t>(s.n);
    ab.workspace = ws.as<float>();
    ab.isa = isa == Isa::avx512_bf16 && !cpu_features().has_avx512_bf16_kernels() ? Isa::avx2 : isa;
  } else {
    aq.x = x.as<bf16_t>();
    aq.ldx = static_cast<size_t>(s.k);
    aq.w = {nullptr, kind.format, s.n, s.k};
    aq.m = m;
    aq.out_f32 = out.as<float>();
    aq.ldo = static_cast<size_t>(s.n);
    ws = AlignedBuffer(std::max<size_t>(quant_linear_workspace_bytes(m, aq.w, pool.size(), amx, amx_bf16), 64));
    aq.workspace = ws.as<void>();
    aq.isa = isa;
    aq.amx = amx;
    aq.amx_bf16 = amx_bf16;
  }
  auto call = [&](int copy) {
    if (kind.bf16) {
      ab.w = {weights[static_cast<size_t>(copy)].as<bf16_t>(), s.n, s.k};
      linear_bf16(ab, pool.size(), run_on_all);
    } else {
      aq.w.data = weights[static_cast<size_t>(copy)].as<uint8_t>();
      quant_linear(aq, run_on_all);
    }
  };
  const double t_probe0 = bench::now_seconds();
  call(0);
  const double probe_s = bench::now_seconds() - t_probe0;
  int calls = copies;
  while (calls * probe_s < 0.02 && calls < 100000) calls += copies;
  const double moved = static_cast<double>(weight_bytes(kind, s)) + m * s.k * 2.0 + m * s.n * 4.0;
  std::vector<double> us, cpu_us, ratios, cpu_ratios;
  const int reps = cfg.quick ? 5 : cfg.reps;
  for (int r = 0; r < reps + 1; ++r) {
    const bench::Rate bw = memory_bound ? probe.once() : bench::Rate{};
    std::fill(cpu.begin(), cpu.end(), 0.0);
    const double t0 = bench::now_seconds();
    for (int i = 0; i < calls; ++i) call(i % copies);
    const double dt = bench::now_seconds() - t0;
    if (r == 0) continue;
    const double cpu_call = *std::max_element(cpu.begin(), cpu.end()) / calls;
    us.push_back(dt / calls * 1e6);
    cpu_us.push_back(cpu_call * 1e6);
    if (memory_bound) {
      ratios.push_back(moved / (dt / calls) / 1e9 / bw.wall);
      cpu_ratios.push_back(moved / cpu_call / 1e9 / bw.cpu);
    }
  }
  Result res;
  res.us = bench::summarize(us).median;
  res.cpu_us = bench::summarize(cpu_us).median;
  if (memory_bound) {
    res.bw_ratio = bench::summarize(ratios).median;
    res.cpu_bw_ratio = bench::summarize(cpu_ratios).median;
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      cfg.quick = true;
    } else if (arg == "--no-amx") {
      cfg.no_amx = true;
    } else if (arg == "--one-copy") {
      cfg.one_copy = true;
    } else if (arg == "--threads" && i + 1 < argc) {
      cfg.threads = std::atoi(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      cfg.reps = std::atoi(argv[++i]);
    } else if (arg == "--isa" && i + 1 < argc) {
      cfg.isa = argv[++i];
    } else if (arg == "--cycle-x" && i + 1 < argc) {
      cfg.cycle_x = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--ops" && i + 1 < argc) {
      cfg.ops = argv[++i];
    } else if (arg == "--kinds" && i + 1 < argc) {
      cfg.kinds = argv[++i];
    } else if (arg == "--m" && i + 1 < argc) {
      cfg.ms = bench::parse_int_list(argv[++i]);
    } else {
      std::fprintf(stderr,
                   "usage: %s [--quick] [--threads N] [--reps N] [--m 1,4,8,64,256] [--isa scalar|avx2] [--cycle-x N]\n"
                   "       [--one-copy] [--no-amx] [--ops o,up,down] [--kinds "
                   "bf16,w8,w8g128,w8g32,w8g32z,w4g32,w4g32z,w4g128,w4g128z,q4k,q5k,q6k]\n",
                   argv[0]);
      return 2;
    }
  }
  const CpuFeatures& cpu = cpu_features();
  const TopologyInfo topo = Topology::system().process_info();
  ThreadPool pool({.n_threads = cfg.threads});
  Isa isa = cpu.has_avx512_quant_kernels() ? Isa::avx512_bf16 : cpu.has_avx2_kernels() ? Isa::avx2 : Isa::scalar;
  if (cfg.isa == "scalar") isa = Isa::scalar;
  if (cfg.isa == "avx2" && cpu.has_avx2_kernels()) isa = Isa::avx2;
  const size_t l3 = topo.l3_bytes ? topo.l3_bytes : (size_t{32} << 20);

  std::printf("cpu:      %s\n", cpu.summary().c_str());
  std::printf("topology: %s\n", topo.summary().c_str());
  std::printf("threads:  %d, kernel isa: %s\n", pool.size(), isa_name(isa));
  const size_t sweep = static_cast<size_t>(cfg.cycle_x) * l3;
  bench::ReadBandwidthProbe probe(pool, sweep);
  const bench::Stat bw = probe.measure(cfg.quick ? 5 : 15);
  bench::Stat int8_cpu, bf16_cpu;
  // The AVX2 kernels multiply with vpmaddubsw, the AVX-512 ones with vpdpbusd: each set's own limit.
  const bool maddubs = isa == Isa::avx2;
  const bench::Stat int8_peak = maddubs ? bench::measure_maddubs_peak(pool, cfg.quick ? 3 : 7, &int8_cpu)
                                        : bench::measure_int8_peak(pool, cfg.quick ? 3 : 7, &int8_cpu);
  const bench::Stat bf16_peak = bench::measure_bf16_peak(pool, cfg.quick ? 3 : 7, &bf16_cpu);
  std::printf("read bandwidth (%zu MB sweep): %.1f GB/s [%.1f..%.1f]\n", sweep >> 20, bw.median, bw.min, bw.max);
  std::printf("int8 peak (%s):  %.0f GOP/s [%.0f..%.0f]; from CPU time %.0f\n", maddubs ? "vpmaddubsw" : "vpdpbusd",
              int8_peak.median, int8_peak.min, int8_peak.max, int8_cpu.median);
  std::printf("bf16 peak (vdpbf16ps): %.0f GFLOP/s [%.0f..%.0f]; from CPU time %.0f\n", bf16_peak.median, bf16_peak.min,
              bf16_peak.max, bf16_cpu.median);
  const bool amx = !cfg.no_amx && isa == Isa::avx512_bf16 && amx_int8_usable();
  bench::Stat amx_cpu;
  const bench::Stat amx_peak = amx ? bench::measure_amx_int8_peak(pool, cfg.quick ? 3 : 7, &amx_cpu) : bench::Stat{};
  if (amx) {
    std::printf("amx int8 peak (tdpbsud): %.0f GOP/s [%.0f..%.0f]; from CPU time %.0f\n", amx_peak.median, amx_peak.min,
                amx_peak.max, amx_cpu.median);
  } else {
    std::printf("amx int8: not run (%s)\n", cfg.no_amx ? "--no-amx" : "no AMX-INT8 tiles on this CPU or kernel set");
  }
  const bool amx_bf16 = amx && amx_bf16_usable();
  bench::Stat amx_bf16_cpu;
  const bench::Stat amx_bf16_peak =
      amx_bf16 ? bench::measure_amx_bf16_peak(pool, cfg.quick ? 3 : 7, &amx_bf16_cpu) : bench::Stat{};
  if (amx_bf16) {
    std::printf("amx bf16 peak (tdpbf16ps): %.0f GFLOP/s [%.0f..%.0f]; from CPU time %.0f\n", amx_bf16_peak.median,
                amx_bf16_peak.min, amx_bf16_peak.max, amx_bf16_cpu.median);
  }
  std::printf("\n");
  std::printf(
      "M <= 8: %%bw = GB/s of packed weight bytes (+ x, out) over the adjacent bandwidth sample%s.\n"
      "M >= 64: %%peak = GOP/s over the int8 peak (bf16 rows: over the bf16 peak; +amx rows: the tdpbsud peak;\n"
      "+amxbf16 rows: the tdpbf16ps peak).\n"
      "vs bf16 = the BF16 kernel's CPU time on the same shape and M over this kernel's.\n\n",
      cfg.one_copy ? " (--one-copy: one copy of the weights, read from cache where it fits)" : "");
  std::printf("%-5s %-11s %3s %5s %5s %7s %9s %9s %6s %5s %5s %7s %6s %5s %7s\n", "op", "weights", "M", "N", "K",
              "W MB", "us/call", "cpu us", "GB/s", "%bw", "cpu%", "GOP/s", "%peak", "cpu%", "vs bf16");
  for (const Shape& s : kShapes) {
    if (!selected(cfg.ops, s.op)) continue;
    std::vector<double> bf16_us(cfg.ms.size(), 0.0);  // CPU time per call
    for (const Kind& kind : kKinds) {
      if (!selected(cfg.kinds, kind.name)) continue;
      const size_t bytes = weight_bytes(kind, s);
      const auto weights = make_weights(
          pool, kind, s, cfg.one_copy ? 1 : static_cast<int>(std::max<size_t>(2, (sweep + bytes - 1) / bytes)));
      for (size_t mi = 0; mi < cfg.ms.size(); ++mi) {
        const int m = cfg.ms[mi];
        const bool amx_row = amx && !kind.bf16 && m >= quant_amx_min_m(kind.format);
        const bool amx_bf16_row = amx_bf16 && !kind.bf16 && m >= quant_amx_bf16_min_m(kind.format) && s.k % 32 == 0 &&
                                  quant_act_block(kind.format, s.k) == kQuantActBlock;
        for (const int path : {0, 1, 2}) {  // register tiles, AMX INT8, AMX-BF16 prefill
          if ((path == 1 && !amx_row) || (path == 2 && !amx_bf16_row)) continue;
          const bool on_amx = path == 1, on_amx_bf16 = path == 2;
          const Result r = bench_one(pool, probe, kind, s, m, isa, on_amx, on_amx_bf16, weights, cfg);
          if (kind.bf16) bf16_us[mi] = r.cpu_us;
          const double moved = static_cast<double>(bytes) + m * s.k * 2.0 + m * s.n * 4.0;
          const double gop = 2.0 * m * s.n * static_cast<double>(s.k) / (r.us * 1e3);
          const double cpu_gop = 2.0 * m * s.n * static_cast<double>(s.k) / (r.cpu_us * 1e3);
          char bw_s[16] = "", cpu_bw_s[16] = "", peak_s[16] = "", cpu_peak_s[16] = "", ratio_s[16] = "";
          if (m <= kQuantDecodeMaxM) {
            std::snprintf(bw_s, sizeof bw_s, "%.0f%%", 100.0 * r.bw_ratio);
            std::snprintf(cpu_bw_s, sizeof cpu_bw_s, "%.0f%%", 100.0 * r.cpu_bw_ratio);
          } else {
            const bench::Stat& peak = on_amx_bf16 ? amx_bf16_peak
                                      : on_amx    ? amx_peak
                                      : kind.bf16 ? bf16_peak
                                                  : int8_peak;
            const bench::Stat& peak_cpu = on_amx_bf16 ? amx_bf16_cpu
                                          : on_amx    ? amx_cpu
                                          : kind.bf16 ? bf16_cpu
                                                      : int8_cpu;
            if (peak.median > 0) {
              std::snprintf(peak_s, sizeof peak_s, "%.0f%%", 100.0 * gop / peak.median);
              std::snprintf(cpu_peak_s, sizeof cpu_peak_s, "%.0f%%", 100.0 * cpu_gop / peak_cpu.median);
            }
          }
          if (!kind.bf16 && bf16_us[mi] > 0) std::snprintf(ratio_s, sizeof ratio_s, "%.2fx", bf16_us[mi] / r.cpu_us);
          const std::string name = std::string(kind.name) + (on_amx_bf16 ? "+amxbf16" : on_amx ? "+amx" : "");
          std::printf("%-5s %-11s %3d %5d %5d %7.2f %9.1f %9.1f %6.1f %5s %5s %7.0f %6s %5s %7s\n", s.op, name.c_str(),
                      m, s.n, s.k, static_cast<double>(bytes) / 1e6, r.us, r.cpu_us, moved / (r.us * 1e3), bw_s,
                      cpu_bw_s, gop, peak_s, cpu_peak_s, ratio_s);
          std::fflush(stdout);
        }
      }
    }
  }
  const bench::Stat bw_end = probe.measure(cfg.quick ? 5 : 15);
  std::printf("\nat the end: read bandwidth %.1f GB/s [%.1f..%.1f]\n", bw_end.median, bw_end.min, bw_end.max);
  return 0;
}
