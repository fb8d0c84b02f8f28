// Placeholder: AVX2 tiles forward to the scalar ones until the vpmaddubsw tiles land.
#include "kernels/linear_quant_tile.h"

namespace slab::kern::detail {
void quant_decode_tile_avx2(const QuantTile& t) { quant_decode_tile_scalar(t); }
void quant_batch_tile_avx2(const QuantTile& t) { quant_batch_tile_scalar(t); }
}  // namespace slab::kern::detail
