#pragma once
// Checkpoints that store a layer's q, k and v projections as one self_attn.qkv_proj.weight and
// its gate and up projections as one mlp.gate_up_proj.weight (Phi-3): the loaders ask for the
// separate Hugging Face names, so this view answers them with row slices of the fused tensors
// (rows [q; k; v] and [gate; up], as transformers splits them), without copying. Likewise a
// mixture of experts stored as transformers 5 holds it in memory (mlp.experts.gate_up_proj and
// mlp.experts.down_proj, 3-D, and the router as mlp.gate.weight): each expert's gate, up and
// down are slices of those (so are a GGUF file's ffn_gate_exps, ffn_up_exps and ffn_down_exps,
// quantized blocks included: an expert's rows are whole blocks, a run of bytes).
#include <memory>

#include "model/checkpoint.h"
#include "model/model_config.h"

namespace slab {

// Borrows `checkpoint`. Names the config does not fuse, and names the checkpoint holds itself,
// pass through unchanged. A fused tensor
// of the wrong shape is an error naming its file and tensor (thrown when a slice is asked for).
std::unique_ptr<Checkpoint> split_fused_projections(const ModelConfig& config, const Checkpoint& checkpoint);

}  // namespace slab
