// config.json / generation_config.json parsing. The rules follow what Hugging Face transformers
// does with each field for the four supported families, so that a checkpoint means here what it
// means there:
//  - llama:   attention_bias puts a bias on q, k, v and o; mlp_bias on gate, up and down.
//  - mistral: no biases at all (attention_bias is ignored by transformers); sliding_window, when
//             not null, applies to every layer.
//  - qwen2:   q, k, v always carry a bias, o never; no MLP bias. sliding_window only counts when
//             use_sliding_window is true, and then only on layers >= max_window_layers (or as
//             layer_types says).
//  - qwen3:   per-head RMSNorm of q and k; attention_bias on q, k, v and o; head_dim defaults to
//             128 (not hidden/heads) when absent; sliding window as qwen2.
//  - phi3:    (Phi-3, Phi-3.5, Phi-4) no biases; fused qkv_proj and gate_up_proj tensors;
//             partial_rotary_factor; RoPE type default or longrope ("su" and "yarn" are read as
//             longrope, as transformers does), whose original_max_position_embeddings is the
//             top-level field (default 4096) whatever rope_scaling says; sliding_window, when not
//             null, applies to every layer.
//  - mixtral: mistral's attention (no biases, sliding_window on every layer when not null, RoPE
//             base 1e6 by default); every layer a mixture of num_local_experts experts of
//             intermediate_size, top num_experts_per_tok always renormalised.
//  - qwen3_moe: qwen3's attention (q/k norm, attention_bias; head_dim defaults to hidden/heads
//             here); sliding_window on every layer when use_sliding_window; num_experts (saved
//             as num_local_experts by transformers 5) experts of moe_intermediate_size, top
//             num_experts_per_tok renormalised when norm_topk_prob; layer i is sparse unless it
//             is in mlp_only_layers or (i + 1) % decoder_sparse_step != 0 (then a dense MLP of
//             intermediate_size).
//  - gemma3_text (and gemma3's text_config): gelu_pytorch_tanh gated MLP, RMSNorm with (1 + w),
//             four norms a layer, q/k norm, embeddings times sqrt(hidden) rounded to the config's
//             dtype, layer_types (or sliding_window_pattern, default 6) choosing local (sliding,
//             RoPE base rope_local_base_freq) and global layers (rope_theta and rope_scaling),
//             attention scale query_pre_attn_scalar^-0.5, final_logit_softcapping; head_dim
//             defaults to 256 and embeddings are tied unless said otherwise.
// transformers 5 writes RoPE settings as `rope_parameters` {rope_type, rope_theta, ...}; older
// files use top-level `rope_theta` plus `rope_scaling`. Both are read.
#include "model/model_config.h"

#include "kernels/bf16.h"
#include "runtime/file_io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace slab {
namespace {

using nlohmann::json;

[[noreturn]] void fail(const std::string& source, const std::string& field, const std::string& what) {
  throw std::runtime_error(source + ": field '" + field + "': " + what);
}

bool present(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

// An integer field. Absent or null gives `fallback`; required fields pass std::nullopt-like
// behaviour through `required`.
int get_int(const json& j, const char* key, const std::string& source, bool required, int fallback, bool positive) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) {
    if (required) fail(source, key, positive ? "expected a positive integer (missing)" : "missing");
    return fallback;
  }
  bool ok = it->is_number_integer();
  long long v = 0;
  if (ok) {
    if (it->is_number_unsigned()) {
      auto u = it->get<unsigned long long>();
      ok = u <= static_cast<unsigned long long>(std::numeric_limits<int>::max());
      v = static_cast<long long>(u);
    } else {
      v = it->get<long long>();
      ok = v >= std::numeric_limits<int>::min() && v <= std::numeric_limits<int>::max();
    }
  }
  if (!ok || (positive && v <= 0)) {
    fail(source, key,
         std::string(positive ? "expected a positive integer" : "expected an integer") + ", found " + it->dump());
  }
  return static_cast<int>(v);
}

float get_float(const json& j, const char* key, const std::string& source, float fallback, bool positive,
                const std::string& field_prefix = "") {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_number()) fail(source, field_prefix + key, "expected a number, found " + it->dump());
  double v = it->get<double>();
  if (!std::isfinite(v) || (positive && v <= 0.0)) {
    fail(source, field_prefix + key,
         std::string(positive ? "expected a positive number" : "expected a finite number") + ", found " + it->dump());
  }
  return static_cast<float>(v);
}

