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

// Phi-3: fused attn_qkv and ffn_up (gate rows, then up rows) as in Hugging Face; partial rotary as
// rope.dimension_count; longrope as the rope_factors_long/short tensors with the original context
// length and attention factor as keys. The window is Hugging Face's sliding_window (0: none;
// llama.cpp itself ignores it, transformers applies it).
void phi3_fields(const GgufFile& f, json& j) {
  for (const char* name : {"blk.0.attn_qkv.bias", "blk.0.attn_output.bias", "blk.0.ffn_up.bias"}) {
    if (f.find_tensor(name) != nullptr) f.fail_tensor(name, "Phi-3 has no biases (not supported)");
  }
  if (f.find_tensor("blk.0.attn_qkv.weight") == nullptr) {
    f.fail_tensor("blk.0.attn_qkv.weight",
                  "missing (Phi-3 files keep Q, K and V fused; separate ones are not supported)");
  }
  if (const std::optional<int64_t> window = f.get_int("phi3.attention.sliding_window"); window && *window > 0)
    j["sliding_window"] = positive_int(f, "phi3.attention.sliding_window", std::nullopt);
  if (f.get_int("phi3.rope.scaling.original_context_length"))
    j["original_max_position_embeddings"] = positive_int(f, "phi3.rope.scaling.original_context_length", std::nullopt);
  const GgufTensorInfo* long_t = f.find_tensor("rope_factors_long.weight");
  const GgufTensorInfo* short_t = f.find_tensor("rope_factors_short.weight");
  const std::optional<double> attn_factor = f.get_float("phi3.rope.scaling.attn_factor");
  if (long_t == nullptr && short_t == nullptr) {
    if (attn_factor && std::fabs(*attn_factor - 1.0) > 1e-6)
      f.fail_key("phi3.rope.scaling.attn_factor", "given without rope_factors_long/short tensors (not supported)");
    return;
  }
  if (j.contains("rope_scaling")) f.fail_tensor("rope_factors_long.weight", "given together with other RoPE scaling");
  json rope = {{"rope_type", "longrope"}};
  for (const GgufTensorInfo* t : {long_t, short_t}) {
    const std::string name = t == long_t ? "rope_factors_long.weight" : "rope_factors_short.weight";
    if (t == nullptr) f.fail_tensor(name, "missing (longrope needs both the long and the short factors)");
    if (t->type != GgmlType::f32 || t->dims.size() != 1) f.fail_tensor(name, "expected a 1-D F32 tensor");
    std::vector<float> values(static_cast<size_t>(t->numel()));
    std::memcpy(values.data(), t->data, values.size() * sizeof(float));
    rope[t == long_t ? "long_factor" : "short_factor"] = values;
  }
  if (attn_factor) rope["attention_factor"] = *attn_factor;
  j["rope_scaling"] = std::move(rope);
}

