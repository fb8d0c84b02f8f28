#pragma once
// The limits a kernel figure is compared with, measured on the threads of the pool that runs
// the kernel: streaming read bandwidth over a buffer several times the L3, the BF16 and INT8
// dot-product peaks of register-only vdpbf16ps / vpdpbusd loops, and the cost of an empty dispatch.
#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <vector>

#include "runtime/aligned_buffer.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

namespace slab::bench {

struct Stat {
  double median = 0, min = 0, max = 0;
};

// "1,4,16" as {1, 4, 16}: the benchmarks' list flags (--m, --threads); stops at the first item
// that is not a number.
inline std::vector<int> parse_int_list(const char* p) {
  std::vector<int> v;
  while (*p) {
    char* end = nullptr;
    v.push_back(static_cast<int>(std::strtol(p, &end, 10)));
    if (end == p) {
      v.pop_back();
      break;
    }
    p = *end == ',' ? end + 1 : end;
  }
  return v;
}

inline Stat summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v[v.size() / 2], v.front(), v.back()};
}

// CPU time of the calling thread: unlike wall time it does not grow while another process has
// the core, so on a shared machine it estimates what the work would take alone (it does still
// include waiting for memory, so bandwidth contention stays visible).
double thread_cpu_seconds();

// A rate measured both ways: from wall time and from the busiest thread's CPU time.
struct Rate {
  double wall = 0, cpu = 0;
};

inline double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Streaming read of a buffer of `bytes` (rounded to 4 KiB per thread), split over all pool
// threads, each reading its own contiguous part (first-touched by that thread) as four
// concurrent streams (one did not reach a Zen 2 core's bandwidth: machine_limits.cpp). Keep one probe
// to interleave bandwidth samples with kernel samples: the shared machine's bandwidth drifts by
// tens of percent within a minute, so a ratio is only meaningful between adjacent samples.
// The buffer a probe of DRAM bandwidth (a bound's read term) must sweep on this process's cores:
// four times all their L3 caches together, at least 1 GiB. A sweep near the L3's size is partly
// served by it: on the 16-core Xeon device (one 300 MiB L3) a 300 MB sweep read 151-160 GB/s on 16
// threads where a 1 GiB one read 102-106 (bench/results/2026-12-01-xeon-2c-served-bound).
size_t dram_probe_bytes(const TopologyInfo& cores);
size_t dram_probe_bytes();  // for Topology::system().process_info()

class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, size_t bytes);
  Rate once();             // GB/s (1e9 bytes/s) of one pass
  Stat measure(int reps);  // wall-time GB/s, after one warm-up pass
 private:
  ThreadPool& pool_;
  size_t per_thread_ = 0;
  AlignedBuffer buf_;
  std::vector<double> sink_;
};
// GFLOP/s of vdpbf16ps on all pool threads (one instruction = 64 flops on zmm); 0 when the CPU
// lacks avx512_bf16.
Stat measure_bf16_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// GOP/s (multiply and add counted apart) of vpdpbusd on all pool threads (one instruction = 64
// u8·s8 products summed into 16 lanes = 128 ops on zmm); 0 when the CPU lacks avx512_vnni.
Stat measure_int8_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// GFLOP/s of 256-bit vfmadd231ps (16 flops) on all pool threads: the AVX2 kernels' limit; 0
// without avx2/fma.
Stat measure_fma_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// GFLOP/s of 512-bit vfmadd231ps (32 flops) on all pool threads: the limit of the AVX-512 BF16
// linears that multiply in FP32 (LinearBlocking::fp32_products); 0 without the AVX-512 BF16 kernels.
Stat measure_fma512_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// GOP/s (multiply and add counted apart: 32 u8·s8 products a ymm = 64 ops) of vpmaddubsw on all
// pool threads: the AVX2 quantized kernels' multiply, their int8 limit where the CPU has no
// VNNI; 0 without avx2.
Stat measure_maddubs_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// The same for AMX-BF16 (tdpbf16ps on 4 C tiles); all zero where amx_bf16_usable() is false.
Stat measure_amx_bf16_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// GOP/s of AMX-INT8 (tdpbsud on 4 C tiles, 16 x 16 x 64 products each); all zero where
// amx_int8_usable() is false.
Stat measure_amx_int8_peak(ThreadPool& pool, int reps, Stat* cpu_based = nullptr);
// Microseconds per empty parallel_for(size(), ...) dispatch.
Stat measure_dispatch_us(ThreadPool& pool, int reps, int calls_per_rep);

}  // namespace slab::bench
