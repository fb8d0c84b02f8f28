// Dtype helpers and conversion of checkpoint tensors to FP32; independent of the container.
#include "model/checkpoint.h"

#include <cstring>
#include <stdexcept>

namespace slab {

const char* dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i32: return "I32";
  }
  return "?";
}

const char* block_format_name(BlockFormat format) {
  switch (format) {
    case BlockFormat::none: return "none";
    case BlockFormat::q8_0: return "Q8_0";
    case BlockFormat::q4_0: return "Q4_0";
    case BlockFormat::q4_1: return "Q4_1";
    case BlockFormat::q5_0: return "Q5_0";
    case BlockFormat::q5_1: return "Q5_1";
    case BlockFormat::q4_k: return "Q4_K";
    case BlockFormat::q5_k: return "Q5_K";
    case BlockFormat::q6_k: return "Q6_K";
    case BlockFormat::awq4: return "AWQ 4-bit";
    case BlockFormat::gptq2: return "GPTQ 2-bit";
    case BlockFormat::gptq3: return "GPTQ 3-bit";
    case BlockFormat::gptq4: return "GPTQ 4-bit";
    case BlockFormat::gptq8: return "GPTQ 8-bit";
  }
  return "?";
}

size_t block_format_row_bytes(BlockFormat format, int64_t cols) {
  size_t elems = 0, bytes = 0;
  switch (format) {
    case BlockFormat::none: return static_cast<size_t>(cols);
    case BlockFormat::q8_0: elems = 32, bytes = 34; break;
    case BlockFormat::q4_0: elems = 32, bytes = 18; break;
    case BlockFormat::q4_1: elems = 32, bytes = 20; break;
    case BlockFormat::q5_0: elems = 32, bytes = 22; break;
    case BlockFormat::q5_1: elems = 32, bytes = 24; break;
    case BlockFormat::q4_k: elems = 256, bytes = 144; break;
    case BlockFormat::q5_k: elems = 256, bytes = 176; break;
    case BlockFormat::q6_k: elems = 256, bytes = 210; break;
    case BlockFormat::awq4:
    case BlockFormat::gptq2:
    case BlockFormat::gptq3:
    case BlockFormat::gptq4: elems = 32, bytes = 24; break;
    case BlockFormat::gptq8: elems = 32, bytes = 40; break;
  }
  return static_cast<size_t>(cols) / elems * bytes;
}

size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i32: return 4;
  }
  return 0;
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

float bits_to_f32(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

}  // namespace

// IEEE half -> single, exact for every input: normals, subnormals, zeros, infinities, NaNs
// (payload kept, quiet bit as in the source).
TensorView row_slice(const TensorView& view, int64_t first, int64_t rows) {
  TensorView s;
  s.name = view.name;
  s.file = view.file;
  s.dtype = view.dtype;
  const int64_t k = view.shape.at(1);
  s.shape = {rows, k};
  s.data = static_cast<const uint8_t*>(view.data) + static_cast<size_t>(first * k) * dtype_size(view.dtype);
  return s;
}

void convert_to_f32(const TensorView& view, float* out) {
  const size_t n = static_cast<size_t>(view.numel());
  const auto* src = static_cast<const uint8_t*>(view.data);
  switch (view.dtype) {
    case DType::f32: std::memcpy(out, src, n * sizeof(float)); return;
    case DType::f16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = f16_to_f32(h);
      }
      return;
    case DType::bf16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t b;
        std::memcpy(&b, src + 2 * i, 2);
        out[i] = bits_to_f32(static_cast<uint32_t>(b) << 16);
      }
      return;
    case DType::i32:
      throw std::runtime_error(view.file + ": tensor '" + view.name +
                               "' is I32 (packed integer codes), not weights: expected F32, F16 or BF16");
  }
  throw std::logic_error("convert_to_f32: bad dtype");
}

}  // namespace slab