// Gemma 3 as llama.cpp reads it: the window from attention.sliding_window (none: every layer
// global), the local/global layout from attention.sliding_window_pattern (a period, or one
// boolean per layer) or llama.cpp's fixed period 6 (5 local layers, then a global one), the local
// RoPE base from rope.freq_base_swa (default 10000, never scaled), the attention scale
// head_dim^-0.5, except hidden / heads for the 62-layer 27B (no key carries
// query_pre_attn_scalar). The embedding normalizer sqrt(hidden) is rounded to BF16 as
// transformers does for Google's BF16 checkpoints (llama.cpp keeps it FP32: 1e-4 relative apart;
// GGUF does not record the source dtype). The converter stores the norms as 1 + w; the checkpoint
// takes the 1 back off.
void gemma3_fields(const GgufFile& f, json& j) {
  const std::string a = "gemma3.";
  j["model_type"] = "gemma3_text";
  j["hidden_activation"] = "gelu_pytorch_tanh";
  j["dtype"] = "bfloat16";
  j.erase("hidden_act");
  const int layers = j["num_hidden_layers"].get<int>();
  json layer_types = json::array();
  const std::optional<int64_t> window = f.get_int(a + "attention.sliding_window");
  const std::string pattern_key = a + "attention.sliding_window_pattern";
  std::vector<bool> sliding(static_cast<size_t>(layers), false);
  if (window && *window > 0) {
    j["sliding_window"] = positive_int(f, a + "attention.sliding_window", std::nullopt);
    const GgufValue* v = f.find(pattern_key);
    if (v != nullptr && v->type == GgufValueType::array) {
      const GgufValue* arr = f.get_array(pattern_key, {GgufValueType::boolean});
      if (arr->items.size() != sliding.size())
        f.fail_key(pattern_key, "expected one boolean per layer (" + std::to_string(layers) + ")");
      for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = arr->items[i].integer != 0;
    } else {
      const std::optional<int64_t> period = f.get_int(pattern_key);
      const int64_t n = period.value_or(6);
      if (n < 0 || n > INT_MAX) f.fail_key(pattern_key, "expected a layer period, found " + std::to_string(n));
      for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = n == 0 || static_cast<int64_t>(i) % n < n - 1;
    }
  }
  for (bool s : sliding) layer_types.push_back(s ? "sliding_attention" : "full_attention");
  j["layer_types"] = std::move(layer_types);
  json global = {{"rope_type", "default"}, {"rope_theta", j["rope_theta"]}};
  if (j.contains("rope_scaling")) {
    global = j["rope_scaling"];
    global["rope_theta"] = j["rope_theta"];
    j.erase("rope_scaling");
  }
  j["rope_parameters"] = {
      {"full_attention", std::move(global)},
      {"sliding_attention",
       {{"rope_type", "default"}, {"rope_theta", f.get_float(a + "rope.freq_base_swa").value_or(10000.0)}}}};
  const int hidden = j["hidden_size"].get<int>(), heads = j["num_attention_heads"].get<int>();
  j["query_pre_attn_scalar"] = layers == 62 ? hidden / heads : j["head_dim"].get<int>();
  if (const auto cap = f.get_float(a + "final_logit_softcapping"); cap && *cap != 0.0)
    j["final_logit_softcapping"] = *cap;
  if (const auto cap = f.get_float(a + "attn_logit_softcapping"); cap && *cap != 0.0)
    f.fail_key(a + "attn_logit_softcapping", "attention logit soft-capping is not supported");
  j["attention_bias"] = f.find_tensor("blk.0.attn_q.bias") != nullptr;
}

// Mixtral (architecture llama with experts) and Qwen3-MoE as llama.cpp reads them: softmax over
// all experts, top expert_used_count, the picks' weights always renormalised to sum 1 (llama.cpp
// hard-codes it for both; GGUF keeps no norm_topk_prob, and the released Qwen3-MoE checkpoints
// set it). Mixtral's experts are feed_forward_length wide, Qwen3-MoE's expert_feed_forward_length
// (llama.cpp's fallback: feed_forward_length / expert_used_count). Every layer has experts. What
// llama.cpp does not run for these architectures, or would run otherwise than the
// keys say, is refused by name: shared experts, expert groups, another gating function, weights
// left unnormalised or scaled.
void moe_fields(const GgufFile& f, const std::string& arch, json& j) {
  const std::string a = arch + ".";
  const int count = positive_int(f, a + "expert_count", std::nullopt);
  const int used = positive_int(f, a + "expert_used_count", std::nullopt);
  // Key and the largest value that still means "none": Qwen2-MoE's and DeepSeek's shared experts,
  // DeepSeek V3's grouped routing.
  const std::pair<const char*, int64_t> unsupported[] = {
      {"expert_shared_count", 0}, {"expert_shared_feed_forward_length", 0}, {"expert_group_count", 1}};
  for (const auto& [key, none] : unsupported) {
    if (const auto v = f.get_int(a + key); v && *v > none)
      f.fail_key(a + key, std::to_string(*v) + ": shared experts and expert groups are not supported");
  }
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.find("_shexp") != std::string::npos) f.fail_tensor(t.name, "shared experts are not supported");
  }
  if (const auto gating = f.get_int(a + "expert_gating_func"); gating && *gating != 1)
    f.fail_key(a + "expert_gating_func", "only softmax routing (1) is supported, found " + std::to_string(*gating));
  if (const auto norm = f.get_bool(a + "expert_weights_norm"); norm && !*norm)
    f.fail_key(a + "expert_weights_norm", "unnormalised expert weights are not supported (llama.cpp renormalises)");
  if (const auto scale = f.get_float(a + "expert_weights_scale"); scale && *scale != 0.0 && *scale != 1.0)
    f.fail_key(a + "expert_weights_scale", "scaled expert weights are not supported");
  // Every layer routes (llama.cpp reads no dense layer in these architectures, and its converter
  // writes none for qwen3moe).
  for (int i = 0; i < j["num_hidden_layers"].get<int>(); ++i) {
    const std::string router = "blk." + std::to_string(i) + ".ffn_gate_inp.weight";
    if (f.find_tensor(router) == nullptr)
      f.fail_tensor(router, "missing (a layer without experts in a mixture-of-experts file is not supported)");
  }
  j["num_local_experts"] = count;
  j["num_experts_per_tok"] = used;
  if (arch == "llama") {
    j["model_type"] = "mixtral";
    if (f.find_tensor("blk.0.attn_q.bias") != nullptr)
      f.fail_tensor("blk.0.attn_q.bias", "Mixtral has no attention biases (not supported)");
    if (const auto width = f.get_int(a + "expert_feed_forward_length");
        width && *width != j["intermediate_size"].get<int>()) {
      f.fail_key(a + "expert_feed_forward_length", "differs from feed_forward_length (not supported for Mixtral)");
    }
    if (const int window = positive_int(f, a + "attention.sliding_window", INT_MAX); window != INT_MAX)
      j["sliding_window"] = window;
    return;
  }
  j["model_type"] = "qwen3_moe";
  j["norm_topk_prob"] = true;
  j["moe_intermediate_size"] =
      positive_int(f, a + "expert_feed_forward_length", std::max(1, j["intermediate_size"].get<int>() / used));
}

}  // namespace