bool get_bool(const json& j, const char* key, const std::string& source, bool fallback) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) fail(source, key, "expected true or false, found " + it->dump());
  return it->get<bool>();
}

// eos_token_id: an integer or a list of integers (or null).
std::vector<int> get_token_ids(const json& j, const char* key, const std::string& source) {
  std::vector<int> ids;
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return ids;
  auto add = [&](const json& v) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() > std::numeric_limits<int>::max()) {
      fail(source, key, "expected a token id or a list of token ids, found " + it->dump());
    }
    int id = static_cast<int>(v.get<long long>());
    if (std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  if (it->is_array()) {
    for (const auto& v : *it) add(v);
  } else {
    add(*it);
  }
  return ids;
}

// rotary_dim = int(head_dim * partial_rotary_factor), as transformers truncates it.
void set_rotary_dim(float partial, const std::string& field, const std::string& source, ModelConfig& config) {
  if (partial > 1.0f) fail(source, field, "must be in (0, 1], found " + std::to_string(partial));
  const int dim = static_cast<int>(static_cast<double>(config.head_dim) * static_cast<double>(partial));
  if (dim <= 0 || dim % 2 != 0) {
    fail(source, field,
         "gives " + std::to_string(dim) + " rotary dimensions of head_dim " + std::to_string(config.head_dim) +
             " (must be a positive even number)");
  }
  config.rotary_dim = dim;
}

std::vector<float> factor_list(const json& params, const char* key, const std::string& prefix,
                               const std::string& source, size_t want) {
  auto it = params.find(key);
  if (it == params.end() || !it->is_array() || it->size() != want) {
    fail(source, prefix + key,
         "expected a list of " + std::to_string(want) + " positive numbers (rotary_dim / 2), found " +
             (it == params.end() ? std::string("nothing") : it->dump()));
  }
  std::vector<float> out;
  for (const json& v : *it) {
    if (!v.is_number() || !(v.get<double>() > 0.0) || !std::isfinite(v.get<double>())) {
      fail(source, prefix + key, "expected positive numbers, found " + v.dump());
    }
    out.push_back(static_cast<float>(v.get<double>()));
  }
  return out;
}

// longrope (transformers' _compute_longrope_parameters): per-frequency short and long divisors;
// factor defaults to max_position_embeddings / original_max_position_embeddings and the
// attention factor to sqrt(1 + ln(factor) / ln(original)) when factor > 1.
void parse_longrope(const json& j, const json& params, const std::string& prefix, const std::string& source,
                    ModelConfig& config) {
  RopeScaling& rs = config.rope_scaling;
  rs.type = RopeScalingType::longrope;
  const size_t half = static_cast<size_t>(config.rotary_dim / 2);
  rs.short_factor = factor_list(params, "short_factor", prefix, source, half);
  rs.long_factor = factor_list(params, "long_factor", prefix, source, half);
  int orig = 0;
  if (present(j, "original_max_position_embeddings")) {
    orig = get_int(j, "original_max_position_embeddings", source, true, 0, true);
  } else if (config.model_type == "phi3") {
    orig = 4096;  // Phi3Config's default, which transformers prefers to rope_scaling's own
  } else {
    orig = get_int(params, "original_max_position_embeddings", source, false, config.max_position_embeddings, true);
  }
  rs.original_max_position_embeddings = orig;
  const double factor = present(params, "factor")
                            ? static_cast<double>(get_float(params, "factor", source, 1.0f, true, prefix))
                            : static_cast<double>(config.max_position_embeddings) / static_cast<double>(orig);
  rs.factor = static_cast<float>(factor);
  if (present(params, "attention_factor")) {
    rs.attention_factor = get_float(params, "attention_factor", source, 1.0f, true, prefix);
  } else {
    rs.attention_factor =
        factor <= 1.0 ? 1.0f
                      : static_cast<float>(std::sqrt(1.0 + std::log(factor) / std::log(static_cast<double>(orig))));
  }
}

