#pragma once
// Read access to the tensors of a checkpoint on disk, whatever its container. The loader asks for
// tensors by their Hugging Face name and converts them; it never sees file formats.
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bf16.h"

namespace slab {

// i32 holds packed integer codes (AWQ's qweight/qzeros), never values: convert_to_f32 refuses it.
enum class DType { f32, f16, bf16, i32 };

// GGUF block formats the quantized kernels take (model/packed_quant.h repacks them into W8/W4
// g32: every format but Q6_K without requantizing); see model/gguf_blocks.h for the layouts.
// awq4, gptq2/3/4 and gptq8 are no file's format: the blocks model/prequantized_checkpoint.h makes
// from an AWQ or GPTQ checkpoint's tensors (32 elements: FP32 slope, FP32 offset, then 16 bytes of
// nibbles as in Q4_1, 24 bytes; or 32 bytes of 8-bit codes, 40 bytes). gptq2 and gptq3 are the
// same 24-byte blocks as gptq4 (GPTQ's 2- and 3-bit codes held as nibbles, 4 bits a weight): only
// their names differ, so that the weights line says which GPTQ width took the W4 path.
enum class BlockFormat { none, q8_0, q4_0, q4_1, q5_0, q5_1, q4_k, q5_k, q6_k, awq4, gptq2, gptq3, gptq4, gptq8 };
const char* block_format_name(BlockFormat format);
// Bytes of one row of `cols` elements (whole blocks) in `format`.
size_t block_format_row_bytes(BlockFormat format, int64_t cols);
const char* dtype_name(DType dtype);
size_t dtype_size(DType dtype);

// A tensor still in the checkpoint's memory map. `data` stays valid while the checkpoint lives.
struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  std::string file;  // the file holding it, for error messages
  // When the checkpoint holds the tensor as quantized blocks: those blocks, rows in the view's
  // (Hugging Face) order. `data` is then still the tensor decoded to BF16, for every other user.
  BlockFormat block_format = BlockFormat::none;
  const uint8_t* blocks = nullptr;
  // With blocks: null, or the blocks' K order: block position k holds input k' = input_perm[k]
  // (act-order GPTQ, whose groups are contiguous only after sorting the inputs). The matrix then
  // multiplies activations gathered in that order; `data` stays in the tensor's own order.
  const int32_t* input_perm = nullptr;

  int64_t numel() const;
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
};

// Told how far loading has got: bytes of the checkpoint's tensors read (and packed) so far, and
// in all. Called on the loading thread; the last call has done_bytes == total_bytes.
using LoadProgress = std::function<void(size_t done_bytes, size_t total_bytes)>;

class Checkpoint {
 public:
  virtual ~Checkpoint() = default;
  virtual bool has(const std::string& name) const = 0;
  // Throws std::runtime_error naming the checkpoint and the tensor when it is absent.
  virtual TensorView tensor(const std::string& name) const = 0;
  virtual std::vector<std::string> tensor_names() const = 0;
  // The tensor's name, dtype, shape and blocks, `data` possibly null: for sizes and formats,
  // without materialising values that a checkpoint makes on demand (a GGUF file's quantized
  // tensors are decoded to BF16 only when tensor() asks).
  virtual TensorView tensor_header(const std::string& name) const { return tensor(name); }
  // tensor_header(name).bytes() without making anything (AWQ blocks are built by tensor_header).
  virtual size_t tensor_bytes(const std::string& name) const { return tensor_header(name).bytes(); }
  // The caller holds no more views of `name`: values made on demand may be freed (the packer
  // calls it layer by layer, so decoding a GGUF file never holds more than a layer in BF16).
  virtual void release(const std::string& name) const { (void)name; }
};

// A Hugging Face folder's weights: model.safetensors, or model.safetensors.index.json with its
// shards. Headers are validated when opened (JSON, dtypes, offsets inside the file, sizes matching
// shapes); every error names the file and, where there is one, the tensor.
std::unique_ptr<Checkpoint> open_safetensors_checkpoint(const std::filesystem::path& model_dir);

// IEEE half bits to single, exact for every input (subnormals, infinities, NaN payloads).
using kern::f16_to_f32;

// Converts any supported dtype to FP32 (out must hold view.numel() floats).
void convert_to_f32(const TensorView& view, float* out);
// Rows [first, first + rows) of a 2-D view's values (data, dtype), as a view of their own: a
// packing thread converts only the rows it packs. Blocks and input_perm are not carried over.
TensorView row_slice(const TensorView& view, int64_t first, int64_t rows);

}  // namespace slab
