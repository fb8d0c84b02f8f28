// The fast forward pass (ModelRunner on the BF16 kernels). Same steps and cache protocol as
// forward.cpp; every per-token step is split over the pool (runs from a shared counter), every
// linear runs on all pool threads. K/V go into the cache as BF16 and attention is the SLAB kernel
// (kernels/attention.h) over the whole batch, one call per layer on all pool threads.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gated_activation.h"
#include "kernels/kv_block.h"
#include "kernels/linear_bf16.h"
#include "kernels/reference.h"
#include "kernels/rowwise_bf16.h"
#include "model/model_runner_internal.h"
#include "model/packed_linear.h"
#include "model/rope_params.h"
#include "runtime/thread_pool.h"

namespace slab {
namespace {

const float* or_null(const std::vector<float>& v) { return v.empty() ? nullptr : v.data(); }

}  // namespace

std::vector<float> ModelRunner::forward_fast(const ForwardBatch& batch, KvCache& cache) {
  const ModelConfig& c = meta_.config;
  validate_forward_batch(c, batch, cache);
  ensure_pool();
  ThreadPool& pool = *pool_;
  const PackedModel& w = packed_->model;
  Workspace& ws = *ws_;
  const kern::Isa isa = isa_;
  const kern::Isa quant_isa = quant_isa_for(isa);

  const int T = static_cast<int>(batch.tokens.size());
  const int dim = c.hidden_size;
  const int hd = c.head_dim;
  const int rot = rotary_dim_of(c);
  const int half = rot / 2;
  const int q_dim = c.num_heads * hd;
  const int kv_dim = c.num_kv_heads * hd;
  const int qkv_dim = q_dim + 2 * kv_dim;
  const int inter = c.intermediate_size;
  const KvGeometry& g = cache.geometry();
  kern::bf16_t* kv_pool = cache.pool_bf16();
  const float attn_scale = c.attn_scale > 0.0f ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(hd));

  const BatchLayout layout = layout_batch(batch);
  const std::vector<int>& rows = layout.logit_rows;
  const int R = static_cast<int>(rows.size());

  // Attention plan: depends only on the sequences (rows, lengths, block tables), so one plan
  // serves every layer; only the layer's K/V offsets change per call.
  std::vector<kern::AttnSeq> attn_seqs;
  attn_seqs.reserve(batch.sequences.size());
  for (int s = 0, row = 0; s < static_cast<int>(batch.sequences.size()); ++s) {
    const BatchSequence& seq = batch.sequences[static_cast<size_t>(s)];
    kern::AttnSeq a;
    a.q_start = row;
    a.q_len = seq.num_tokens;
    a.kv_len = seq.start_pos + seq.num_tokens;
    a.block_table = seq.block_table.data();
    attn_seqs.push_back(a);
    row += seq.num_tokens;
  }
  kern::AttnShape attn_shape;
  attn_shape.n_heads = c.num_heads;
  attn_shape.n_kv_heads = c.num_kv_heads;
  attn_shape.head_dim = hd;
  attn_shape.block_size = g.block_size;
  // One plan per window the layers use (gemma3 interleaves sliding and full layers).
  attn_shape.window = 0;
  const kern::AttentionPlan full_plan =
      kern::plan_attention(attn_shape, attn_seqs.data(), static_cast<int>(attn_seqs.size()), pool.size());
  attn_shape.window = c.sliding_window;
  const kern::AttentionPlan window_plan =
      c.sliding_window > 0
          ? kern::plan_attention(attn_shape, attn_seqs.data(), static_cast<int>(attn_seqs.size()), pool.size())
          : full_plan;
  const kern::Isa attn_isa = isa;  // AVX-512, AVX2 (8-lane FP32) or scalar blocks (kernels/attention.h)
  // K kept in the order the AVX-512/AMX blocks read (kernels/kv_block.h) wherever they run: the
  // cache write and every read agree, as both follow this runner's shape and ISA.
  const bool k_tiled = kern::attention_k_tiled(attn_shape, attn_isa);