// Reads the RoPE frequency settings into `config` from either spelling.
void parse_rope(const json& j, const std::string& source, ModelConfig& config, float default_theta = 10000.0f) {
  float theta = get_float(j, "rope_theta", source, default_theta, true);
  const json* params = nullptr;
  std::string field;
  if (present(j, "rope_parameters")) {
    params = &j["rope_parameters"];
    field = "rope_parameters";
  } else if (present(j, "rope_scaling")) {
    params = &j["rope_scaling"];
    field = "rope_scaling";
  }
  config.rope_theta = theta;
  config.rope_scaling = RopeScaling{};
  float partial = get_float(j, "partial_rotary_factor", source, 1.0f, true);
  std::string partial_field = "partial_rotary_factor";
  const std::string prefix = field + ".";
  if (params != nullptr) {
    if (!params->is_object()) fail(source, field, "expected an object or null, found " + params->dump());
    config.rope_theta = get_float(*params, "rope_theta", source, theta, true, prefix);
    if (present(*params, "partial_rotary_factor")) {
      partial = get_float(*params, "partial_rotary_factor", source, 1.0f, true, prefix);
      partial_field = prefix + "partial_rotary_factor";
    }
  }
  set_rotary_dim(partial, partial_field, source, config);
  if (params == nullptr) return;
  std::string type = "default";
  const char* type_key = present(*params, "rope_type") ? "rope_type" : "type";
  if (present(*params, type_key)) {
    const json& t = (*params)[type_key];
    if (!t.is_string()) fail(source, prefix + type_key, "expected a string, found " + t.dump());
    type = t.get<std::string>();
  } else if (!params->empty() && !present(*params, "rope_theta") && !present(*params, "factor")) {
    // Nested per-layer-type parameters ({"full_attention": {...}, ...}).
    fail(source, field, "per-layer RoPE parameters are not supported");
  }
  if (config.model_type == "phi3" && (type == "su" || type == "yarn")) type = "longrope";
  if (type == "default") return;
  RopeScaling& rs = config.rope_scaling;
  if (type == "longrope") {
    parse_longrope(j, *params, prefix, source, config);
    return;
  }
  if (type == "linear") {
    rs.type = RopeScalingType::linear;
  } else if (type == "llama3") {
    rs.type = RopeScalingType::llama3;
  } else {
    fail(source, prefix + type_key,
         "unsupported RoPE scaling type '" + type + "' (supported: default, linear, llama3, longrope)");
  }
  if (!present(*params, "factor")) fail(source, prefix + "factor", "missing");
  rs.factor = get_float(*params, "factor", source, 1.0f, true, prefix);
  if (rs.type == RopeScalingType::llama3) {
    rs.low_freq_factor = get_float(*params, "low_freq_factor", source, 1.0f, true, prefix);
    rs.high_freq_factor = get_float(*params, "high_freq_factor", source, 4.0f, true, prefix);
    if (rs.high_freq_factor <= rs.low_freq_factor) {
      fail(source, prefix + "high_freq_factor", "must be greater than low_freq_factor");
    }
    int orig = config.max_position_embeddings;
    auto it = params->find("original_max_position_embeddings");
    if (it != params->end() && !it->is_null()) {
      if (!it->is_number_integer() || it->get<long long>() <= 0 ||
          it->get<long long>() > std::numeric_limits<int>::max()) {
        fail(source, prefix + "original_max_position_embeddings", "expected a positive integer, found " + it->dump());
      }
      orig = static_cast<int>(it->get<long long>());
    }
    rs.original_max_position_embeddings = orig;
  }
}

