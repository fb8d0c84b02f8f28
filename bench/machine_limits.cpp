#include "machine_limits.h"

#include <immintrin.h>

#include <cstdint>
#include <cstring>
#include <ctime>

#include "runtime/cpu_features.h"

namespace slab::bench {
namespace {

// Horizontal sum through memory (_mm512_reduce_add_ps trips a GCC 12 -Wuninitialized false positive).
__attribute__((target("avx512f"))) float hsum(__m512 v) {
  float t[16];
  _mm512_storeu_ps(t, v);
  float s = 0;
  for (float x : t) s += x;
  return s;
}

// Both sums read their n floats as kStreams parts at once, one vector of each part per step.
// One sequential stream does not reach a core's bandwidth everywhere: on a Zen 2 EPYC one stream
// read 17 GB/s on one core and 28-29 on two, where 4 streams read 24-25 and 31-32 (8 no more), so
// a one-stream probe put kernels that read several streams above 100 % of the "roofline"
// (bench/results/2026-11-29-epyc-zen2-2c-avx2-decode-streams). The parts start kSkewFloats apart
// modulo 16 KB: 4 parts exactly 256 MB apart (a 1 GB probe) read 12-13 GB/s on that core, the
// same addresses modulo every power of two up to 256 MB; 4 KB + 64 bytes off, 24 GB/s.
constexpr size_t kStreams = 4;
constexpr size_t kSkewFloats = (4096 + 64) / sizeof(float);

// Floats in each part of an n-float buffer: a multiple of 4096 (16 KB), so that the parts, one
// part and kSkewFloats apart, start 4 KB + 64 bytes apart modulo 16 KB.
size_t stream_part(size_t n) {
  constexpr size_t kRound = 4096;
  return n / kStreams > kSkewFloats + kRound ? (n / kStreams - kSkewFloats) / kRound * kRound : 0;
}

__attribute__((target("avx512f"))) double sum_avx512(const float* p, size_t n) {
  const size_t part = stream_part(n), step = part + kSkewFloats;
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i < part; i += 16) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + step + i));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + 2 * step + i));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + 3 * step + i));
  }
  return hsum(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

__attribute__((target("avx2"))) double sum_avx2(const float* p, size_t n) {
  const size_t part = stream_part(n), step = part + kSkewFloats;
  __m256 a[kStreams][2];
  for (auto& s : a) s[0] = s[1] = _mm256_setzero_ps();
  for (size_t i = 0; i < part; i += 16) {
#pragma GCC unroll 4
    for (size_t s = 0; s < kStreams; ++s) {
      a[s][0] = _mm256_add_ps(a[s][0], _mm256_load_ps(p + s * step + i));
      a[s][1] = _mm256_add_ps(a[s][1], _mm256_load_ps(p + s * step + i + 8));
    }
  }
  __m256 sum = _mm256_setzero_ps();
  for (const auto& s : a) sum = _mm256_add_ps(sum, _mm256_add_ps(s[0], s[1]));
  float t[8];
  _mm256_storeu_ps(t, sum);
  return double{t[0]} + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}

// 24 independent chains of one instruction (zmm8..zmm31) `iters` times, the loop in asm: with
// intrinsics GCC 12 copies each accumulator in and out of every instruction and spills the
// array. That halved the INT8 figure here, and the BF16 one on the 16-core Xeon (688 against
// 1228 GFLOP/s; llama.cpp's BF16 prefill ran at ~1190 there). The sums are never read.
#define SLAB_OP4(op, a, b, c, d)                                                                                   \
  op " %1, %2, %%zmm" #a "\n\t" op " %1, %2, %%zmm" #b "\n\t" op " %1, %2, %%zmm" #c "\n\t" op " %1, %2, %%zmm" #d \
     "\n\t"
#define SLAB_24_CHAINS(op, x, y, left)                                                                                \
  __asm__ volatile("1:\n\t" SLAB_OP4(op, 8, 9, 10, 11) SLAB_OP4(op, 12, 13, 14, 15) SLAB_OP4(op, 16, 17, 18, 19)      \
                       SLAB_OP4(op, 20, 21, 22, 23) SLAB_OP4(op, 24, 25, 26, 27)                                      \
                           SLAB_OP4(op, 28, 29, 30, 31) "dec %0\n\tjnz 1b"                                            \
                   : "+r"(left)                                                                                       \
                   : "v"(x), "v"(y)                                                                                   \
                   : "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm16", "xmm17", "xmm18", \
                     "xmm19", "xmm20", "xmm21", "xmm22", "xmm23", "xmm24", "xmm25", "xmm26", "xmm27", "xmm28",        \
                     "xmm29", "xmm30", "xmm31", "cc")

// One peak loop: `name(iters)` runs `chains` of instruction `insn` on inputs x and y `iters`
// times (the sums are never read) and returns the iterations done.
#define SLAB_PEAK_LOOP(name, isa, vec, x_init, y_init, chains, insn) \
  __attribute__((target(isa))) long name(long iters) {               \
    const vec x = x_init;                                            \
    const vec y = y_init;                                            \
    long left = iters;                                               \
    chains(insn, x, y, left);                                        \
    return iters + left;                                             \
  }

// BF16: y tiny, so no overflow.
SLAB_PEAK_LOOP(dp_loop, "avx512f,avx512bf16", __m512i, _mm512_set1_epi32(0x3f803f80), _mm512_set1_epi32(0x00010001),
               SLAB_24_CHAINS, "vdpbf16ps")
// The INT8 twin of dp_loop (integer: no exceptions).
SLAB_PEAK_LOOP(dpbusd_loop, "avx512f,avx512vnni", __m512i, _mm512_set1_epi8(1), _mm512_set1_epi8(1), SLAB_24_CHAINS,
               "vpdpbusd")

// The 512-bit FP32 twin: what the AVX-512 BF16 linears multiply with under
// LinearBlocking::fp32_products (y = 0: the sums stay zero).
SLAB_PEAK_LOOP(fma512_loop, "avx512f", __m512, _mm512_set1_ps(1.0f), _mm512_set1_ps(0.0f), SLAB_24_CHAINS,
               "vfmadd231ps")

// 12 independent instructions on ymm4..ymm15 `iters` times, the loop in asm (as SLAB_24_CHAINS):
// the AVX2 twins below.
#define SLAB_OP3_YMM(op, a, b, c) \
  op " %1, %2, %%ymm" #a "\n\t" op " %1, %2, %%ymm" #b "\n\t" op " %1, %2, %%ymm" #c "\n\t"
#define SLAB_12_YMM_CHAINS(op, x, y, left)                                                                        \
  __asm__ volatile("1:\n\t" SLAB_OP3_YMM(op, 4, 5, 6) SLAB_OP3_YMM(op, 7, 8, 9) SLAB_OP3_YMM(op, 10, 11, 12)      \
                       SLAB_OP3_YMM(op, 13, 14, 15) "dec %0\n\tjnz 1b"                                            \
                   : "+r"(left)                                                                                   \
                   : "x"(x), "x"(y)                                                                               \
                   : "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12", "xmm13", "xmm14", \
                     "xmm15", "cc")

// The AVX2 FP32 twin (what the AVX2 BF16 kernels multiply with): 12 vfmadd231ps chains, enough
// for 2 FMA pipes at 5 cycles' latency; y = 0, so the sums stay zero.
SLAB_PEAK_LOOP(fma_loop, "avx2,fma", __m256, _mm256_set1_ps(1.0f), _mm256_set1_ps(0.0f), SLAB_12_YMM_CHAINS,
               "vfmadd231ps")
// The AVX2 INT8 twin: without VNNI the AVX2 quantized kernels multiply u8 codes by s8
// activations with vpmaddubsw (32 products a ymm, adjacent pairs summed to 16 bits). Independent
// instructions: the multiply port's throughput alone, the kernels' widening (vpmaddwd) and adds
// come on top of it.
SLAB_PEAK_LOOP(maddubs_loop, "avx2", __m256i, _mm256_set1_epi8(1), _mm256_set1_epi8(1), SLAB_12_YMM_CHAINS,
               "vpmaddubsw")

// Operands of the AMX twin: 8 steps of A and B tile pairs (2 KB each, 32 KB in all: L1), as a
// GEMM's inner loop walks them. BF16: values as a linear's, random signs and mantissas with
// exponents near 1 (A) and 2^-7 (B); INT8: random bytes. The loop reloads its tiles every step:
// on the 2-core Sapphire/Emerald Rapids guest, tdpbf16ps on tiles loaded once ran ~3.2 TFLOP/s a
// core whatever the data, and reloading zeros as fast, but reloading such values every step
// ~2.4-2.7 (tdpbsud ~5 % apart). Only the last is a rate a GEMM can approach.
struct AmxPeakOperands {
  static constexpr int kSteps = 8;
  alignas(64) uint16_t a[kSteps][2][16 * 32];
  alignas(64) uint16_t b[kSteps][2][16 * 32];
  explicit AmxPeakOperands(bool int8) {
    uint32_t state = 0x9e3779b9u;
    auto next = [&state] {
      state = state * 1664525u + 1013904223u;  // LCG: any varied bits will do
      return state >> 8;
    };
    auto fill = [&](uint16_t* v, uint32_t exponent) {
      for (int i = 0; i < 16 * 32; ++i) {
        const uint32_t r = next();
        v[i] = int8 ? static_cast<uint16_t>(r & 0xffffu)
                    : static_cast<uint16_t>(exponent | (r & 0x7fu) | ((r >> 7 & 1u) << 15));
      }
    };
    for (int s = 0; s < kSteps; ++s) {
      for (int t = 0; t < 2; ++t) {
        fill(a[s][t], 0x3f00u);
        fill(b[s][t], 0x3c00u);
      }
    }
  }
};

// The AMX twin: per step, 4 tile loads and 4 independent C tiles' tdpbf16ps 16 x 16 x 32
// multiply-adds (int8: tdpbsud, 16 x 16 x 64): the 2 x 2 block of the kernels with its operands
// in L1 (the FP32 sums walk at random and stay far from overflow; the INT32 sums wrap, as the
// instruction's). The tile data permission is the caller's.
__attribute__((target("amx-tile,amx-bf16,amx-int8"))) long amx_dp_loop(long iters, bool int8) {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {64, 64, 64, 64, 64, 64, 64, 64};
    uint8_t rows[16] = {16, 16, 16, 16, 16, 16, 16, 16};
  } cfg;
  static const AmxPeakOperands bf16_operands(false), int8_operands(true);
  const AmxPeakOperands& op = int8 ? int8_operands : bf16_operands;
  constexpr int kSteps = AmxPeakOperands::kSteps;
  __asm__ volatile("ldtilecfg %0" : : "m"(cfg));  // not _tile_loadconfig: see kernels/linear_bf16_amx.cpp
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  // One iteration = one step of the block; iters is a multiple of kSteps in effect (rounded up).
  const long rounds = (iters + kSteps - 1) / kSteps;
  for (long r = 0; r < rounds; ++r) {
    for (int st = 0; st < kSteps; ++st) {
      _tile_loadd(4, op.a[st][0], 64);
      _tile_loadd(6, op.b[st][0], 64);
      _tile_loadd(7, op.b[st][1], 64);
      _tile_loadd(5, op.a[st][1], 64);
      if (int8) {
        _tile_dpbsud(0, 4, 6);
        _tile_dpbsud(1, 4, 7);
        _tile_dpbsud(2, 5, 6);
        _tile_dpbsud(3, 5, 7);
      } else {
        _tile_dpbf16ps(0, 4, 6);
        _tile_dpbf16ps(1, 4, 7);
        _tile_dpbf16ps(2, 5, 6);
        _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  _tile_release();
  return rounds * kSteps;
}

// G ops/s of loop (ops_per_iter operations per iteration) on all pool threads together. Every
// thread runs the loop in slices of iters / 16 until a shared deadline (the time one thread
// needs for `iters`, measured once) and counts what it did, so all threads are busy for the
// whole window and the sum of their rates is the machine's. Timing a fixed amount per thread
// over the whole region instead made the slowest thread set everyone's rate: on the 16-vCPU
// Xeon, whose vCPUs do not run at one speed, that read ~690 GFLOP/s of vdpbf16ps where the GEMM,
// taking work from a shared counter, then ran 1000.
template <typename Loop>
Stat measure_peak(ThreadPool& pool, int reps, Stat* cpu_based, long iters, double ops_per_iter, Loop loop) {
  const auto n = static_cast<size_t>(pool.size());
  const long slice = std::max(1L, iters / 16);
  std::vector<double> sink(n * 8);
  double window = now_seconds();
  sink[0] += static_cast<double>(loop(iters));
  window = std::max(1e-3, now_seconds() - window);
  std::vector<double> rates, cpu_rates;
  for (int r = 0; r < reps + 1; ++r) {
    std::vector<double> rate(n * 8, 0.0), cpu_rate(n * 8, 0.0);
    const double t0 = now_seconds();
    pool.run_on_all([&](int t, int) {
      const double c0 = thread_cpu_seconds();
      const size_t i = static_cast<size_t>(t) * 8;
      long done = 0;
      double now = t0;
      while (now - t0 < window) {
        sink[i] += static_cast<double>(loop(slice));
        done += slice;
        now = now_seconds();
      }
      const double ops = ops_per_iter * static_cast<double>(done);
      rate[i] = ops / (now - t0);
      cpu_rate[i] = ops / std::max(1e-9, thread_cpu_seconds() - c0);
    });
    if (r == 0) continue;
    double sum = 0, cpu_sum = 0;
    for (size_t t = 0; t < n; ++t) {
      sum += rate[t * 8];
      cpu_sum += cpu_rate[t * 8];
    }
    rates.push_back(sum / 1e9);
    cpu_rates.push_back(cpu_sum / 1e9);
  }
  if (cpu_based) *cpu_based = summarize(cpu_rates);
  return summarize(rates);
}

}  // namespace

Stat measure_int8_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!cpu_features().avx512_vnni || !cpu_features().os_zmm) return {};
  return measure_peak(pool, reps, cpu_based, 2'000'000, 128.0 * 24, dpbusd_loop);
}

