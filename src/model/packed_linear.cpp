#include "model/packed_linear.h"

#include <algorithm>

#include "runtime/cpu_features.h"

namespace slab {

kern::Isa quant_isa_for(kern::Isa isa) {
  if (isa == kern::Isa::avx512_bf16 && !cpu_features().has_avx512_quant_kernels()) return kern::Isa::avx2;
  return isa;
}

size_t model_linear_workspace_floats(const PackedModel& model, int tokens, int head_rows, int n_threads) {
  auto floats = [n_threads](const PackedMatrix& m, int rows) -> size_t {
    if (m.quantized)
      return (kern::quant_linear_workspace_bytes(rows, m.quant_view(), n_threads) + sizeof(float) - 1) / sizeof(float);
    return kern::linear_bf16_workspace_floats(rows, m.n, m.k, n_threads, m.swiglu);
  };
  size_t most = floats(model.lm_head, head_rows);
  for (const PackedLayer& l : model.layers) {
    for (const PackedMatrix* m : l.matrices()) most = std::max(most, floats(*m, tokens));
  }
  return most;
}

}  // namespace slab