// qwen2/qwen3: which layers use the window. The engine supports a window on all layers or none.
void parse_qwen_sliding_window(const json& j, const std::string& source, ModelConfig& config) {
  if (!get_bool(j, "use_sliding_window", source, false)) return;  // transformers drops the window
  int window = get_int(j, "sliding_window", source, false, 0, true);
  if (window == 0) return;
  std::vector<bool> sliding(static_cast<size_t>(config.num_layers));
  if (present(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || lt.size() != sliding.size()) {
      fail(source, "layer_types",
           "expected a list of " + std::to_string(config.num_layers) + " layer types, found " + lt.dump());
    }
    for (size_t i = 0; i < sliding.size(); ++i) {
      if (lt[i] == "sliding_attention") {
        sliding[i] = true;
      } else if (lt[i] != "full_attention") {
        fail(source, "layer_types", "unsupported layer type " + lt[i].dump());
      }
    }
  } else {
    int max_window_layers = get_int(j, "max_window_layers", source, false, 28, false);
    for (size_t i = 0; i < sliding.size(); ++i) sliding[i] = static_cast<int>(i) >= max_window_layers;
  }
  size_t n = static_cast<size_t>(std::count(sliding.begin(), sliding.end(), true));
  if (n == 0) return;
  if (n != sliding.size()) {
    fail(source, present(j, "layer_types") ? "layer_types" : "max_window_layers",
         "sliding-window attention on only some layers is not supported (" + std::to_string(n) + " of " +
             std::to_string(sliding.size()) + " layers)");
  }
  config.sliding_window = window;
}

// sqrt(hidden_size) as transformers' Gemma multiplies by it: a float32 tensor cast to the
// weights' dtype, here the config's `dtype` (`torch_dtype` in older files; default float32).
float gemma_embed_scale(const json& j, const std::string& source, int hidden) {
  const float scale = std::sqrt(static_cast<float>(hidden));
  const char* key = present(j, "dtype") ? "dtype" : "torch_dtype";
  if (!present(j, key)) return scale;
  if (!j[key].is_string()) fail(source, key, "expected a dtype name, found " + j[key].dump());
  const std::string dtype = j[key].get<std::string>();
  if (dtype == "bfloat16") return kern::bf16_to_f32(kern::f32_to_bf16(scale));
  if (dtype == "float16") return static_cast<float>(static_cast<_Float16>(scale));
  if (dtype == "float32") return scale;
  fail(source, key, "unsupported dtype '" + dtype + "' (supported: bfloat16, float16, float32)");
}

// Gemma 3 text: layer types, per-type RoPE, and the Gemma rules above.
void parse_gemma3(const json& j, const std::string& source, ModelConfig& c) {
  const size_t layers = static_cast<size_t>(c.num_layers);
  c.layer_sliding.assign(layers, false);
  if (present(j, "layer_types")) {
    const json& lt = j["layer_types"];
    if (!lt.is_array() || lt.size() != layers) {
      fail(source, "layer_types", "expected a list of " + std::to_string(layers) + " layer types, found " + lt.dump());
    }
    for (size_t i = 0; i < layers; ++i) {
      if (lt[i] == "sliding_attention") {
        c.layer_sliding[i] = true;
      } else if (lt[i] != "full_attention") {
        fail(source, "layer_types", "unsupported layer type " + lt[i].dump());
      }
    }
  } else {
    const int pattern = get_int(j, "sliding_window_pattern", source, false, 6, true);
    for (size_t i = 0; i < layers; ++i) c.layer_sliding[i] = (static_cast<int>(i) + 1) % pattern != 0;
  }
  c.sliding_window = get_int(j, "sliding_window", source, false, 4096, true);
  if (get_bool(j, "use_bidirectional_attention", source, false)) {
    fail(source, "use_bidirectional_attention", "bidirectional attention is not supported");
  }
  // RoPE: global layers from rope_parameters.full_attention (or rope_theta + rope_scaling),
  // local ones from rope_parameters.sliding_attention (or rope_local_base_freq).
  json global = json::object();
  float local_theta = get_float(j, "rope_local_base_freq", source, 10000.0f, true);
  if (present(j, "rope_parameters") && j["rope_parameters"].is_object() &&
      (j["rope_parameters"].contains("full_attention") || j["rope_parameters"].contains("sliding_attention"))) {
    const json& rp = j["rope_parameters"];
    if (present(rp, "full_attention")) global["rope_parameters"] = rp["full_attention"];
    if (present(rp, "sliding_attention")) {
      const json& local = rp["sliding_attention"];
      if (!local.is_object()) fail(source, "rope_parameters.sliding_attention", "expected an object");
      const json type = local.value("rope_type", json("default"));
      if (type != "default") {
        fail(source, "rope_parameters.sliding_attention.rope_type",
             "only default RoPE is supported on sliding layers, found " + type.dump());
      }
      local_theta = get_float(local, "rope_theta", source, local_theta, true, "rope_parameters.sliding_attention.");
    }
  } else {
    if (present(j, "rope_parameters")) global["rope_parameters"] = j["rope_parameters"];
    if (present(j, "rope_scaling")) global["rope_scaling"] = j["rope_scaling"];
  }
  global["rope_theta"] = present(j, "rope_theta") ? j["rope_theta"] : json(1000000.0);
  parse_rope(global, source, c);
  c.rope_local_theta = local_theta;

  c.norm_plus_one = c.sandwich_norms = c.qk_norm = true;
  c.qkv_bias = c.o_bias = get_bool(j, "attention_bias", source, false);
  c.embed_scale = gemma_embed_scale(j, source, c.hidden_size);
  const float qpas = get_float(j, "query_pre_attn_scalar", source, 256.0f, true);
  c.attn_scale = 1.0f / std::sqrt(qpas);
  c.final_logit_softcap = get_float(j, "final_logit_softcapping", source, 0.0f, true);
  if (present(j, "attn_logit_softcapping")) {
    fail(source, "attn_logit_softcapping", "attention logit soft-capping is not supported");
  }
}