size_t dram_probe_bytes(const TopologyInfo& cores) {
  std::vector<int> l3s;
  for (const CoreInfo& c : cores.cores) l3s.push_back(c.l3_index);
  std::sort(l3s.begin(), l3s.end());
  const size_t n_l3 = std::max<size_t>(1, static_cast<size_t>(std::unique(l3s.begin(), l3s.end()) - l3s.begin()));
  return std::max(size_t{1} << 30, 4 * n_l3 * cores.l3_bytes);
}

size_t dram_probe_bytes() { return dram_probe_bytes(Topology::system().process_info()); }

ReadBandwidthProbe::ReadBandwidthProbe(ThreadPool& pool, size_t bytes)
    : pool_(pool), per_thread_(bytes / static_cast<size_t>(pool.size()) / 4096 * 4096),
      buf_(per_thread_ * static_cast<size_t>(pool.size())), sink_(static_cast<size_t>(pool.size()) * 8, 0.0) {
  // First touch by the thread that will read it (page placement on NUMA machines).
  pool_.run_on_all(
      [&](int t, int) { std::memset(buf_.as<char>() + per_thread_ * static_cast<size_t>(t), 1, per_thread_); });
}

double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

Rate ReadBandwidthProbe::once() {
  const bool avx512 = cpu_features().avx512f;
  const size_t floats = per_thread_ / sizeof(float);
  std::vector<double> cpu(static_cast<size_t>(pool_.size()) * 8, 0.0);
  const double t0 = now_seconds();
  pool_.run_on_all([&](int t, int) {
    const double c0 = thread_cpu_seconds();
    const float* p = buf_.as<float>() + floats * static_cast<size_t>(t);
    sink_[static_cast<size_t>(t) * 8] += avx512 ? sum_avx512(p, floats) : sum_avx2(p, floats);
    cpu[static_cast<size_t>(t) * 8] = thread_cpu_seconds() - c0;
  });
  const double dt = now_seconds() - t0;
  const double bytes = static_cast<double>(kStreams * stream_part(floats) * sizeof(float)) * pool_.size();
  return {bytes / dt / 1e9, bytes / *std::max_element(cpu.begin(), cpu.end()) / 1e9};
}

