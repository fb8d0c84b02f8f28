// GGUF architecture metadata ({arch}.block_count, {arch}.attention.head_count, ...) to a
// ModelConfig. The keys are turned into the config.json fields they stand for and handed to
// parse_model_config, so a GGUF model follows exactly the rules (and checks) of its Hugging Face
// twin; what config.json states as flags, GGUF states by which tensors exist (biases, q/k norms,
// the output matrix).
#include <climits>
#include <cstdint>
#include <map>

#include <nlohmann/json.hpp>

#include "model/gguf_model.h"

namespace slab {
namespace {

using nlohmann::json;

int positive_int(const GgufFile& f, const std::string& key, std::optional<int> fallback) {
  const std::optional<int64_t> v = f.get_int(key);
  if (!v) {
    if (fallback) return *fallback;
    f.fail_key(key, "missing (expected a positive integer)");
  }
  if (*v <= 0 || *v > INT_MAX) f.fail_key(key, "expected a positive integer, found " + std::to_string(*v));
  return static_cast<int>(*v);
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::optional<std::string> arch_value = f.get_string("general.architecture");
  if (!arch_value) f.fail_key("general.architecture", "missing");
  const std::string& arch = *arch_value;
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3") {
    f.fail_key("general.architecture",
               "unsupported architecture '" + arch + "' (supported: llama, which includes Mistral, qwen2, qwen3)");
  }
  const std::string a = arch + ".";
  if (const auto parts = f.get_int("split.count"); parts && *parts > 1) {
    f.fail_key("split.count", "the model is split over " + std::to_string(*parts) +
                                  " files, which is not supported yet (merge them into one file first)");
  }
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) f.fail_tensor("token_embd.weight", "missing");
  if (embd->dims.size() != 2) f.fail_tensor("token_embd.weight", "expected 2 dimensions");
  if (f.find_tensor("rope_freqs.weight") != nullptr) {
    f.fail_tensor("rope_freqs.weight",
                  "per-dimension RoPE frequency factors (Llama 3.1-style scaling) are not supported yet");
  }

  json j;
  j["model_type"] = arch;
  j["vocab_size"] = embd->dims[1];
  j["hidden_size"] = positive_int(f, a + "embedding_length", std::nullopt);
  j["intermediate_size"] = positive_int(f, a + "feed_forward_length", std::nullopt);
  j["num_hidden_layers"] = positive_int(f, a + "block_count", std::nullopt);
  const int heads = positive_int(f, a + "attention.head_count", std::nullopt);
  j["num_attention_heads"] = heads;
  j["num_key_value_heads"] = positive_int(f, a + "attention.head_count_kv", heads);
  const int hidden = j["hidden_size"].get<int>();
  const int head_dim = positive_int(f, a + "attention.key_length", hidden / heads);
  if (positive_int(f, a + "attention.value_length", head_dim) != head_dim) {
    f.fail_key(a + "attention.value_length", "differs from the key length " + std::to_string(head_dim) + " (not supported)");
  }
  j["head_dim"] = head_dim;
  if (positive_int(f, a + "rope.dimension_count", head_dim) != head_dim) {
    f.fail_key(a + "rope.dimension_count", "partial rotary embeddings are not supported (head size " +
                                               std::to_string(head_dim) + ")");
  }
  j["rms_norm_eps"] = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (f.get_int(a + "context_length")) j["max_position_embeddings"] = positive_int(f, a + "context_length", std::nullopt);
  j["rope_theta"] = f.get_float(a + "rope.freq_base").value_or(10000.0);
  const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
  const std::optional<double> factor = f.get_float(a + "rope.scaling.factor");
  const std::optional<double> legacy_linear = f.get_float(a + "rope.scale_linear");
  if (scaling == "linear" || (scaling == "none" && legacy_linear && *legacy_linear != 1.0)) {
    j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", scaling == "linear" ? factor.value_or(1.0) : *legacy_linear}};
  } else if (scaling != "none") {
    f.fail_key(a + "rope.scaling.type", "unsupported RoPE scaling type '" + scaling + "' (supported: none, linear)");
  }
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = f.find_tensor("output.weight") == nullptr;
  const bool attention_bias = f.find_tensor("blk.0.attn_q.bias") != nullptr;
  if (arch == "llama") {
    j["attention_bias"] = attention_bias;
    j["mlp_bias"] = f.find_tensor("blk.0.ffn_gate.bias") != nullptr;
    // Mistral's GGUF files are llama ones; the window is what tells them apart.
    const int window = positive_int(f, a + "attention.sliding_window", INT_MAX);
    if (window != INT_MAX) {
      j["model_type"] = "mistral";
      j["sliding_window"] = window;
    }
  } else if (arch == "qwen3") {
    j["attention_bias"] = attention_bias;
  }

  json eos = json::array();
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = f.get_int(key)) {
      if (*id == -1 || *id == UINT32_MAX) continue;  // how writers say "none"
      if (*id < 0 || *id > INT_MAX) f.fail_key(key, "expected a token id, found " + std::to_string(*id));
      eos.push_back(*id);
    }
  }
  j["eos_token_id"] = eos;
  if (auto bos = f.get_int("tokenizer.ggml.bos_token_id"); bos && *bos != -1 && *bos != UINT32_MAX) {
    if (*bos < 0 || *bos > INT_MAX) f.fail_key("tokenizer.ggml.bos_token_id", "expected a token id, found " + std::to_string(*bos));
    j["bos_token_id"] = *bos;
  }
  return parse_model_config(j, f.source() + " (GGUF metadata as config.json)");
}

}  // namespace slab