  // RoPE tables per sequence (rope_params.h): longrope's long set for a sequence whose step
  // reaches past original_max_position_embeddings, the config's set otherwise; gemma3's
  // sliding layers use the local set whatever the sequence.
  std::vector<const RopeTable*> seq_rope(batch.sequences.size());
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const BatchSequence& seq = batch.sequences[s];
    const bool long_rope = uses_long_rope(c, std::max(seq.rope_length, seq.start_pos + seq.num_tokens));
    RopeTable& table = ws.rope[long_rope ? kRopeLong : kRopeGlobal];
    table.cover(layout.end_pos);
    seq_rope[s] = &table;
  }
  if (c.rope_local_theta > 0.0f) ws.rope[kRopeLocal].cover(layout.end_pos);

  // Sized for the larger of this step and the configured token budget, so steady state never
  // reallocates; a larger step grows them.
  const size_t ut = static_cast<size_t>(std::max(T, options_.max_batched_tokens));
  float* x = ws.x.get(ut * dim);
  kern::bf16_t* xb = ws.xb.get(std::max(ut, static_cast<size_t>(R)) * dim);
  float* qkv = ws.qkv.get(ut * qkv_dim);
  float* attn = ws.attn.get(ut * q_dim);
  kern::bf16_t* attn_b = ws.attn_b.get(ut * q_dim);
  // FP32 gate/up sums only for models whose MLP is not fused (MLP biases, or quantized halves
  // that do not start on a panel).
  auto fused = [](const PackedLayer& l) { return l.b_gate_up.empty() && fused_gate_up(l.gate_up); };
  const bool fused_mlp =
      std::all_of(w.layers.begin(), w.layers.end(), [&](const PackedLayer& l) { return l.is_moe() || fused(l); });
  float* gate_up = fused_mlp ? nullptr : ws.gate_up.get(ut * 2 * inter);
  kern::bf16_t* act_b = ws.act_b.get(ut * inter);
  const int n_threads = pool.size();
  float* linear_ws = ws.linear_ws.get(model_linear_workspace_floats(w, T, R, n_threads));
  float* attn_ws = ws.attn_ws.get(
      std::max(kern::attention_workspace_floats(full_plan), kern::attention_workspace_floats(window_plan)));
  // Attention and MLP outputs before their post-norms (sandwich norms, gemma).
  float* delta = c.sandwich_norms ? ws.delta.get(ut * dim) : nullptr;
  const kern::GatedAct gated_act =
      c.mlp_activation == MlpActivation::gelu_tanh ? kern::GatedAct::gelu_tanh : kern::GatedAct::silu;

  auto run_on_all = [&pool](auto&& fn) { pool.run_on_all(fn); };
  // Per-token steps (norms, RoPE and the cache write, conversions): runs of tokens taken from a
  // shared counter, ~8 runs per thread, as the kernels take their work (kernels/work_split.h).
  auto per_token = [&pool](int n, auto&& fn) { pool.parallel_for_dynamic(n, pool.dynamic_grain(n), fn); };
  // The fields every projection shares: input rows, packed weights, scratch, kernel set.
  auto linear_args = [&](const kern::bf16_t* in, size_t ldx, int rows_m) {
    kern::LinearArgs a;
    a.x = in;
    a.ldx = ldx;
    a.m = rows_m;
    a.workspace = linear_ws;
    a.isa = isa;
    a.amx = amx_;
    a.blocking = blocking_;
    return a;
  };
  auto linear = [&](const kern::bf16_t* in, size_t ldx, const PackedMatrix& m, int rows_m, float* out, size_t ldo,
                    const std::vector<float>& bias, bool residual) {
    kern::LinearArgs a = linear_args(in, ldx, rows_m);
    a.out_f32 = out;
    a.ldo = ldo;
    a.bias = or_null(bias);
    a.residual = residual ? out : nullptr;  // in place: out += x·Wᵀ (the residual add)
    a.ldr = residual ? ldo : 0;
    packed_linear(a, m, quant_isa, n_threads, run_on_all);  // BF16 or W8/W4 (--quantization)
  };
  // gate+up packed as one SwiGLU matrix: straight to the BF16 input of the down projection.
  auto swiglu = [&](const kern::bf16_t* in, size_t ldx, const PackedMatrix& m, int rows_m, kern::bf16_t* out,
                    size_t ldo) {
    kern::LinearArgs a = linear_args(in, ldx, rows_m);
    a.out_bf16 = out;
    a.ldo = ldo;
    a.swiglu = true;
    a.gated_act = gated_act;
    packed_linear(a, m, quant_isa, n_threads, run_on_all);
  };
  // x += RMSNorm(delta) over every token: a projection's output through its post-norm.
  auto add_post_norm = [&](const std::vector<float>& norm) {
    per_token(T, [&](int t, int) {
      float* d = delta + static_cast<size_t>(t) * dim;
      float* xt = x + static_cast<size_t>(t) * dim;
      ref::rmsnorm(d, d, norm.data(), dim, c.rms_norm_eps);
      for (int i = 0; i < dim; ++i) xt[i] += d[i];
    });
  };

  PhaseClock clock(phase_seconds_);
  per_token(T, [&](int t, int) {
    float* xt = x + static_cast<size_t>(t) * dim;
    w.embed(xt, batch.tokens[static_cast<size_t>(t)], dim);
    if (c.embed_scale != 1.0f) {
      for (int i = 0; i < dim; ++i) xt[i] *= c.embed_scale;
    }
  });

  ws.moe_last_step = {};
  clock.lap(ForwardPhase::embed);
  for (int l = 0; l < c.num_layers; ++l) {
    const PackedLayer& lw = w.layers[static_cast<size_t>(l)];
    kern::KvBlockLayout kv_layout = g.layer_layout(l);
    kv_layout.k_tiled = k_tiled;
    const bool local_rope = layer_uses_local_rope(c, l);

    // Attention block.
    per_token(T, [&](int t, int) {
      kern::rmsnorm_to_bf16(xb + static_cast<size_t>(t) * dim, x + static_cast<size_t>(t) * dim, lw.attn_norm.data(),
                            dim, c.rms_norm_eps, isa);
    });
    clock.lap(ForwardPhase::norm);
    linear(xb, dim, lw.qkv, T, qkv, qkv_dim, lw.b_qkv, false);
    clock.lap(ForwardPhase::qkv);
    per_token(T, [&](int t, int) {
      float* qt = qkv + static_cast<size_t>(t) * qkv_dim;
      float* kt = qt + q_dim;
      const float* vt = kt + kv_dim;
      const int pos = layout.token_pos[static_cast<size_t>(t)];
      if (c.qk_norm) {
        for (int h = 0; h < c.num_heads; ++h)
          ref::rmsnorm(qt + h * hd, qt + h * hd, lw.q_norm.data(), hd, c.rms_norm_eps);
        for (int h = 0; h < c.num_kv_heads; ++h)
          ref::rmsnorm(kt + h * hd, kt + h * hd, lw.k_norm.data(), hd, c.rms_norm_eps);
      }
      const size_t s = static_cast<size_t>(layout.token_seq[static_cast<size_t>(t)]);
      const RopeTable& table = local_rope ? ws.rope[kRopeLocal] : *seq_rope[s];
      const float* cs = table.cos.data() + static_cast<size_t>(pos) * half;
      const float* sn = table.sin.data() + static_cast<size_t>(pos) * half;
      kern::rope_rotate_half(qt, c.num_heads, hd, rot, cs, sn);
      kern::rope_rotate_half(kt, c.num_kv_heads, hd, rot, cs, sn);
      const BatchSequence& seq = batch.sequences[s];
      kern::kv_write(kv_pool, kv_layout, seq.block_table.data(), pos, kt, vt, c.num_kv_heads, isa);
    });
    clock.lap(ForwardPhase::rope_kv);
    // Every new K/V of the layer is in the cache before any token attends (causal within a
    // sequence of the batch): the write above finished on all threads.
    kern::AttentionArgs aa;
    aa.q = qkv;  // Q is the first q_dim floats of each fused QKV row
    aa.ldq = static_cast<size_t>(qkv_dim);
    aa.out = attn;
    aa.ldo = static_cast<size_t>(q_dim);
    aa.kv = {kv_pool, g.block_size, g.block_stride(), kv_layout.k_offset, kv_layout.v_offset, g.head_stride(), k_tiled};
    aa.seqs = attn_seqs.data();
    aa.n_seqs = static_cast<int>(attn_seqs.size());
    aa.scale = attn_scale;
    aa.workspace = attn_ws;
    aa.isa = attn_isa;
    // The softmax weights enter P·V as BF16, as FlashAttention does: each weight off by at most
    // 2^-8 of itself, no change against transformers on the fixtures (kernels/attention.h).
    aa.round_p_to_bf16 = true;
    // Where vdpbf16ps runs at a quarter of the FMA's rate (the Intel cores whose linears take FP32
    // products), attention's AVX-512 block multiplies in FP32 too (kernels/attention.h).
    aa.fp32_products = blocking_.fp32_products;
    aa.dynamic_split = blocking_.dynamic_split;  // bench_model --blocking split=static: the fixed lists
    aa.amx = amx_;                               // attention on the AMX tiles too (kernels/attention.h)
    kern::attention(aa, layer_window(c, l) > 0 ? window_plan : full_plan, run_on_all);
    per_token(T, [&](int t, int) {
      kern::convert_f32_to_bf16(attn_b + static_cast<size_t>(t) * q_dim, attn + static_cast<size_t>(t) * q_dim,
                                static_cast<size_t>(q_dim), isa);
    });
    clock.lap(ForwardPhase::attention);
    if (c.sandwich_norms) {
      linear(attn_b, q_dim, lw.o, T, delta, dim, lw.b_o, false);
      clock.lap(ForwardPhase::o_proj);
      add_post_norm(lw.post_attn_norm);
      clock.lap(ForwardPhase::norm);
    } else {
      linear(attn_b, q_dim, lw.o, T, x, dim, lw.b_o, true);
      clock.lap(ForwardPhase::o_proj);
    }

    // MLP block: one pass over [gate; up], then act(gate)·up as BF16 (SiLU or GeLU-tanh), then down;
    // or the experts the router picks (model/moe_block.h), added into x.
    per_token(T, [&](int t, int) {
      kern::rmsnorm_to_bf16(xb + static_cast<size_t>(t) * dim, x + static_cast<size_t>(t) * dim, lw.mlp_norm.data(),
                            dim, c.rms_norm_eps, isa);
    });
    clock.lap(ForwardPhase::norm);
    if (lw.is_moe()) {
      MoeBlockArgs moe;
      moe.config = &c;
      moe.layer = &lw;
      moe.xb = xb;
      moe.x = x;
      moe.tokens = T;
      moe.linear_ws = linear_ws;
      moe.isa = isa;
      moe.quant_isa = quant_isa;
      moe.amx = amx_;
      moe.blocking = blocking_;
      const MoeStepStats stats = moe_block(moe, ws.moe, pool);
      ws.moe_last_step.active_experts += stats.active_experts;
      ws.moe_last_step.expert_bytes += stats.expert_bytes;
      ws.moe_last_step.per_token_bytes += stats.per_token_bytes;
      clock.lap(ForwardPhase::mlp_up);
      continue;
    }
    if (fused(lw)) {
      swiglu(xb, dim, lw.gate_up, T, act_b, static_cast<size_t>(inter));
    } else {
      linear(xb, dim, lw.gate_up, T, gate_up, 2 * static_cast<size_t>(inter), lw.b_gate_up, false);
      per_token(T, [&](int t, int) {
        const float* gu = gate_up + static_cast<size_t>(t) * 2 * inter;
        kern::bf16_t* out = act_b + static_cast<size_t>(t) * inter;
        if (gated_act == kern::GatedAct::gelu_tanh) {
          kern::gelu_tanh_mul_to_bf16(out, gu, gu + inter, inter, isa);
        } else {
          kern::silu_mul_to_bf16(out, gu, gu + inter, inter, isa);
        }
      });
    }
    clock.lap(ForwardPhase::mlp_up);
    if (c.sandwich_norms) {
      linear(act_b, inter, lw.down, T, delta, dim, lw.b_down, false);
      clock.lap(ForwardPhase::down);
      add_post_norm(lw.post_mlp_norm);
      clock.lap(ForwardPhase::norm);
    } else {
      linear(act_b, inter, lw.down, T, x, dim, lw.b_down, true);
      clock.lap(ForwardPhase::down);
    }
  }

  // Output head over the rows that want logits only.
  per_token(R, [&](int r, int) {
    kern::rmsnorm_to_bf16(xb + static_cast<size_t>(r) * dim,
                          x + static_cast<size_t>(rows[static_cast<size_t>(r)]) * dim, w.final_norm.data(), dim,
                          c.rms_norm_eps, isa);
  });
  // The head writes every element: a recycled vector (recycle_logits) is resized without a fill
  // where it is already large enough.
  std::vector<float> logits = std::move(spare_logits_);
  spare_logits_ = {};
  logits.resize(static_cast<size_t>(R) * c.vocab_size);
  linear(xb, dim, w.lm_head, R, logits.data(), static_cast<size_t>(c.vocab_size), {}, false);
  if (c.final_logit_softcap > 0.0f) {
    const size_t vocab = static_cast<size_t>(c.vocab_size);
    per_token(R, [&](int r, int) {
      kern::softcap(logits.data() + static_cast<size_t>(r) * vocab, vocab, c.final_logit_softcap, isa);
    });
  }
  clock.lap(ForwardPhase::head);
  forward_work_.add(T, count_forward_work(c, w, batch, R, ws.moe_last_step.expert_bytes));
  return logits;
}

}  // namespace slab
