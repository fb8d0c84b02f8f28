// The transformer forward pass over a flattened batch, read top to bottom: embed, then per layer
// attention and MLP blocks with pre-norm residuals, then the final norm and the output head.
// Every op comes from kernels/; this file only wires shapes, positions and the KV cache.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kv_block.h"
#include "kernels/moe_routing.h"
#include "kernels/reference.h"
#include "model/model.h"
#include "model/rope_params.h"

namespace slab {
namespace {

const float* bias_or_null(const std::vector<float>& bias) { return bias.empty() ? nullptr : bias.data(); }

// A sparse MLP block, token by token as transformers defines it: router logits, FP32 softmax
// over all experts, top-k (renormalised or not), then out = sum over the picked experts of
// weight · down(SiLU(gate(x)) · up(x)). xn and out are [n_tokens, hidden].
void moe_mlp(float* out, const float* xn, const LayerWeights& lw, const ModelConfig& c, int n_tokens) {
  const int dim = c.hidden_size, inter = c.moe_intermediate_size, k = c.num_experts_per_tok;
  std::vector<float> logits(static_cast<size_t>(c.num_experts));
  std::vector<int32_t> picked(static_cast<size_t>(k));
  std::vector<float> weight(static_cast<size_t>(k)), gate(static_cast<size_t>(inter)), up(gate.size());
  std::vector<float> expert_out(static_cast<size_t>(dim));
  for (int t = 0; t < n_tokens; ++t) {
    const float* row = xn + static_cast<size_t>(t) * dim;
    float* o = out + static_cast<size_t>(t) * dim;
    ref::linear(logits.data(), row, lw.router.data(), nullptr, 1, c.num_experts, dim);
    kern::moe_route(logits.data(), 1, c.num_experts, k, c.moe_renormalize, picked.data(), weight.data());
    std::fill(o, o + dim, 0.0f);
    for (int s = 0; s < k; ++s) {
      const ExpertWeights& e = lw.experts[static_cast<size_t>(picked[static_cast<size_t>(s)])];
      ref::linear(gate.data(), row, e.w_gate.data(), nullptr, 1, inter, dim);
      ref::linear(up.data(), row, e.w_up.data(), nullptr, 1, inter, dim);
      ref::silu_mul(gate.data(), gate.data(), up.data(), inter);
      ref::linear(expert_out.data(), gate.data(), e.w_down.data(), nullptr, 1, dim, inter);
      for (int i = 0; i < dim; ++i) o[i] += weight[static_cast<size_t>(s)] * expert_out[static_cast<size_t>(i)];
    }
  }
}

}  // namespace

std::vector<float> forward(const Model& model, const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = model.config;
  const ModelWeights& w = model.weights;
  validate_forward_batch(c, batch, cache);

  const int n_tokens = static_cast<int>(batch.tokens.size());
  const int dim = c.hidden_size;
  const int hd = c.head_dim;
  const int q_dim = c.num_heads * hd;
  const int kv_dim = c.num_kv_heads * hd;
  const KvGeometry& g = cache.geometry();
  float* pool = cache.pool_f32();  // the oracle keeps an FP32 cache

  const BatchLayout layout = layout_batch(batch);
  const std::vector<int>& token_pos = layout.token_pos;
  // RoPE frequency sets (rope_params.h): the config's, longrope's long factors (a sequence whose
  // step reaches past original_max_position_embeddings), gemma3's local base for sliding layers.
  const int rot = rotary_dim_of(c);
  std::vector<float> inv_freq[kRopeSets];
  for (int set = 0; set < kRopeSets; ++set) {
    inv_freq[set].resize(static_cast<size_t>(rot / 2));
    ref::rope_inverse_frequencies(inv_freq[set].data(), rot, rope_set_params(c, set));
  }
  const float attn_scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));

  // Activations, [n_tokens, width] row-major.
  std::vector<float> x(static_cast<size_t>(n_tokens) * dim);
  std::vector<float> xn(x.size());
  std::vector<float> q(static_cast<size_t>(n_tokens) * q_dim);
  std::vector<float> k(static_cast<size_t>(n_tokens) * kv_dim);
  std::vector<float> v(static_cast<size_t>(n_tokens) * kv_dim);
  std::vector<float> attn(static_cast<size_t>(n_tokens) * q_dim);
  std::vector<float> gate(static_cast<size_t>(n_tokens) * c.intermediate_size);
  std::vector<float> up(gate.size());
  std::vector<float> delta(x.size());

  for (int t = 0; t < n_tokens; ++t) {
    const float* row = w.token_embedding.data() + static_cast<size_t>(batch.tokens[t]) * dim;
    for (int i = 0; i < dim; ++i) x[static_cast<size_t>(t) * dim + i] = row[i] * c.embed_scale;
  }

  // x += delta, through an RMSNorm of delta first where the config has sandwich norms (gemma).
  auto residual_add = [&](const std::vector<float>& post_norm) {
    if (!post_norm.empty()) {
      for (int t = 0; t < n_tokens; ++t) {
        float* d = &delta[static_cast<size_t>(t) * dim];
        ref::rmsnorm(d, d, post_norm.data(), dim, c.rms_norm_eps);
      }
    }
    for (size_t i = 0; i < x.size(); ++i) x[i] += delta[i];
  };

  for (int l = 0; l < c.num_layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    const kern::KvBlockLayout kv_layout = g.layer_layout(l);
    const std::vector<float> attn_norm = effective_norm(c, lw.attn_norm), mlp_norm = effective_norm(c, lw.mlp_norm);
    const std::vector<float> q_norm = effective_norm(c, lw.q_norm), k_norm = effective_norm(c, lw.k_norm);
    const std::vector<float> post_attn_norm = effective_norm(c, lw.post_attn_norm);
    const std::vector<float> post_mlp_norm = effective_norm(c, lw.post_mlp_norm);

    // Attention block.
    for (int t = 0; t < n_tokens; ++t) {
      ref::rmsnorm(&xn[static_cast<size_t>(t) * dim], &x[static_cast<size_t>(t) * dim], attn_norm.data(), dim,
                   c.rms_norm_eps);
    }
    ref::linear(q.data(), xn.data(), lw.wq.data(), bias_or_null(lw.bq), n_tokens, q_dim, dim);
    ref::linear(k.data(), xn.data(), lw.wk.data(), bias_or_null(lw.bk), n_tokens, kv_dim, dim);
    ref::linear(v.data(), xn.data(), lw.wv.data(), bias_or_null(lw.bv), n_tokens, kv_dim, dim);
    for (int t = 0; t < n_tokens; ++t) {
      float* qt = &q[static_cast<size_t>(t) * q_dim];
      float* kt = &k[static_cast<size_t>(t) * kv_dim];
      if (c.qk_norm) {
        for (int h = 0; h < c.num_heads; ++h) ref::rmsnorm(qt + h * hd, qt + h * hd, q_norm.data(), hd, c.rms_norm_eps);
        for (int h = 0; h < c.num_kv_heads; ++h)
          ref::rmsnorm(kt + h * hd, kt + h * hd, k_norm.data(), hd, c.rms_norm_eps);
      }
      const BatchSequence& seq = batch.sequences[static_cast<size_t>(layout.token_seq[t])];
      const int set = rope_set_for(c, l, std::max(seq.rope_length, seq.start_pos + seq.num_tokens));
      const float* freq = inv_freq[set].data();
      const float scale = rope_set_scale(c, set);
      ref::rope(qt, c.num_heads, hd, token_pos[t], freq, ref::RopeStyle::rotate_half, rot, scale);
      ref::rope(kt, c.num_kv_heads, hd, token_pos[t], freq, ref::RopeStyle::rotate_half, rot, scale);
      kern::kv_write(pool, kv_layout, batch.sequences[layout.token_seq[t]].block_table.data(), token_pos[t], kt,
                     &v[static_cast<size_t>(t) * kv_dim], c.num_kv_heads);
    }
    // Every new K/V of this layer is in the cache before any token attends, so tokens of one
    // sequence in the same batch see each other causally.
    for (int t = 0; t < n_tokens; ++t) {
      ref::PagedKv kv{pool,
                      batch.sequences[layout.token_seq[t]].block_table.data(),
                      g.block_size,
                      g.block_stride(),
                      kv_layout.k_offset,
                      kv_layout.v_offset,
                      g.head_stride()};
      ref::attention(&attn[static_cast<size_t>(t) * q_dim], &q[static_cast<size_t>(t) * q_dim], kv, c.num_heads,
                     c.num_kv_heads, hd, token_pos[t], layer_window(c, l), attn_scale);
    }
    ref::linear(delta.data(), attn.data(), lw.wo.data(), bias_or_null(lw.bo), n_tokens, dim, q_dim);
    residual_add(post_attn_norm);

    // MLP block: act(gate)·up, act SiLU or GeLU-tanh; or a mixture of experts.
    for (int t = 0; t < n_tokens; ++t) {
      ref::rmsnorm(&xn[static_cast<size_t>(t) * dim], &x[static_cast<size_t>(t) * dim], mlp_norm.data(), dim,
                   c.rms_norm_eps);
    }
    if (layer_is_moe(c, l)) {
      moe_mlp(delta.data(), xn.data(), lw, c, n_tokens);
      residual_add(post_mlp_norm);
      continue;
    }
    ref::linear(gate.data(), xn.data(), lw.w_gate.data(), bias_or_null(lw.b_gate), n_tokens, c.intermediate_size, dim);
    ref::linear(up.data(), xn.data(), lw.w_up.data(), bias_or_null(lw.b_up), n_tokens, c.intermediate_size, dim);
    if (c.mlp_activation == MlpActivation::gelu_tanh) {
      ref::gelu_tanh_mul(gate.data(), gate.data(), up.data(), static_cast<int>(gate.size()));
    } else {
      ref::silu_mul(gate.data(), gate.data(), up.data(), static_cast<int>(gate.size()));
    }
    ref::linear(delta.data(), gate.data(), lw.w_down.data(), bias_or_null(lw.b_down), n_tokens, dim,
                c.intermediate_size);
    residual_add(post_mlp_norm);
  }

  // Output head over the rows that want logits.
  const std::vector<int>& rows = layout.logit_rows;
  std::vector<float> normed(static_cast<size_t>(rows.size()) * dim);
  const std::vector<float> final_norm = effective_norm(c, w.final_norm);
  for (size_t r = 0; r < rows.size(); ++r) {
    ref::rmsnorm(&normed[r * dim], &x[static_cast<size_t>(rows[r]) * dim], final_norm.data(), dim, c.rms_norm_eps);
  }
  std::vector<float> logits(rows.size() * static_cast<size_t>(c.vocab_size));
  ref::linear(logits.data(), normed.data(), w.output_matrix(), nullptr, static_cast<int>(rows.size()), c.vocab_size,
              dim);
  if (c.final_logit_softcap > 0.0f) ref::softcap(logits.data(), logits.size(), c.final_logit_softcap);
  return logits;
}

}  // namespace slab
