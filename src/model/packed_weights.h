#pragma once
// A model's weights in the BF16 kernels' layout, packed once at load: fused QKV (rows
// concatenated along N, biases concatenated), gate+up as one SwiGLU matrix (gate and up panels
// alternating, so the linear applies SiLU·up itself; or, for models with MLP biases, rows
// concatenated), o and down projections, the output head; norms and biases stay FP32. No FP32
// copy of any matrix is kept.
#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kernels/linear_bf16.h"
#include "kernels/linear_quant.h"
#include "model/checkpoint.h"
#include "model/model_config.h"
#include "model/packed_quant.h"
#include "model/weights.h"
#include "runtime/aligned_buffer.h"
#include "runtime/task_team.h"

namespace slab {

struct PackedMatrix {
  AlignedBuffer buf;
  int n = 0, k = 0;
  bool swiglu = false;     // packed by pack_swiglu_bf16: n = 2 · outputs
  bool quantized = false;  // packed for linear_quant in `quant` (never swiglu)
  kern::QuantFormat quant;
  // Empty, or the K order of the packed weights: input k of the packed matrix is input
  // input_perm[k] of the activations (act-order GPTQ, repacked from its blocks); packed_linear
  // gathers the activations in this order first.
  std::vector<int32_t> input_perm;
  // Parts stacked along N whose blocks repack into different formats (a Q4_K_M QKV: Q4_K q and k,
  // Q6_K v): one quantized matrix per run of parts sharing a format, rows [n0, n0 + segment.n) in
  // order; packed_linear runs them one after another on the same input. Then `buf` is empty,
  // `quantized` is set and `quant` is the first segment's format.
  std::vector<PackedMatrix> segments;
  kern::PackedBf16 view() const { return {buf.as<const kern::bf16_t>(), n, k}; }
  kern::PackedQuant quant_view() const { return {buf.as<const uint8_t>(), quant, n, k}; }
  size_t bytes() const {
    if (!segments.empty()) {
      size_t total = 0;
      for (const PackedMatrix& s : segments) total += s.bytes();
      return total;
    }
    if (quantized) return kern::packed_quant_bytes(quant, n, k);
    return (swiglu ? kern::packed_swiglu_elems(n / 2, k) : kern::packed_bf16_elems(n, k)) * sizeof(kern::bf16_t);
  }
  // The format ("W4 g32", "BF16"); segmented: the segments' joined by " + ".
  std::string format_name() const {
    if (segments.empty()) return quantized ? quant_format_name(quant) : "BF16";
    std::string name;
    for (const PackedMatrix& s : segments) name += (name.empty() ? "" : " + ") + s.format_name();
    return name;
  }
};

// One expert of a sparse layer, packed as a dense MLP's projections are.
struct PackedExpert {
  PackedMatrix gate_up, down;
};

struct PackedLayer {
  // Effective weights (1 + w for gemma); post_* only with sandwich norms.
  std::vector<float> attn_norm, mlp_norm, q_norm, k_norm, post_attn_norm, post_mlp_norm;
  PackedMatrix qkv, o, gate_up, down;  // qkv: [q;k;v] rows; gate_up: SwiGLU, or [gate;up] rows with biases or quantized
  std::vector<float> b_qkv, b_o, b_gate_up, b_down;  // empty when the model has none
  // Sparse (mixture-of-experts) layers, whose gate_up and down stay empty: the router stays BF16
  // whatever --quantization says (its logits choose the experts), the experts follow it.
  PackedMatrix router;  // [num_experts, hidden]
  std::vector<PackedExpert> experts;
  bool is_moe() const { return !experts.empty(); }
  // The projections a decode step may read, for byte counts: qkv, o and gate_up/down or the router
  // and every expert's matrices.
  std::vector<const PackedMatrix*> matrices() const;
};

struct PackedModel {
  std::vector<PackedLayer> layers;
  std::vector<float> final_norm;
  PackedMatrix lm_head;                 // [vocab, hidden]; also the embedding when tied
  std::vector<kern::bf16_t> embedding;  // [vocab, hidden] row-major; empty when tied or quantized
  // A quantized embedding table (a GGUF file's, repacked, or RTN with --quantize-lm-head; rows
  // looked up one at a time); unset when `embedding` or a tied head holds the rows.
  PackedMatrix embedding_quant;

  // Embedding row of `token` as FP32 (from the packed head when the embeddings are tied).
  void embed(float* out, int token, int hidden) const;
  // Bytes one decode step of one token streams: every dense projection and the head, and on
  // sparse layers the router and only num_experts_per_tok experts (all experts are the same size).
  size_t decode_bytes(int experts_per_token) const;
  size_t embedding_bytes() const;  // the table's own bytes (0 when the head holds the rows)
  // How each projection was packed, with counts: "BF16 -> W8 per-channel (RTN)" x 96,
  // "Q4_0 -> W4 g32 (repacked)", "Q6_K -> BF16"...
  std::map<std::string, int> projection_paths;
  // One line for logs: the projections' formats with their packed bytes, and the head's.
  std::string describe_formats() const;
};

struct PackOptions {
  int numa_node = -1;  // bind the packed matrices to this NUMA node; -1: first touch
  // Threads that pack each BF16 or round-to-nearest matrix's panels (null: the caller alone);
  // the packed bytes are the same either way. GGUF block repacks run on the caller.
  const TaskTeam* team = nullptr;
  LoadProgress on_progress;  // optional; called after each layer and at the end
  WeightQuantization quantization = WeightQuantization::automatic;
  // With w8/w8g32/w4/w4g128: the output head and the embedding table too (one table when tied).
  bool quantize_lm_head = false;
};

// Reads the tensors the config calls for (Hugging Face names), checks shapes, packs them.
// Throws std::runtime_error naming the file and tensor at fault.
PackedModel pack_model(const ModelConfig& config, const Checkpoint& checkpoint, const PackOptions& options = {});

// A Checkpoint over weights already in memory as FP32 (a loaded Model), so the one packing path
// serves both. Borrows `weights`.
std::unique_ptr<Checkpoint> checkpoint_over(const ModelConfig& config, const ModelWeights& weights);

}  // namespace slab
