#pragma once
// A model loaded for serving: what it is (ModelDescription), its tokenizer, its chat template,
// the token ids that end generation, and its running Engine. One call loads it all.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "slabserve/engine.h"
#include "slabserve/options.h"
#include "slabserve/tokenizer.h"

namespace slab::api {

// What the log and /v1/models say about the model and how it runs.
struct ModelDescription {
  std::string path;          // as given in LoadOptions::model
  std::string architecture;  // config model_type: llama, mistral, qwen2, qwen3
  std::string weights;       // container and tensor types: "safetensors: BF16 x 201", "GGUF v3: Q4_K x 97, ..."
  int num_layers = 0;
  int hidden_size = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;  // the model's own context
  int bos_token_id = -1;            // the config's; -1 when it names none
  std::string compute;              // e.g. "bf16 avx512_bf16 kernels, 2 threads"
  std::string placement;            // threads and their pinning; where memory is bound
  size_t weight_bytes = 0;          // held by the engine, packed
  std::string weight_format;        // how the projections run: "BF16 ...", "W8 per channel ...", "W4 g32 ..."
  bool quantized = false;           // some projections run on the INT8/INT4 kernels
  double load_seconds = 0.0;        // reading and packing the weights
  // The engine as started.
  int max_model_len = 0;
  int kv_cache_blocks = 0;
  int kv_block_size = 0;
  size_t kv_cache_bytes = 0;
  std::string kv_dtype;  // "bf16" or "float32"
  bool prefix_caching = true;
  int max_num_seqs = 0;
  int max_num_batched_tokens = 0;
  std::string speculative;  // "off" or the proposer and its settings, for logs
  // generation_config.json's defaults (greedy when it does not ask for sampling).
  SamplingParams default_sampling;
};

// A chat template failed to render (the message says why; raised_by_template when the
// template's own raise_exception refused the input).
struct ChatTemplateError : std::runtime_error {
  ChatTemplateError(const std::string& message, bool raised)
      : std::runtime_error(message), raised_by_template(raised) {}
  bool raised_by_template = false;
};

class LoadedModel {
 public:
  // Reads config, tokenizer and chat template first (the cheap parts that can fail), then
  // loads and packs the weights and starts the engine. Throws std::invalid_argument for bad
  // options (dtype, block size, placement, max_model_len) and std::runtime_error naming the
  // file and field at fault for a model that cannot be loaded.
  static std::unique_ptr<LoadedModel> load(const LoadOptions& options);
  ~LoadedModel();
  LoadedModel(const LoadedModel&) = delete;
  LoadedModel& operator=(const LoadedModel&) = delete;

  const ModelDescription& description() const;
  const Tokenizer& tokenizer() const;
  // Token ids that end generation: config.json, generation_config.json and the tokenizer's EOS.
  const std::vector<int32_t>& eos_token_ids() const;

  bool has_chat_template() const;
  // The chat template's Jinja text ("" without one).
  const std::string& chat_template_source() const;
  // Renders a conversation as transformers' apply_chat_template does (messages, tools or null,
  // add_generation_prompt, the tokenizer's bos_token/eos_token, extra kwargs). Throws
  // ChatTemplateError when rendering fails, std::logic_error without a template.
  std::string render_chat(const nlohmann::ordered_json& messages, const nlohmann::ordered_json& tools,
                          bool add_generation_prompt, const nlohmann::ordered_json& kwargs,
                          std::time_t now = std::time(nullptr)) const;

  // The engine is a service shared by whoever holds the model: submitting through a const
  // model is fine (the engine is thread-safe).
  Engine& engine() const;

 private:
  struct Parts;
  explicit LoadedModel(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

// Names of the chat templates built in (chatml, llama2, ...), and the same as one
// comma-separated string for messages.
std::vector<std::string> builtin_chat_template_names();
std::string builtin_chat_template_list();
// Whether LoadOptions::chat_template would find `name_or_file`: a built-in name or a file.
bool chat_template_option_exists(const std::string& name_or_file);

}  // namespace slab::api
