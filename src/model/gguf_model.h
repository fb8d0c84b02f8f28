#pragma once
// Serving a GGUF file: its architecture metadata as a ModelConfig, and its tensors behind the
// Checkpoint interface under the Hugging Face names the loader asks for (token_embd.weight is
// model.embed_tokens.weight, blk.N.attn_q.weight is model.layers.N.self_attn.q_proj.weight, ...).
#include <filesystem>
#include <memory>
#include <string>

#include "model/checkpoint.h"
#include "model/model_config.h"
#include "runtime/gguf_file.h"

namespace slab {

// general.architecture llama (Llama, Mistral, and Mixtral when expert_count > 0), qwen2, qwen3,
// qwen3moe, phi3 (fused tensors, partial rotary, longrope factors as tensors, sliding window) or
// gemma3 (read as llama.cpp reads it: fixed local/global period 6 unless
// attention.sliding_window_pattern says, attention scale head_dim^-0.5 but hidden / heads for the
// 62-layer 27B, norms stored as 1 + w). Mixtures of experts as llama.cpp runs them: top-k weights
// always renormalised, every layer routed. Throws naming the file and the key (or tensor) at
// fault: an unknown architecture, a missing or mistyped key, an option the engine does not
// implement (partial rotary outside phi3, YaRN, RoPE divisors in rope_freqs.weight that no Llama 3
// scaling produces, shared experts, expert groups, routing other than softmax). Llama 3.1's
// scaling parameters are recovered from those divisors.
ModelConfig gguf_model_config(const GgufFile& file);

// Opens the file's weights. F32/F16/BF16 tensors are read from the memory map; quantized ones
// keep their blocks in the view (TensorView::blocks) for the quantized packing and are decoded to
// BF16 only when tensor() asks (until release()), with one log line naming their types. llama's Q
// and K rows, which the GGUF converter interleaves for ggml's RoPE, are put back in Hugging Face's
// rotate-half order; gemma3's norm weights, which the converter stores as 1 + w, are read back as
// w (owned F32). Experts stacked in 3-D tensors (ffn_gate_exps, ...) keep stacked names
// (mlp.experts.gate_proj, ...) for model/fused_tensors.h to slice per expert; older files'
// per-expert ffn_gate.E tensors take the per-expert Hugging Face names.
std::unique_ptr<Checkpoint> open_gguf_checkpoint(const std::filesystem::path& file);
std::unique_ptr<Checkpoint> open_gguf_checkpoint(GgufFile file);

// The Hugging Face name of a GGUF tensor of a general.architecture (empty for a tensor the loader
// has no use for): gemma3 and phi3 name some tensors their own way.
std::string gguf_to_hf_tensor_name(const std::string& gguf_name, const std::string& arch = "llama");

// The tensor types of the file with their counts, most frequent first: "Q4_K x 97, F32 x 65".
std::string describe_gguf_tensor_types(const GgufFile& file);

}  // namespace slab