Stat ReadBandwidthProbe::measure(int reps) {
  (void)once();
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) rates.push_back(once().wall);
  return summarize(rates);
}

Stat measure_bf16_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!cpu_features().has_avx512_bf16_kernels()) return {};
  return measure_peak(pool, reps, cpu_based, 2'000'000, 64.0 * 24, dp_loop);
}

Stat measure_fma_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!cpu_features().has_avx2_kernels()) return {};
  return measure_peak(pool, reps, cpu_based, 4'000'000, 16.0 * 12, fma_loop);
}

Stat measure_fma512_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!cpu_features().has_avx512_bf16_kernels()) return {};
  return measure_peak(pool, reps, cpu_based, 2'000'000, 32.0 * 24, fma512_loop);
}

Stat measure_maddubs_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!cpu_features().has_avx2_kernels()) return {};
  return measure_peak(pool, reps, cpu_based, 4'000'000, 64.0 * 12, maddubs_loop);
}

Stat measure_amx_bf16_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!amx_bf16_usable()) return {};
  return measure_peak(pool, reps, cpu_based, 4'000'000, 4.0 * 16 * 16 * 32 * 2,
                      [](long iters) { return amx_dp_loop(iters, false); });
}

Stat measure_amx_int8_peak(ThreadPool& pool, int reps, Stat* cpu_based) {
  if (!amx_int8_usable()) return {};
  return measure_peak(pool, reps, cpu_based, 4'000'000, 4.0 * 16 * 16 * 64 * 2,
                      [](long iters) { return amx_dp_loop(iters, true); });
}

Stat measure_dispatch_us(ThreadPool& pool, int reps, int calls_per_rep) {
  std::vector<double> us;
  for (int r = 0; r < reps + 1; ++r) {
    const double t0 = now_seconds();
    for (int i = 0; i < calls_per_rep; ++i) pool.parallel_for(pool.size(), [](int, int) {});
    const double dt = now_seconds() - t0;
    if (r > 0) us.push_back(dt / calls_per_rep * 1e6);
  }
  return summarize(us);
}

}  // namespace slab::bench
