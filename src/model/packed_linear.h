#pragma once
// One projection of the forward pass through the kernel its packed form needs: linear_bf16 for
// BF16 panels, quant_linear for W8/W4 ones (same activations, epilogue and output).
#include <cstddef>

#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "model/packed_weights.h"
#include "runtime/cpu_features.h"

namespace slab {

// The quantized kernels' ISA on a runner that uses `isa`: AVX-512 needs VNNI as well.
kern::Isa quant_isa_for(kern::Isa isa);

// Scratch floats (64-byte aligned) that running `m` on `rows` rows over n_threads threads needs:
// the kernel's, and after it the gathered activations when m has an input_perm. Not monotonic in
// rows (split-K decode sums below 9 rows, row-tile sums above).
size_t packed_linear_workspace_floats(const PackedMatrix& m, int rows, int n_threads);

// Scratch floats (64-byte aligned) that any projection of `m` needs for `tokens` rows, and the
// head for `head_rows` rows.
size_t model_linear_workspace_floats(const PackedModel& m, int tokens, int head_rows, int n_threads);

// Whether a gate+up matrix (without biases) runs as one fused gated linear, act(gate)·up straight
// to BF16: BF16 SwiGLU-packed, or quantized [gate; up] whose halves start on panels.
inline bool fused_gate_up(const PackedMatrix& m) {
  return m.swiglu || (m.quantized && m.segments.empty() && kern::quant_swiglu_fusable(m.n));
}

namespace detail {
// The kernel's part of packed_linear_workspace_floats, rounded up to 16 floats (64 bytes).
size_t kernel_workspace_floats(const PackedMatrix& m, int rows, int n_threads);
// Rows [r0, r1) of x gathered into xg ([rows][k], row stride k) in m.input_perm's order.
void gather_input_rows(kern::bf16_t* xg, const kern::bf16_t* x, size_t ldx, const PackedMatrix& m, int r0, int r1);
}  // namespace detail

// a.w is ignored: the weights are `m`. a.swiglu only where fused_gate_up(m). a.workspace holds
// packed_linear_workspace_floats(m, a.m, n_threads) floats.
template <typename RunOnAll>
void packed_linear(const kern::LinearArgs& a, const PackedMatrix& m, kern::Isa quant_isa, int n_threads,
                   RunOnAll&& run_on_all) {
  kern::LinearArgs in = a;
  if (!m.input_perm.empty()) {
    // Act-order weights: the activations in the packed K order, after the kernel's scratch.
    auto* xg = reinterpret_cast<kern::bf16_t*>(a.workspace + detail::kernel_workspace_floats(m, a.m, n_threads));
    run_on_all([&](int thread, int threads) {
      const int r0 = static_cast<int>(static_cast<int64_t>(a.m) * thread / threads);
      const int r1 = static_cast<int>(static_cast<int64_t>(a.m) * (thread + 1) / threads);
      detail::gather_input_rows(xg, a.x, a.ldx, m, r0, r1);
    });
    in.x = xg;
    in.ldx = static_cast<size_t>(m.k);
  }
  if (!m.segments.empty()) {
    // Rows [n0, n0 + s.n) of the output from each segment, in turn (a.swiglu is never set here).
    int n0 = 0;
    for (const PackedMatrix& s : m.segments) {
      kern::LinearArgs b = in;
      const auto col = static_cast<size_t>(n0);
      if (b.out_f32) b.out_f32 += col;
      if (b.out_bf16) b.out_bf16 += col;
      if (b.bias) b.bias += col;
      if (b.residual) b.residual += col;
      packed_linear(b, s, quant_isa, n_threads, run_on_all);
      n0 += s.n;
    }
    return;
  }
  if (!m.quantized) {
    kern::LinearArgs b = in;
    b.w = m.view();
    kern::linear_bf16(b, n_threads, run_on_all);
    return;
  }
  kern::QuantLinearArgs q;
  q.x = in.x;
  q.ldx = in.ldx;
  q.w = m.quant_view();
  q.m = in.m;
  q.dynamic_split = in.blocking.dynamic_split;
  q.out_f32 = in.out_f32;
  q.out_bf16 = in.out_bf16;
  q.ldo = in.ldo;
  q.bias = in.bias;
  q.residual = in.residual;
  q.ldr = in.ldr;
  q.workspace = in.workspace;
  q.isa = quant_isa;
  q.swiglu = in.swiglu;
  q.gated_act = in.gated_act;
  q.amx = in.amx && amx_int8_usable();  // the runner's AMX switch; INT8 tiles where the CPU has them
  // Prefill-sized calls dequantize to BF16 and take the BF16 tiles (QuantLinearArgs::amx_bf16).
  q.amx_bf16 = in.amx && amx_bf16_usable();
  kern::quant_linear(q, run_on_all);
}

}  // namespace slab
