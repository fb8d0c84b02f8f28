// libFuzzer: arbitrary bytes through the GGUF reader, and what parses through the model config,
// the checkpoint (name mapping, Q/K row order, block decoding) and the tokenizer builders.
// std::runtime_error (a refused file) is a fine answer; a crash, an over-read (ASan), a hang or
// an unbounded allocation is a bug.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include <spdlog/spdlog.h>

#include "model/gguf_model.h"
#include "runtime/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  spdlog::set_level(spdlog::level::off);  // the dequantization warning would dominate the run time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace slab;
  try {
    GgufFile file = GgufFile::parse(data, size, "fuzz.gguf");
    try {
      (void)tok::load_gguf_tokenizer(file);
    } catch (const std::runtime_error&) {
    }
    try {
      (void)gguf_model_config(file);
      const auto checkpoint = open_gguf_checkpoint(std::move(file));
      // Every tensor the loader could ask for, converted: each byte must lie inside the input.
      for (const std::string& name : checkpoint->tensor_names()) {
        const TensorView view = checkpoint->tensor(name);
        std::vector<float> values(static_cast<size_t>(view.numel()));
        convert_to_f32(view, values.data());
      }
    } catch (const std::runtime_error&) {
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
