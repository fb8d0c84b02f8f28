// Placeholder: AVX-512 tiles forward to the scalar ones until the VNNI/BF16 tiles land.
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
void quant_decode_tile_avx512(const QuantTile& t) { quant_decode_tile_scalar(t); }
void quant_batch_tile_avx512(const QuantTile& t) { quant_batch_tile_scalar(t); }
void quantize_row_avx512(int8_t* xq, float* scale, int32_t* sums, const bf16_t* x, int k, int kp,
                         int group_size) {
  quantize_row_scalar(xq, scale, sums, x, k, kp, group_size);
}
}  // namespace slab::kern::detail
