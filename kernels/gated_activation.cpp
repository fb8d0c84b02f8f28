// Dispatch and the portable loops of gated_activation.h.
#include "kernels/gated_activation.h"

#include <algorithm>

#include "kernels/reference.h"

namespace slab::kern {

void gelu_tanh_mul_to_bf16(bf16_t* out, const float* gate, const float* up, int n, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::gelu_tanh_mul_to_bf16_avx512(out, gate, up, n);
  if (isa == Isa::avx2) return detail::gelu_tanh_mul_to_bf16_avx2(out, gate, up, n);
  constexpr int kChunk = 256;  // FP32 staging on the stack before the BF16 conversion
  float buf[kChunk];
  for (int b = 0; b < n; b += kChunk) {
    const int len = std::min(kChunk, n - b);
    ref::gelu_tanh_mul(buf, gate + b, up + b, len);
    convert_f32_to_bf16(out + b, buf, static_cast<size_t>(len), Isa::scalar);
  }
}

void softcap(float* x, size_t n, float cap, Isa isa) {
  if (isa == Isa::avx512_bf16) return detail::softcap_avx512(x, n, cap);
  if (isa == Isa::avx2) return detail::softcap_avx2(x, n, cap);
  ref::softcap(x, n, cap);
}

}  // namespace slab::kern
