// libFuzzer: arbitrary bytes through the GGUF reader. std::runtime_error (a refused file) is a
// fine answer; a crash, an over-read (ASan), a hang or an unbounded allocation is a bug.
#include <cstddef>
#include <cstdint>
#include <stdexcept>

#include "runtime/gguf_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const slab::GgufFile file = slab::GgufFile::parse(data, size, "fuzz.gguf");
    // Touch every tensor's bytes: each must lie inside the input.
    volatile uint8_t sink = 0;
    for (const auto& t : file.tensors()) {
      if (t.bytes != 0) sink = static_cast<uint8_t>(sink ^ t.data[0] ^ t.data[t.bytes - 1]);
    }
  } catch (const std::runtime_error&) {
  }
  return 0;
}
