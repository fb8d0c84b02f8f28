#include "model/packed_linear.h"

#include <algorithm>

#include "runtime/cpu_features.h"

namespace slab {

kern::Isa quant_isa_for(kern::Isa isa) {
  if (isa == kern::Isa::avx512_bf16 && !cpu_features().has_avx512_quant_kernels()) return kern::Isa::avx2;
  return isa;
}

namespace detail {

size_t kernel_workspace_floats(const PackedMatrix& m, int rows, int n_threads) {
  if (!m.segments.empty()) {
    size_t most = 0;
    for (const PackedMatrix& s : m.segments) most = std::max(most, kernel_workspace_floats(s, rows, n_threads));
    return most;
  }
  const size_t floats =
      m.quantized
          ? (kern::quant_linear_workspace_bytes(rows, m.quant_view(), n_threads, amx_int8_usable(), amx_bf16_usable()) +
             sizeof(float) - 1) /
                sizeof(float)
          : kern::linear_bf16_workspace_floats(rows, m.n, m.k, n_threads, m.swiglu);
  return (floats + 15) / 16 * 16;
}

void gather_input_rows(kern::bf16_t* xg, const kern::bf16_t* x, size_t ldx, const PackedMatrix& m, int r0, int r1) {
  const int32_t* perm = m.input_perm.data();
  for (int r = r0; r < r1; ++r) {
    const kern::bf16_t* src = x + static_cast<size_t>(r) * ldx;
    kern::bf16_t* dst = xg + static_cast<size_t>(r) * static_cast<size_t>(m.k);
    for (int k = 0; k < m.k; ++k) dst[k] = src[perm[k]];
  }
}

}  // namespace detail

size_t packed_linear_workspace_floats(const PackedMatrix& m, int rows, int n_threads) {
  const size_t gather =
      m.input_perm.empty()
          ? 0
          : (static_cast<size_t>(rows) * static_cast<size_t>(m.k) * sizeof(kern::bf16_t) + 63) / 64 * 16;
  return detail::kernel_workspace_floats(m, rows, n_threads) + gather;
}

size_t model_linear_workspace_floats(const PackedModel& model, int tokens, int head_rows, int n_threads) {
  size_t most = packed_linear_workspace_floats(model.lm_head, head_rows, n_threads);
  for (const PackedLayer& l : model.layers) {
    for (const PackedMatrix* m : l.matrices())
      most = std::max(most, packed_linear_workspace_floats(*m, tokens, n_threads));
  }
  return most;
}

}  // namespace slab
