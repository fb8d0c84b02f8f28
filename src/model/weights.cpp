// Reads a model's tensors by their Hugging Face names, checks shapes against the config and
// converts them to FP32.
#include "model/weights.h"

#include "model/fused_tensors.h"

#include <stdexcept>
#include <string>

namespace slab {
namespace {

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i != 0) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

class Reader {
 public:
  explicit Reader(const Checkpoint& checkpoint) : checkpoint_(checkpoint) {}

  // A tensor that must be present with exactly `shape`.
  std::vector<float> read(const std::string& name, const std::vector<int64_t>& shape) const {
    const TensorView view = checkpoint_.tensor(name);  // throws naming the checkpoint and tensor
    if (view.shape != shape) {
      throw std::runtime_error(view.file + ": tensor '" + name + "': expected shape " + shape_string(shape) +
                               ", found " + shape_string(view.shape));
    }
    std::vector<float> out(static_cast<size_t>(view.numel()));
    convert_to_f32(view, out.data());
    return out;
  }

  // An optional tensor: read when `wanted`, else left empty.
  std::vector<float> read_if(bool wanted, const std::string& name, const std::vector<int64_t>& shape) const {
    return wanted ? read(name, shape) : std::vector<float>{};
  }

 private:
  const Checkpoint& checkpoint_;
};

}  // namespace

std::string layer_prefix(const ModelConfig& config, int layer) {
  return config.weight_prefix + "layers." + std::to_string(layer) + ".";
}

const char* mlp_norm_name(const ModelConfig& config) {
  return config.sandwich_norms ? "pre_feedforward_layernorm.weight" : "post_attention_layernorm.weight";
}

std::string router_tensor_name(const ModelConfig& config, int layer) {
  return layer_prefix(config, layer) +
         (config.model_type == "mixtral" ? "block_sparse_moe.gate.weight" : "mlp.gate.weight");
}

ExpertTensorNames expert_tensor_names(const ModelConfig& config, int layer, int expert) {
  const std::string p = layer_prefix(config, layer);
  const std::string e = std::to_string(expert);
  if (config.model_type == "mixtral") {
    const std::string q = p + "block_sparse_moe.experts." + e + ".";
    return {q + "w1.weight", q + "w3.weight", q + "w2.weight"};
  }
  const std::string q = p + "mlp.experts." + e + ".";
  return {q + "gate_proj.weight", q + "up_proj.weight", q + "down_proj.weight"};
}

std::vector<float> effective_norm(const ModelConfig& config, std::vector<float> weight) {
  if (config.norm_plus_one) {
    for (float& w : weight) w += 1.0f;  // transformers: (1.0 + weight.float()), rounded once
  }
  return weight;
}

ModelWeights load_model_weights(const ModelConfig& c, const Checkpoint& stored) {
  const auto split = split_fused_projections(c, stored);  // phi3: q/k/v and gate/up as row slices
  const Checkpoint& checkpoint = *split;
  const Reader r(checkpoint);
  const int64_t hidden = c.hidden_size;
  const int64_t inter = c.intermediate_size;
  const int64_t q_dim = static_cast<int64_t>(c.num_heads) * c.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(c.num_kv_heads) * c.head_dim;

  ModelWeights w;
  w.token_embedding = r.read(c.weight_prefix + "embed_tokens.weight", {c.vocab_size, hidden});
  w.layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    const std::string p = layer_prefix(c, i);
    LayerWeights& l = w.layers[static_cast<size_t>(i)];
    l.attn_norm = r.read(p + "input_layernorm.weight", {hidden});
    l.wq = r.read(p + "self_attn.q_proj.weight", {q_dim, hidden});
    l.wk = r.read(p + "self_attn.k_proj.weight", {kv_dim, hidden});
    l.wv = r.read(p + "self_attn.v_proj.weight", {kv_dim, hidden});
    l.wo = r.read(p + "self_attn.o_proj.weight", {hidden, q_dim});
    l.bq = r.read_if(c.qkv_bias, p + "self_attn.q_proj.bias", {q_dim});
    l.bk = r.read_if(c.qkv_bias, p + "self_attn.k_proj.bias", {kv_dim});
    l.bv = r.read_if(c.qkv_bias, p + "self_attn.v_proj.bias", {kv_dim});
    l.bo = r.read_if(c.o_bias, p + "self_attn.o_proj.bias", {hidden});
    l.q_norm = r.read_if(c.qk_norm, p + "self_attn.q_norm.weight", {c.head_dim});
    l.k_norm = r.read_if(c.qk_norm, p + "self_attn.k_norm.weight", {c.head_dim});
    l.mlp_norm = r.read(p + mlp_norm_name(c), {hidden});
    l.post_attn_norm = r.read_if(c.sandwich_norms, p + "post_attention_layernorm.weight", {hidden});
    l.post_mlp_norm = r.read_if(c.sandwich_norms, p + "post_feedforward_layernorm.weight", {hidden});
    if (layer_is_moe(c, i)) {
      const int64_t expert_inter = c.moe_intermediate_size;
      l.router = r.read(router_tensor_name(c, i), {c.num_experts, hidden});
      l.experts.resize(static_cast<size_t>(c.num_experts));
      for (int e = 0; e < c.num_experts; ++e) {
        const ExpertTensorNames n = expert_tensor_names(c, i, e);
        ExpertWeights& x = l.experts[static_cast<size_t>(e)];
        x.w_gate = r.read(n.gate, {expert_inter, hidden});
        x.w_up = r.read(n.up, {expert_inter, hidden});
        x.w_down = r.read(n.down, {hidden, expert_inter});
      }
      continue;
    }
    l.w_gate = r.read(p + "mlp.gate_proj.weight", {inter, hidden});
    l.w_up = r.read(p + "mlp.up_proj.weight", {inter, hidden});
    l.w_down = r.read(p + "mlp.down_proj.weight", {hidden, inter});
    l.b_gate = r.read_if(c.mlp_bias, p + "mlp.gate_proj.bias", {inter});
    l.b_up = r.read_if(c.mlp_bias, p + "mlp.up_proj.bias", {inter});
    l.b_down = r.read_if(c.mlp_bias, p + "mlp.down_proj.bias", {hidden});
  }
  w.final_norm = r.read(c.weight_prefix + "norm.weight", {hidden});
  if (!c.tie_word_embeddings) {
    if (!checkpoint.has(c.lm_head_name)) {
      // Let the checkpoint name itself in the message, then say why the tensor was needed.
      try {
        (void)checkpoint.tensor(c.lm_head_name);
      } catch (const std::runtime_error& e) {
        throw std::runtime_error(std::string(e.what()) +
                                 " (tie_word_embeddings is false, so the output matrix is required)");
      }
    }
    w.lm_head = r.read(c.lm_head_name, {c.vocab_size, hidden});
  }
  return w;
}

}  // namespace slab
