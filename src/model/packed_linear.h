#pragma once
// One projection of the forward pass through the kernel its packed form needs: linear_bf16 for
// BF16 panels, quant_linear for W8/W4 ones (same activations, epilogue and output).
#include <cstddef>

#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "model/packed_weights.h"

namespace slab {

// The quantized kernels' ISA on a runner that uses `isa`: AVX-512 needs VNNI as well.
kern::Isa quant_isa_for(kern::Isa isa);

// Scratch floats (64-byte aligned) that any projection of `m` needs for `tokens` rows, and the
// head for `head_rows` rows.
size_t model_linear_workspace_floats(const PackedModel& m, int tokens, int head_rows, int n_threads);

// a.w is ignored: the weights are `m`. a.swiglu only with m.swiglu.
template <typename RunOnAll>
void packed_linear(const kern::LinearArgs& a, const PackedMatrix& m, kern::Isa quant_isa, int n_threads,
                   RunOnAll&& run_on_all) {
  if (!m.quantized) {
    kern::LinearArgs b = a;
    b.w = m.view();
    kern::linear_bf16(b, n_threads, run_on_all);
    return;
  }
  kern::QuantLinearArgs q;
  q.x = a.x;
  q.ldx = a.ldx;
  q.w = m.quant_view();
  q.m = a.m;
  q.out_f32 = a.out_f32;
  q.out_bf16 = a.out_bf16;
  q.ldo = a.ldo;
  q.bias = a.bias;
  q.residual = a.residual;
  q.ldr = a.ldr;
  q.workspace = a.workspace;
  q.isa = quant_isa;
  kern::quant_linear(q, run_on_all);
}

}  // namespace slab