// mixtral / qwen3_moe: the experts, the router's normalisation and which layers are sparse.
void parse_moe(const json& j, const std::string& source, ModelConfig& c) {
  const bool mixtral = c.model_type == "mixtral";
  const char* experts_key = !mixtral && present(j, "num_experts") ? "num_experts" : "num_local_experts";
  c.num_experts = get_int(j, experts_key, source, false, mixtral ? 8 : 128, false);
  if (c.num_experts < 0) fail(source, experts_key, "must not be negative");
  c.num_experts_per_tok = get_int(j, "num_experts_per_tok", source, false, mixtral ? 2 : 8, true);
  if (c.num_experts > 0 && c.num_experts_per_tok > c.num_experts) {
    fail(source, "num_experts_per_tok",
         std::to_string(c.num_experts_per_tok) + " is more than the " + std::to_string(c.num_experts) + " experts");
  }
  c.moe_intermediate_size =
      mixtral ? c.intermediate_size : get_int(j, "moe_intermediate_size", source, false, 768, true);
  c.moe_renormalize = mixtral || get_bool(j, "norm_topk_prob", source, false);
  for (const char* key : {"shared_expert_intermediate_size", "n_shared_experts", "num_shared_experts"}) {
    if (present(j, key) && !(j[key].is_number() && j[key].get<double>() == 0.0)) {
      fail(source, key, "shared experts are not supported");
    }
  }
  const int step = mixtral ? 1 : get_int(j, "decoder_sparse_step", source, false, 1, true);
  std::vector<bool> dense(static_cast<size_t>(c.num_layers), false);
  if (!mixtral && present(j, "mlp_only_layers")) {
    const json& only = j["mlp_only_layers"];
    if (!only.is_array()) fail(source, "mlp_only_layers", "expected a list of layer indices, found " + only.dump());
    for (const json& v : only) {
      if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() >= c.num_layers) {
        fail(
            source, "mlp_only_layers",
            "expected layer indices below num_hidden_layers (" + std::to_string(c.num_layers) + "), found " + v.dump());
      }
      dense[static_cast<size_t>(v.get<long long>())] = true;
    }
  }
  if (c.num_experts == 0) return;  // transformers builds every layer dense then
  c.layer_moe.resize(dense.size());
  for (size_t i = 0; i < dense.size(); ++i) c.layer_moe[i] = !dense[i] && (static_cast<int>(i) + 1) % step == 0;
}

void validate(const std::string& source, const ModelConfig& c) {
  if (c.num_kv_heads > c.num_heads || c.num_heads % c.num_kv_heads != 0) {
    fail(source, "num_key_value_heads",
         "num_attention_heads (" + std::to_string(c.num_heads) + ") must be a multiple of " + "num_key_value_heads (" +
             std::to_string(c.num_kv_heads) + ")");
  }
  if (c.head_dim % 2 != 0) {
    fail(source, "head_dim", "must be even for rotary embeddings, found " + std::to_string(c.head_dim));
  }
  for (int id : c.eos_token_ids) {
    if (id >= c.vocab_size) {
      fail(source, "eos_token_id",
           "token id " + std::to_string(id) + " is outside the vocabulary (" + std::to_string(c.vocab_size) + ")");
    }
  }
  if (c.bos_token_id >= c.vocab_size) {
    fail(source, "bos_token_id",
         "token id " + std::to_string(c.bos_token_id) + " is outside the vocabulary (" + std::to_string(c.vocab_size) +
             ")");
  }
}

}  // namespace

