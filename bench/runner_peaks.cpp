#include "runner_peaks.h"

#include <algorithm>
#include <cstdio>

#include "machine_limits.h"
#include "model/model_runner.h"
#include "runtime/cpu_features.h"

namespace slab::bench {

std::vector<InstructionPeak> measure_runner_peaks(ThreadPool& pool, const ModelRunner& runner, int reps) {
  std::vector<InstructionPeak> peaks;
  const bool quantized = runner.has_quantized_weights();
  if (runner.isa() == kern::Isa::avx512_bf16) {
    peaks.push_back({"vdpbf16ps", measure_bf16_peak(pool, reps).median, false});
    if (runner.blocking().fp32_products)
      peaks.push_back({"512-bit FMA", measure_fma512_peak(pool, reps).median, false});
    if (quantized) peaks.push_back({"vpdpbusd", measure_int8_peak(pool, reps).median, true});
    if (runner.amx()) {
      peaks.push_back({"tdpbf16ps", measure_amx_bf16_peak(pool, reps).median, false});
      if (quantized && amx_int8_usable()) peaks.push_back({"tdpbsud", measure_amx_int8_peak(pool, reps).median, true});
    }
  } else if (runner.isa() == kern::Isa::avx2) {
    peaks.push_back({"256-bit FMA", measure_fma_peak(pool, reps).median, false});
    if (quantized) peaks.push_back({"vpmaddubsw", measure_maddubs_peak(pool, reps).median, true});
  }
  return peaks;
}

std::string describe_peaks(const std::vector<InstructionPeak>& peaks) {
  std::string out;
  for (const InstructionPeak& p : peaks) {
    char item[96];
    std::snprintf(item, sizeof item, "%s%s %.0f %s", out.empty() ? "" : ", ", p.name.c_str(), p.giga_per_s,
                  p.int8 ? "GOP/s" : "GFLOP/s");
    out += item;
  }
  return out.empty() ? "none (scalar reference kernels)" : out;
}

ForwardPeaks forward_peaks(const std::vector<InstructionPeak>& peaks, double read_gb_per_s) {
  ForwardPeaks f;
  for (const InstructionPeak& p : peaks) {
    f.linear_flops_per_s = std::max(f.linear_flops_per_s, p.giga_per_s * 1e9);
    if (!p.int8) f.attention_flops_per_s = std::max(f.attention_flops_per_s, p.giga_per_s * 1e9);
  }
  f.read_bytes_per_s = read_gb_per_s * 1e9;
  return f;
}

}  // namespace slab::bench
