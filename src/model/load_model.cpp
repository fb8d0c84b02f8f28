// load_model: a Hugging Face folder (config.json, generation_config.json, safetensors) or a GGUF
// file to a Model.
#include <algorithm>
#include <map>
#include <stdexcept>

#include "model/prequantized_checkpoint.h"
#include "model/gguf_model.h"
#include "model/model.h"

namespace slab {

Model load_model_metadata(const std::filesystem::path& model_dir) {
  namespace fs = std::filesystem;
  if (const std::optional<fs::path> gguf = gguf_model_file(model_dir)) {
    // GGUF has no generation_config.json: greedy defaults, end tokens from its metadata.
    Model model;
    model.config = gguf_model_config(GgufFile::open(*gguf));
    return model;
  }
  if (!fs::is_directory(model_dir)) {
    throw std::runtime_error(model_dir.string() + ": not a directory (expected a Hugging Face model folder)");
  }
  const fs::path config_path = model_dir / "config.json";
  if (!fs::exists(config_path)) {
    throw std::runtime_error(model_dir.string() + ": no config.json (expected a Hugging Face model folder)");
  }
  Model model;
  model.config = load_model_config(config_path);
  model.generation = load_generation_config(model_dir / "generation_config.json");

  // generation_config.json may name more end tokens than config.json (e.g. chat models' <|eot|>).
  ModelConfig& c = model.config;
  for (int id : model.generation.eos_token_ids) {
    if (id >= c.vocab_size) {
      throw std::runtime_error((model_dir / "generation_config.json").string() + ": field 'eos_token_id': token id " +
                               std::to_string(id) + " is outside the vocabulary (" + std::to_string(c.vocab_size) +
                               ")");
    }
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      c.eos_token_ids.push_back(id);
    }
  }
  if (c.bos_token_id < 0 && model.generation.bos_token_id >= 0) {
    c.bos_token_id = model.generation.bos_token_id;
  }

  return model;
}

std::unique_ptr<Checkpoint> open_model_checkpoint(const std::filesystem::path& model) {
  if (const std::optional<std::filesystem::path> gguf = gguf_model_file(model)) return open_gguf_checkpoint(*gguf);
  std::unique_ptr<Checkpoint> checkpoint = open_safetensors_checkpoint(model);
  // An AWQ or GPTQ folder's projections are read through their qweight/qzeros/scales (config.json
  // says).
  if (const std::filesystem::path config = model / "config.json"; std::filesystem::exists(config)) {
    const PrequantizedConfig q = load_model_config(config).prequantized;
    if (q.method != PrequantizedConfig::Method::none) return wrap_prequantized_checkpoint(std::move(checkpoint), q);
  }
  return checkpoint;
}

std::string describe_model_weights(const std::filesystem::path& model) {
  if (const std::optional<std::filesystem::path> gguf = gguf_model_file(model)) {
    const GgufFile file = GgufFile::open(*gguf);
    return "GGUF v" + std::to_string(file.version()) + ": " + describe_gguf_tensor_types(file);
  }
  const auto checkpoint = open_safetensors_checkpoint(model);
  std::map<std::string, size_t> counts;
  for (const std::string& name : checkpoint->tensor_names()) ++counts[dtype_name(checkpoint->tensor_header(name).dtype)];
  std::string out;
  for (const auto& [type, count] : counts) out += (out.empty() ? "" : ", ") + type + " x " + std::to_string(count);
  return "safetensors: " + out;
}

Model load_model(const std::filesystem::path& model_dir) {
  Model model = load_model_metadata(model_dir);
  const auto checkpoint = open_model_checkpoint(model_dir);
  model.weights = load_model_weights(model.config, *checkpoint);
  return model;
}

}  // namespace slab