namespace {

// quantization_config: AWQ (4-bit) or GPTQ (2-, 3-, 4- or 8-bit), or a refusal naming the field. A
// pre-quantized checkpoint keeps its projections in tensors of its own
// (model/prequantized_checkpoint.h reads AutoAWQ's GEMM layout and GPTQ's). Every other method
// (bitsandbytes, FP8, compressed-tensors, ...) is refused by name: it used to fail on a missing tensor, or, where the .weight tensors were
// still there, be served as if unquantized.
PrequantizedConfig parse_prequantized_config(const json& q, const std::string& source) {
  const bool named = q.is_object() && q.contains("quant_method") && q["quant_method"].is_string();
  const std::string method = named ? q["quant_method"].get<std::string>() : "";
  if (method != "awq" && method != "gptq") {
    fail(source, named ? "quantization_config.quant_method" : "quantization_config",
         "pre-quantized checkpoints other than AWQ and GPTQ are not supported (" +
             (named ? "'" + method + "'" : q.dump()) +
             "): serve the BF16/FP16 checkpoint with --quantization w8 or w4 (quantized at load), or a GGUF file");
  }
  auto field = [&](const char* key) { return std::string("quantization_config.") + key; };
  const std::string name = method == "awq" ? "AWQ" : "GPTQ";
  PrequantizedConfig c;
  const json bits = q.value("bits", q.value("w_bit", json(4)));
  const int b = bits.is_number_integer() ? bits.get<int>() : 0;
  const bool bits_ok = b == 4 || (method == "gptq" && (b == 2 || b == 3 || b == 8));
  if (!bits_ok) {
    fail(source, field("bits"),
         name + " with " + bits.dump() + " bits: only " + (method == "gptq" ? "2, 3, 4 and 8 are" : "4 is") +
             " supported");
  }
  const json group = q.value("group_size", q.value("q_group_size", json()));
  const bool per_row = method == "gptq" && group == json(-1);
  if (!per_row && (!group.is_number_integer() || group.get<int>() <= 0 || group.get<int>() % 32 != 0)) {
    fail(source, field("group_size"),
         std::string("expected a positive multiple of 32") + (method == "gptq" ? " or -1" : "") + ", found " +
             group.dump());
  }
  c.group_size = per_row ? 0 : group.get<int>();
  c.bits = bits.get<int>();
  if (method == "awq") {
    c.method = PrequantizedConfig::Method::awq;
    const json zero_point = q.value("zero_point", json(true));
    if (zero_point != json(true)) {
      fail(source, field("zero_point"), "only AWQ with zero points (true) is supported, found " + zero_point.dump());
    }
    const json version = q.value("version", json("gemm"));
    if (!version.is_string() || (version != "gemm" && version != "GEMM")) {
      fail(source, field("version"),
           "only AutoAWQ's GEMM layout ('gemm') is supported, found " + version.dump() +
               " (GEMV and the Marlin/ExLlama repacks order the codes differently)");
    }
    return c;
  }
  c.method = PrequantizedConfig::Method::gptq;
  const json desc_act = q.value("desc_act", json(false));
  if (!desc_act.is_boolean()) fail(source, field("desc_act"), "expected true or false, found " + desc_act.dump());
  c.desc_act = desc_act.get<bool>();
  // AutoGPTQ (and GPTQModel's default "gptq" format) store zero − 1 and add the 1 back when
  // dequantizing; GPTQModel's "gptq_v2" stores the zero itself.
  const json format = q.value("checkpoint_format", json("gptq"));
  if (format == json("gptq")) {
    c.zero_offset = 1;
  } else if (format != json("gptq_v2")) {
    fail(source, field("checkpoint_format"),
         "expected 'gptq' or 'gptq_v2', found " + format.dump() + " (Marlin and other repacked layouts are not read)");
  }
  if (q.value("is_marlin_format", json(false)) == json(true)) {
    fail(source, field("is_marlin_format"), "the Marlin layout is not read; use the checkpoint in GPTQ's own layout");
  }
  return c;
}

ModelConfig parse_model_config_fields(const json& j, const std::string& source);

}  // namespace

