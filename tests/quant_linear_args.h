#pragma once
// The arguments every quantized-linear test call shares, for any test's matrix (packed, f, n, k)
// and rows (x, ldx, m): no output, scratch or epilogue yet.
#include "kernels/linear_quant.h"

template <typename Matrix, typename Rows>
slab::kern::QuantLinearArgs args_for(const Matrix& q, const Rows& in, slab::kern::Isa isa) {
  slab::kern::QuantLinearArgs a;
  a.x = in.x.data();
  a.ldx = in.ldx;
  a.w = {q.packed.data(), q.f, q.n, q.k};
  a.m = in.m;
  a.isa = isa;
  return a;
}