ModelConfig gguf_model_config(const GgufFile& f) {
  const std::optional<std::string> arch_value = f.get_string("general.architecture");
  if (!arch_value) f.fail_key("general.architecture", "missing");
  const std::string& arch = *arch_value;
  if (arch != "llama" && arch != "qwen2" && arch != "qwen3" && arch != "qwen3moe" && arch != "phi3" &&
      arch != "gemma3") {
    f.fail_key("general.architecture",
               "unsupported architecture '" + arch +
                   "' (supported: llama, which includes Mistral and Mixtral, qwen2, qwen3, qwen3moe, phi3, gemma3)");
  }
  const std::string a = arch + ".";
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
  // A Qwen3-MoE without dense layers needs no dense width: the experts' stands in.
  std::optional<int> dense_width_fallback;
  if (const auto expert_width = f.get_int(a + "expert_feed_forward_length");
      arch == "qwen3moe" && expert_width && *expert_width > 0 && *expert_width <= INT_MAX)
    dense_width_fallback = static_cast<int>(*expert_width);
  j["intermediate_size"] = positive_int(f, a + "feed_forward_length", dense_width_fallback);
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
  const int rope_dims = positive_int(f, a + "rope.dimension_count", head_dim);
  if (arch == "phi3" && rope_dims < head_dim) {
    j["partial_rotary_factor"] = static_cast<double>(rope_dims) / head_dim;
  } else if (rope_dims != head_dim) {
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
  const bool experts = f.get_int(a + "expert_count").value_or(0) > 0;
  if (experts && arch != "llama" && arch != "qwen3moe")
    f.fail_key(a + "expert_count", "experts are supported in llama (Mixtral) and qwen3moe files only");
  if (arch == "llama" && experts) {
    moe_fields(f, arch, j);
  } else if (arch == "llama") {
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
  } else if (arch == "qwen3moe") {
    j["attention_bias"] = attention_bias;
    moe_fields(f, arch, j);
  } else if (arch == "phi3") {
    phi3_fields(f, j);
  } else if (arch == "gemma3") {
    gemma3_fields(f, j);
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
  ModelConfig config = parse_model_config(j, f.source() + " (GGUF metadata as config.json)");
  if (config.rotary_dim != rope_dims) {
    f.fail_key(a + "rope.dimension_count", std::to_string(rope_dims) + " rotated values of a head of " +
                                               std::to_string(head_dim) + " are not supported");
  }
  return config;
}

}  // namespace slab