ModelConfig parse_model_config(const json& j, const std::string& source) {
  ModelConfig c = parse_model_config_fields(j, source);
  if (present(j, "quantization_config")) c.prequantized = parse_prequantized_config(j["quantization_config"], source);
  return c;
}

namespace {

// Every field but quantization_config.
ModelConfig parse_model_config_fields(const json& j, const std::string& source) {
  if (!j.is_object()) throw std::runtime_error(source + ": expected a JSON object");
  if (j.value("model_type", json()) == "gemma3") {
    // Gemma3ForConditionalGeneration: only the text tower runs; its tensors sit under
    // language_model.model. (what transformers 5.23 writes; it maps them to
    // model.language_model. in memory). The vision tower's are never read.
    if (!present(j, "text_config") || !j["text_config"].is_object()) {
      fail(source, "text_config", "expected an object (model_type gemma3 keeps the text model's config there)");
    }
    json text = j["text_config"];
    text["model_type"] = "gemma3_text";
    // The checkpoint loads in the top-level dtype (transformers 5.23 writes float32 into
    // text_config whatever the weights are), so that one rounds the embedding normalizer.
    for (const char* key : {"dtype", "torch_dtype"}) {
      if (present(j, key)) text[key] = j[key];
    }
    for (const char* key : {"tie_word_embeddings", "eos_token_id", "bos_token_id"}) {
      if (present(j, key) && !present(text, key)) text[key] = j[key];
    }
    ModelConfig c = parse_model_config(text, source + " (text_config)");
    c.weight_prefix = "language_model.model.";
    c.lm_head_name = "language_model.lm_head.weight";
    return c;
  }
  ModelConfig c;
  auto mt = j.find("model_type");
  if (mt == j.end() || !mt->is_string()) {
    fail(source, "model_type", mt == j.end() ? "missing" : "expected a string, found " + mt->dump());
  }
  c.model_type = mt->get<std::string>();
  const std::string& type = c.model_type;
  if (type != "llama" && type != "mistral" && type != "qwen2" && type != "qwen3" && type != "phi3" &&
      type != "gemma3_text" && type != "mixtral" && type != "qwen3_moe") {
    fail(source, "model_type",
         "unsupported model type '" + type +
             "' (supported: llama, mistral, qwen2, qwen3, phi3, gemma3_text, gemma3, mixtral, qwen3_moe)");
  }

  c.vocab_size = get_int(j, "vocab_size", source, true, 0, true);
  c.hidden_size = get_int(j, "hidden_size", source, true, 0, true);
  c.intermediate_size = get_int(j, "intermediate_size", source, true, 0, true);
  c.num_layers = get_int(j, "num_hidden_layers", source, true, 0, true);
  c.num_heads = get_int(j, "num_attention_heads", source, true, 0, true);
  c.num_kv_heads = get_int(j, "num_key_value_heads", source, false, c.num_heads, true);
  if (present(j, "head_dim")) {
    c.head_dim = get_int(j, "head_dim", source, true, 0, true);
  } else if (type == "qwen3") {
    c.head_dim = 128;  // Qwen3Config's default, whatever hidden_size / heads is
  } else if (type == "gemma3_text") {
    c.head_dim = 256;  // Gemma3TextConfig's default
  } else {
    if (c.hidden_size % c.num_heads != 0) {
      fail(source, "num_attention_heads",
           "hidden_size (" + std::to_string(c.hidden_size) + ") is not a multiple of it (" +
               std::to_string(c.num_heads) + ") and head_dim is not given");
    }
    c.head_dim = c.hidden_size / c.num_heads;
  }
  c.rms_norm_eps = get_float(j, "rms_norm_eps", source, 1e-6f, true);
  const int default_max_pos = type == "llama"                          ? 2048
                              : type == "mistral" || type == "mixtral" ? 131072
                              : type == "phi3"                         ? 4096
                              : type == "gemma3_text"                  ? 131072
                                                                       : 32768;
  c.max_position_embeddings = get_int(j, "max_position_embeddings", source, false, default_max_pos, true);
  const bool gemma = type == "gemma3_text";
  if (!gemma) parse_rope(j, source, c, type == "mixtral" ? 1e6f : 10000.0f);  // MixtralConfig's default base
  c.tie_word_embeddings = get_bool(j, "tie_word_embeddings", source, gemma);

  const char* act_key = gemma ? "hidden_activation" : "hidden_act";
  const std::string want_act = gemma ? "gelu_pytorch_tanh" : "silu";
  auto act = j.find(act_key);
  if (act != j.end() && !act->is_null() && (!act->is_string() || act->get<std::string>() != want_act)) {
    fail(source, act_key, "unsupported activation " + act->dump() + " (supported: \"" + want_act + "\")");
  }
  if (gemma) c.mlp_activation = MlpActivation::gelu_tanh;

  if (type == "llama") {
    bool attention_bias = get_bool(j, "attention_bias", source, false);
    c.qkv_bias = c.o_bias = attention_bias;
    c.mlp_bias = get_bool(j, "mlp_bias", source, false);
  } else if (type == "qwen2") {
    c.qkv_bias = true;
    parse_qwen_sliding_window(j, source, c);
  } else if (type == "qwen3_moe") {
    c.qkv_bias = c.o_bias = get_bool(j, "attention_bias", source, false);
    c.qk_norm = true;
    if (get_bool(j, "use_sliding_window", source, false)) {
      c.sliding_window = get_int(j, "sliding_window", source, false, 4096, true);
    }
    parse_moe(j, source, c);
  } else if (type == "mixtral") {
    c.sliding_window = get_int(j, "sliding_window", source, false, 0, true);
    parse_moe(j, source, c);
  } else if (type == "qwen3") {
    bool attention_bias = get_bool(j, "attention_bias", source, false);
    c.qkv_bias = c.o_bias = attention_bias;
    c.qk_norm = true;
    parse_qwen_sliding_window(j, source, c);
  } else if (gemma) {
    parse_gemma3(j, source, c);
  } else if (type == "phi3") {
    c.fused_qkv_proj = c.fused_gate_up_proj = true;
    c.sliding_window = get_int(j, "sliding_window", source, false, 0, true);
  } else {  // mistral
    c.sliding_window = get_int(j, "sliding_window", source, false, 0, true);
  }

  c.eos_token_ids = get_token_ids(j, "eos_token_id", source);
  c.bos_token_id = get_int(j, "bos_token_id", source, false, -1, false);
  if (present(j, "bos_token_id") && c.bos_token_id < 0) {
    fail(source, "bos_token_id", "expected a token id, found " + j["bos_token_id"].dump());
  }
  validate(source, c);
  return c;
}

}  // namespace

