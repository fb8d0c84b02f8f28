#pragma once
// The quantized kernels' ISAs this CPU runs, for the INT8/INT4 and K-quant kernel tests: scalar
// always, AVX2 and AVX-512 VNNI where cpuid says so; each path skipped is named in a warning.
#include <catch2/catch.hpp>

#include <vector>

#include "kernels/bf16.h"
#include "runtime/cpu_features.h"

namespace slab::test {

inline std::vector<kern::Isa> quant_isas() {
  std::vector<kern::Isa> v{kern::Isa::scalar};
  if (cpu_features().has_avx2_kernels()) {
    v.push_back(kern::Isa::avx2);
  } else {
    WARN("avx2 quantized paths skipped: this CPU lacks avx2/fma/f16c");
  }
  if (cpu_features().has_avx512_quant_kernels()) {
    v.push_back(kern::Isa::avx512_bf16);
  } else {
    WARN("avx512 quantized paths skipped: this CPU lacks avx512 bf16/vnni");
  }
  return v;
}

}  // namespace slab::test
