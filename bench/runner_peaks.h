#pragma once
// The peaks of the instructions a model runner's kernels multiply with, measured on a pool of the
// runner's threads: what bench_model prints its prefill linears' rates against, and what
// bench_engine bounds its forward passes' time with (model/forward_work.h).
#include <string>
#include <vector>

#include "model/forward_work.h"

namespace slab {
class ModelRunner;
class ThreadPool;
}  // namespace slab

namespace slab::bench {

struct InstructionPeak {
  std::string name;   // "vdpbf16ps"
  double giga_per_s;  // GFLOP/s, or GOP/s (an INT8 product and its add counted as two)
  bool int8;          // an INT8 product: the quantized linears' only; else BF16/FP32, attention's as well
};

// The runner's kernel set's multiplies (AVX-512: vdpbf16ps, the 512-bit FMA where the linears
// multiply in FP32, vpdpbusd with quantized weights, the AMX tiles where the runner uses them;
// AVX2: the 256-bit FMA and vpmaddubsw), medians of `reps` measurements.
std::vector<InstructionPeak> measure_runner_peaks(ThreadPool& pool, const ModelRunner& runner, int reps = 3);
// "vdpbf16ps 222 GFLOP/s, tdpbf16ps 5327 GFLOP/s"
std::string describe_peaks(const std::vector<InstructionPeak>& peaks);
// The fastest of them for the linears, the fastest BF16/FP32 one for attention, and the read
// bandwidth: the rates forward_time_bound divides by.
ForwardPeaks forward_peaks(const std::vector<InstructionPeak>& peaks, double read_gb_per_s);

}  // namespace slab::bench
