#pragma once
// The weights of a model in the engine's compute layout (FP32 in the reference path), converted
// once at load. Absent optional tensors (biases, q/k norms) are empty vectors.
#include <string>
#include <vector>

#include "model/checkpoint.h"
#include "model/model_config.h"

namespace slab {

// One expert of a mixture-of-experts layer: a SwiGLU MLP of moe_intermediate_size.
struct ExpertWeights {
  std::vector<float> w_gate, w_up, w_down;  // [inter, hidden], [inter, hidden], [hidden, inter]
};

struct LayerWeights {
  std::vector<float> attn_norm;             // [hidden]
  std::vector<float> wq, wk, wv, wo;        // [out, in] row-major, as in the checkpoint
  std::vector<float> bq, bk, bv, bo;        // optional biases
  std::vector<float> q_norm, k_norm;        // [head_dim], qwen3
  std::vector<float> mlp_norm;              // [hidden]
  std::vector<float> post_attn_norm, post_mlp_norm;  // [hidden], sandwich_norms (gemma) only
  std::vector<float> w_gate, w_up, w_down;  // [inter, hidden], [inter, hidden], [hidden, inter]
  std::vector<float> b_gate, b_up, b_down;  // optional biases
  // Mixture-of-experts layers (layer_is_moe) instead of w_gate/w_up/w_down:
  std::vector<float> router;           // [num_experts, hidden]
  std::vector<ExpertWeights> experts;  // num_experts
};

struct ModelWeights {
  std::vector<float> token_embedding;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [vocab, hidden]; empty when tied to token_embedding

  const float* output_matrix() const { return lm_head.empty() ? token_embedding.data() : lm_head.data(); }
};

// Checkpoint tensor names: "model.layers.N." (config.weight_prefix + "layers.N."), and the norm
// in front of the MLP: post_attention_layernorm, or pre_feedforward_layernorm where the config
// has sandwich norms (gemma names its post-attention output norm post_attention_layernorm).
std::string layer_prefix(const ModelConfig& config, int layer);
const char* mlp_norm_name(const ModelConfig& config);

// A sparse layer's tensors: the router and expert e's gate, up and down projections (mixtral:
// block_sparse_moe.gate, block_sparse_moe.experts.E.w1 / w3 / w2; qwen3_moe: mlp.gate,
// mlp.experts.E.gate_proj / up_proj / down_proj, each ".weight").
struct ExpertTensorNames {
  std::string gate, up, down;
};
std::string router_tensor_name(const ModelConfig& config, int layer);
ExpertTensorNames expert_tensor_names(const ModelConfig& config, int layer, int expert);

// Norm weights as the forward multiplies by them: 1 + w where config.norm_plus_one (gemma).
std::vector<float> effective_norm(const ModelConfig& config, std::vector<float> weight);

// Reads every tensor the config calls for (Hugging Face names: model.layers.N.self_attn.q_proj.
// weight, ...), checks its shape, converts it to FP32. Throws std::runtime_error naming the file
// and tensor for a missing tensor or a wrong shape.
ModelWeights load_model_weights(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace slab
