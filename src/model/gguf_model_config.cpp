// GGUF architecture metadata ({arch}.block_count, {arch}.attention.head_count, ...) to a
// ModelConfig. The keys are turned into the config.json fields they stand for and handed to
// parse_model_config, so a GGUF model follows exactly the rules (and checks) of its Hugging Face
// twin; what config.json states as flags, GGUF states by which tensors exist (biases, q/k norms,
// the output matrix).
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <numbers>

#include <nlohmann/json.hpp>

#include "kernels/reference.h"
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

// Llama 3.1-style RoPE scaling arrives as rope_freqs.weight: for each of the head_dim / 2
// frequencies, the divisor the converter computed from (factor, low_freq_factor,
// high_freq_factor, original_max_position_embeddings). The engine takes those four parameters,
// so they are recovered: `factor` is the largest divisor; each frequency in the blended band
// gives smooth = (1/r - 1/factor) / (1 - 1/factor) = (orig / wavelength - low) / (high - low),
// a line in 1 / wavelength. Two or more band frequencies fix the line; with fewer, Llama 3's own
// low = 1, high = 4 are assumed. Whatever is recovered must reproduce every divisor through the
// engine's own frequency computation, or the file is refused.
json llama3_scaling_from_divisors(const GgufFile& f, double theta, int head_dim) {
  const std::string name = "rope_freqs.weight";
  const GgufTensorInfo* t = f.find_tensor(name);
  const size_t half = static_cast<size_t>(head_dim / 2);
  if (t->type != GgmlType::f32 || static_cast<size_t>(t->numel()) != half) {
    f.fail_tensor(name, "expected " + std::to_string(half) + " F32 frequency divisors");
  }
  std::vector<float> divisors(half);
  std::memcpy(divisors.data(), t->data, half * sizeof(float));
  ref::RopeFrequencyParams base;
  base.theta = static_cast<float>(theta);
  std::vector<float> inv_freq(half);
  ref::rope_inverse_frequencies(inv_freq.data(), head_dim, base);
  float factor = 0.0f;
  for (float r : divisors) {
    if (!std::isfinite(r) || r <= 0.0f) f.fail_tensor(name, "holds a divisor that is not a positive number");
    factor = std::max(factor, r);
  }
  if (factor <= 1.0f + 1e-6f) return nullptr;  // nothing is scaled
  // (1 / wavelength, smooth) of the band frequencies.
  std::vector<std::pair<double, double>> band;
  for (size_t i = 0; i < half; ++i) {
    const double r = divisors[i];
    if (std::fabs(r - 1.0) > 1e-6 && std::fabs(r - factor) > 1e-6 * factor) {
      band.emplace_back(inv_freq[i] / (2.0 * std::numbers::pi), (1.0 / r - 1.0 / factor) / (1.0 - 1.0 / factor));
    }
  }
  double low = 1.0, high = 4.0, orig = 8192.0;
  if (band.size() >= 2) {
    // smooth = a / wavelength - b through the two band ends; orig / (high - low) = a, low / (high - low) = b.
    const auto& [x0, s0] = band.front();
    const auto& [x1, s1] = band.back();
    const double a = (s1 - s0) / (x1 - x0), b = a * x0 - s0;
    if (!(a > 0.0) || !(b > 0.0)) f.fail_tensor(name, "frequency divisors that no Llama 3 scaling produces");
    orig = std::round(a / b);
    low = b * orig / a;
    high = low + orig / a;
  } else if (band.size() == 1) {
    const auto& [x, s] = band.front();
    orig = std::round((low + s * (high - low)) / x);
  } else {
    // No band: any orig between the unscaled and the scaled wavelengths will do.
    double longest_kept = 0.0, shortest_scaled = INFINITY;
    for (size_t i = 0; i < half; ++i) {
      const double wavelength = 2.0 * std::numbers::pi / inv_freq[i];
      if (divisors[i] == 1.0f)
        longest_kept = std::max(longest_kept, wavelength);
      else
        shortest_scaled = std::min(shortest_scaled, wavelength);
    }
    // kept: wavelength < orig / high; scaled: wavelength > orig / low. Halfway between the bounds.
    orig = std::floor((std::max(longest_kept * high, 1.0) + std::min(shortest_scaled * low, 1e9)) / 2.0);
  }
  ref::RopeFrequencyParams scaled = base;
  scaled.scaling = ref::RopeScalingKind::llama3;
  scaled.factor = factor;
  scaled.low_freq_factor = static_cast<float>(low);
  scaled.high_freq_factor = static_cast<float>(high);
  scaled.original_max_position_embeddings = orig >= 1.0 && orig <= INT_MAX ? static_cast<int>(orig) : 1;
  std::vector<float> got(half);
  ref::rope_inverse_frequencies(got.data(), head_dim, scaled);
  for (size_t i = 0; i < half; ++i) {
    const float want = inv_freq[i] / divisors[i];
    if (!(std::fabs(got[i] - want) <= 1e-5f * want)) {
      f.fail_tensor(name, "frequency " + std::to_string(i) + ": no Llama 3 scaling reproduces its divisor " +
                              std::to_string(divisors[i]) + " (per-dimension factors are not supported otherwise)");
    }
  }
  return {{"rope_type", "llama3"},
          {"factor", factor},
          {"low_freq_factor", low},
          {"high_freq_factor", high},
          {"original_max_position_embeddings", scaled.original_max_position_embeddings}};
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
  // Mixtral converts to architecture llama with experts: the GGUF reader maps no expert tensors.
  if (const auto experts = f.get_int(a + "expert_count"); experts && *experts > 0) {
    f.fail_key(a + "expert_count", std::to_string(*experts) +
                                       " experts: mixture-of-experts GGUF files are not supported (use the Hugging "
                                       "Face safetensors folder)");
  }
  if (const auto parts = f.get_int("split.count"); parts && *parts > 1) {
    f.fail_key("split.count", "the model is split over " + std::to_string(*parts) +
                                  " files, which is not supported yet (merge them into one file first)");
  }
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  if (embd == nullptr) f.fail_tensor("token_embd.weight", "missing");
  if (embd->dims.size() != 2) f.fail_tensor("token_embd.weight", "expected 2 dimensions");

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
    f.fail_key(a + "attention.value_length",
               "differs from the key length " + std::to_string(head_dim) + " (not supported)");
  }
  j["head_dim"] = head_dim;
  if (positive_int(f, a + "rope.dimension_count", head_dim) != head_dim) {
    f.fail_key(a + "rope.dimension_count",
               "partial rotary embeddings are not supported (head size " + std::to_string(head_dim) + ")");
  }
  j["rms_norm_eps"] = f.get_float(a + "attention.layer_norm_rms_epsilon").value_or(1e-5);
  if (f.get_int(a + "context_length"))
    j["max_position_embeddings"] = positive_int(f, a + "context_length", std::nullopt);
  j["rope_theta"] = f.get_float(a + "rope.freq_base").value_or(10000.0);
  const std::string scaling = f.get_string(a + "rope.scaling.type").value_or("none");
  const std::optional<double> factor = f.get_float(a + "rope.scaling.factor");
  const std::optional<double> legacy_linear = f.get_float(a + "rope.scale_linear");
  if (scaling == "linear" || (scaling == "none" && legacy_linear && *legacy_linear != 1.0)) {
    j["rope_scaling"] = {{"rope_type", "linear"},
                         {"factor", scaling == "linear" ? factor.value_or(1.0) : *legacy_linear}};
  } else if (scaling != "none") {
    f.fail_key(a + "rope.scaling.type", "unsupported RoPE scaling type '" + scaling + "' (supported: none, linear)");
  }
  if (f.find_tensor("rope_freqs.weight") != nullptr) {
    if (j.contains("rope_scaling")) f.fail_tensor("rope_freqs.weight", "given together with linear RoPE scaling");
    json llama3 = llama3_scaling_from_divisors(f, j["rope_theta"].get<double>(), head_dim);
    if (!llama3.is_null()) j["rope_scaling"] = std::move(llama3);
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
  for (const char* key :
       {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    if (auto id = f.get_int(key)) {
      if (*id == -1 || *id == UINT32_MAX) continue;  // how writers say "none"
      if (*id < 0 || *id > INT_MAX) f.fail_key(key, "expected a token id, found " + std::to_string(*id));
      eos.push_back(*id);
    }
  }
  j["eos_token_id"] = eos;
  if (auto bos = f.get_int("tokenizer.ggml.bos_token_id"); bos && *bos != -1 && *bos != UINT32_MAX) {
    if (*bos < 0 || *bos > INT_MAX)
      f.fail_key("tokenizer.ggml.bos_token_id", "expected a token id, found " + std::to_string(*bos));
    j["bos_token_id"] = *bos;
  }
  return parse_model_config(j, f.source() + " (GGUF metadata as config.json)");
}

}  // namespace slab