ModelConfig load_model_config(const std::filesystem::path& config_json) {
  return parse_model_config(read_json_file(config_json), config_json.string());
}

GenerationConfig load_generation_config(const std::filesystem::path& generation_config_json) {
  GenerationConfig g;
  if (!std::filesystem::exists(generation_config_json)) return g;
  const json j = read_json_file(generation_config_json);
  const std::string source = generation_config_json.string();
  if (!j.is_object()) throw std::runtime_error(source + ": expected a JSON object");
  g.eos_token_ids = get_token_ids(j, "eos_token_id", source);
  g.bos_token_id = get_int(j, "bos_token_id", source, false, -1, false);
  g.temperature = get_float(j, "temperature", source, 1.0f, false);
  if (g.temperature < 0.0f) fail(source, "temperature", "must not be negative");
  g.top_p = get_float(j, "top_p", source, 1.0f, true);
  if (g.top_p > 1.0f) fail(source, "top_p", "must be in (0, 1]");
  g.top_k = get_int(j, "top_k", source, false, 0, false);
  if (g.top_k < 0) fail(source, "top_k", "must not be negative");
  g.repetition_penalty = get_float(j, "repetition_penalty", source, 1.0f, true);
  g.do_sample = get_bool(j, "do_sample", source, false);
  return g;
}

}  // namespace slab
