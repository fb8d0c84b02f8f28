#include <stdexcept>

#include "runtime/gguf_file.h"
#include "tokenizer/gguf_tokenizer.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/sentencepiece_tokenizer.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/tokenizer_config.h"

namespace slab {

std::unique_ptr<Tokenizer> load_tokenizer(const std::filesystem::path& model_dir) {
  if (const std::optional<std::filesystem::path> gguf = gguf_model_file(model_dir)) {
    return tok::load_gguf_tokenizer(GgufFile::open(*gguf));
  }
  if (!std::filesystem::is_directory(model_dir)) {
    throw std::runtime_error(model_dir.string() + ": not a directory");
  }
  const tok::TokenizerConfig config = tok::read_tokenizer_config(model_dir / "tokenizer_config.json");
  // tokenizer.json is preferred: it carries the added tokens and the exact pipeline.
  if (std::filesystem::exists(model_dir / "tokenizer.json"))
    return tok::HfTokenizer::load(model_dir / "tokenizer.json", config);
  if (std::filesystem::exists(model_dir / "tokenizer.model")) {
    return tok::load_sentencepiece_tokenizer(model_dir / "tokenizer.model", config);
  }
  throw std::runtime_error(model_dir.string() + ": no tokenizer.json or tokenizer.model");
}

}  // namespace slab
