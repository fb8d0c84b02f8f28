#pragma once
// The BF16 linear's cache blocking per CPU microarchitecture (kern::LinearBlocking), picked at
// start-up from cpuid. Each entry says where it was measured (bench_linear_bf16 --sweep); a
// microarchitecture without a measured entry runs the defaults.
#include <string>

#include "kernels/linear_bf16.h"
#include "runtime/cpu_features.h"

namespace slab {

struct LinearTuning {
  kern::LinearBlocking blocking;
  std::string source;  // "zen4 (measured ...)" or "defaults"
};

LinearTuning linear_tuning_for(const CpuFeatures& cpu);

// "k=512,tile=6x64,prefetch=on,amx=0,amxprefill=128,amxpf=16384,split=dynamic,dpf=0,products=dot":
// K block in elements, register tile rows x columns, prefetch on|off, AMX K block in elements
// (0: whole K), the rows from which AMX splits its work as prefill does, the AMX panel prefetch
// distance in bytes, work from
// a shared counter or fixed shares (dynamic|static), the AVX-512 decode prefetch distance in
// bytes, large-M AVX-512 products by vdpbf16ps or by FP32 FMAs (dot|fma). parse_linear_blocking reads the same
// form, any subset of the keys over the defaults; throws std::invalid_argument naming the key.
std::string describe_linear_blocking(const kern::LinearBlocking& b);
kern::LinearBlocking parse_linear_blocking(const std::string& spec);

}  // namespace slab
