#pragma once
// The architecture of a checkpoint, read from a Hugging Face config.json. One struct for every
// supported family: the forward pass switches on these feature flags, not on the family name.
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace slab {

enum class RopeScalingType { none, linear, llama3, longrope };

struct RopeScaling {
  RopeScalingType type = RopeScalingType::none;
  float factor = 1.0f;
  // llama3 only.
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int original_max_position_embeddings = 8192;  // llama3 and longrope
  // longrope only: rotary_dim / 2 divisors of the frequencies each. A forward step of a sequence
  // whose furthest position is past original_max_position_embeddings uses long_factor, any other
  // step short_factor (transformers' rule per forward call; see rope_params.h).
  std::vector<float> short_factor, long_factor;
  float attention_factor = 1.0f;  // multiplies cos and sin (longrope; 1 otherwise)
};

enum class MlpActivation { silu, gelu_tanh };

// A Hugging Face checkpoint quantized before it was saved (config.json's quantization_config).
struct PrequantizedConfig {
  enum class Method { none, awq, gptq };
  Method method = Method::none;
  // Elements of K per scale (and zero): a multiple of 32; 0 for GPTQ's -1, one group per row.
  int group_size = 0;
  bool desc_act = false;  // GPTQ: g_idx may give rows their groups out of order ("act-order")
  int zero_offset = 0;    // GPTQ's v1 format ("gptq") stores zero − 1: 1; gptq_v2 and AWQ: 0
  int bits = 4;           // 4; GPTQ also 2 and 3 (held as 4-bit) and 8
};

struct ModelConfig {
  std::string model_type;  // llama, mistral, qwen2, qwen3, phi3, gemma3_text (also gemma3's), mixtral, qwen3_moe
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;  // hidden_size / num_heads unless config.json says otherwise (qwen3)
  int rotary_dim = 0;  // leading values of each head that RoPE rotates: head_dim * partial_rotary_factor
  float rms_norm_eps = 1e-6f;
  float rope_theta = 10000.0f;
  RopeScaling rope_scaling;
  int max_position_embeddings = 2048;
  bool tie_word_embeddings = false;
  bool qkv_bias = false;           // q/k/v projections carry a bias (qwen2; llama with attention_bias)
  bool o_bias = false;             // o_proj carries a bias (llama with attention_bias)
  bool mlp_bias = false;           // gate/up/down carry a bias (llama with mlp_bias)
  bool qk_norm = false;            // per-head RMSNorm of q and k before RoPE (qwen3)
  // The checkpoint stores q/k/v as one qkv_proj and gate/up as one gate_up_proj (phi3); the
  // loaders read them as row slices of those (model/fused_tensors.h).
  bool fused_qkv_proj = false;
  bool fused_gate_up_proj = false;
  int sliding_window = 0;          // 0: full attention
  // Per layer: whether it uses sliding_window (gemma3's interleaved local/global layers). Empty:
  // every layer does (when sliding_window > 0).
  std::vector<bool> layer_sliding;
  // > 0: the sliding layers rotate with default RoPE of this base, the others with rope_theta and
  // rope_scaling (gemma3's rope_local_base_freq / rope_parameters.sliding_attention).
  float rope_local_theta = 0.0f;
  MlpActivation mlp_activation = MlpActivation::silu;  // gate activation of the gated MLP
  bool norm_plus_one = false;   // every RMSNorm scales by (1 + weight) (gemma)
  bool sandwich_norms = false;  // RMSNorm of the attention and MLP outputs before each residual add (gemma)
  float embed_scale = 1.0f;     // embeddings are multiplied by it (gemma: sqrt(hidden) in the config's dtype)
  float attn_scale = 0.0f;      // q·k scale; 0: 1 / sqrt(head_dim) (gemma: query_pre_attn_scalar^-0.5)
  float final_logit_softcap = 0.0f;  // > 0: logits = cap · tanh(logits / cap)
  // Mixture of experts (mixtral, qwen3_moe). A sparse layer's MLP is num_experts SwiGLU MLPs of
  // moe_intermediate_size and a router [num_experts, hidden]: each token takes the
  // num_experts_per_tok experts of largest softmax probability (FP32, over all experts) and sums
  // their outputs weighted by those probabilities, rescaled to sum 1 when moe_renormalize
  // (mixtral always, qwen3_moe's norm_topk_prob). Other layers keep the dense MLP of
  // intermediate_size (qwen3_moe's mlp_only_layers and decoder_sparse_step).
  int num_experts = 0;  // 0: every layer dense
  int num_experts_per_tok = 0;
  int moe_intermediate_size = 0;
  bool moe_renormalize = false;
  std::vector<bool> layer_moe;  // per layer: sparse (true) or dense; empty when num_experts == 0
  // Tensor names: "model." (the text model of a CausalLM) or "language_model.model." (gemma3's
  // Gemma3ForConditionalGeneration as transformers 5.23 saves it and the Hub has it).
  std::string weight_prefix = "model.";
  std::string lm_head_name = "lm_head.weight";
  std::vector<int> eos_token_ids;  // from config.json; generation_config.json may add more
  int bos_token_id = -1;
  // quantization_config of a pre-quantized checkpoint (AWQ 4-bit; GPTQ 2-, 3-, 4- or 8-bit); the
  // checkpoint is read through wrap_prequantized_checkpoint (model/prequantized_checkpoint.h). Other methods
  // are refused.
  PrequantizedConfig prequantized;
};

// Parses config.json text; `source` names the file in error messages. Throws std::runtime_error
// naming the file and field for an unknown model_type, a missing or mistyped field, or an option
// the engine does not implement (e.g. an unsupported rope_scaling type or hidden_act).
ModelConfig parse_model_config(const nlohmann::json& config, const std::string& source);
ModelConfig load_model_config(const std::filesystem::path& config_json);

// The window of layer `layer` (0: full attention) and whether it rotates with rope_local_theta.
inline int layer_window(const ModelConfig& c, int layer) {
  return c.layer_sliding.empty() || c.layer_sliding[static_cast<size_t>(layer)] ? c.sliding_window : 0;
}
inline bool layer_uses_local_rope(const ModelConfig& c, int layer) {
  return c.rope_local_theta > 0.0f && layer_window(c, layer) > 0;
}

// Whether layer `layer`'s MLP is a mixture of experts.
inline bool layer_is_moe(const ModelConfig& c, int layer) {
  return !c.layer_moe.empty() && c.layer_moe[static_cast<size_t>(layer)];
}

// Defaults for sampling and stopping from generation_config.json (absent file: all defaults).
struct GenerationConfig {
  std::vector<int> eos_token_ids;
  int bos_token_id = -1;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float repetition_penalty = 1.0f;
  bool do_sample = false;
};

GenerationConfig load_generation_config(const std::filesystem::path& generation_config_json);

}  // namespace slab
