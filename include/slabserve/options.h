#pragma once
// What slab::api::LoadedModel::load takes: the model path, the compute dtype, where it runs
// (placement), the engine's limits and the chat template. Plain data; every field has a default
// that works on any machine.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

namespace slab::api {

// Where the engine computes and keeps its memory. The rules are those of --threads, --cpuset
// and --numa-node (docs/ARCHITECTURE.md): one pinned pool thread per physical core chosen.
struct PlacementOptions {
  int threads = 0;     // 0: every core the cpuset and node select; more than those is an error
  std::string cpuset;  // Linux cpu list ("0-3,8"); "": the process's own cpuset
  int numa_node = -1;  // -1: any node and no memory binding
};

// Empty when `placement` can be resolved on this machine, else the reason, starting with the
// flag and the value at fault ("--cpuset 99-100: ..."). Lets a program refuse bad options
// before it spends time loading.
std::string check_placement(const PlacementOptions& placement);

struct EngineOptions {
  int max_num_seqs = 128;             // sequences running at once
  int max_num_batched_tokens = 2048;  // new tokens in one step
  int block_size = 32;                // tokens per KV cache block, a positive multiple of 16
  size_t kv_cache_bytes = size_t{1} << 30;
  int kv_cache_tokens = 0;  // > 0: the KV cache holds this many tokens (wins over kv_cache_bytes)
  bool enable_prefix_caching = true;
  // 0: the model's context, clamped (with a warning) to what the KV cache holds; > 0: this
  // length, refused when the KV cache cannot hold it.
  int max_model_len = 0;
  // Speculative decoding (vLLM V0's option names; docs/ARCHITECTURE.md, "Speculative decoding").
  // "": off. "[ngram]": drafts by prompt lookup, num_speculative_tokens (> 0) at a time, from
  // the latest earlier occurrence of the last n tokens, n from ngram_prompt_lookup_max (> 0)
  // down to ngram_prompt_lookup_min. Else the path of a draft model (a Hugging Face folder or
  // GGUF file, as `model`) of the same vocabulary and tokenizer, which proposes
  // num_speculative_tokens greedy tokens per step; it runs with the same dtype, quantization
  // and threads, and needs at least max_model_len positions (the ngram options stay unset).
  std::string speculative_model;
  int num_speculative_tokens = 0;
  int ngram_prompt_lookup_max = 0;
  int ngram_prompt_lookup_min = 1;
  // A step speculates only while at most this many sequences run (0: whatever the number);
  // above, a decode step is compute-bound already and drafts would only add work.
  int speculative_disable_by_batch_size = 8;
};

// Bytes of the checkpoint's tensors read and packed so far, and in all; called on the loading
// thread, the last call with done_bytes == total_bytes.
using LoadProgressCallback = std::function<void(size_t done_bytes, size_t total_bytes)>;

struct LoadOptions {
  // A Hugging Face folder (config.json, safetensors, tokenizer.json or tokenizer.model), a GGUF
  // file, or a folder holding exactly one .gguf and no config.json.
  std::string model;
  // "auto" or "bfloat16": the BF16 kernels where the CPU has them; "float32": the scalar reference.
  std::string dtype = "auto";
  PlacementOptions placement;
  EngineOptions engine;
  // "": the model's own template (none is fine: chat rendering then refuses). Else the name of
  // a built-in template (builtin_chat_template_names()) or a Jinja file, overriding the model's.
  std::string chat_template;
  // Weights of the linear projections: "auto" (BF16, but a GGUF file's quantized projections and
  // head run on the INT8/INT4 kernels, repacked from the blocks), "none" (BF16 everywhere), "w8" (INT8 per output
  // channel), "w8g32" (INT8 groups of 32), "w4" (INT4 groups of 32), "w4g128" (INT4 groups of
  // 128), quantized at load.
  std::string quantization = "auto";
  bool quantize_lm_head = false;          // with w8/w8g32/w4/w4g128: the head and the embedding table as well
  // Linears past the decode sizes on the AMX tiles where the CPU has them (BF16 weights from 9
  // rows on AMX-BF16; quantized ones from 16-32 rows, by format, on AMX-INT8 or dequantized to
  // AMX-BF16), and attention on AMX-BF16; false keeps them on the AVX-512 register tiles (--no-amx).
  bool amx = true;
  LoadProgressCallback on_load_progress;  // optional
};

// Empty when LoadedModel::load would accept the options as such (dtype, block size, engine
// limits, placement), else the reason; the model itself is not looked at.
std::string check_load_options(const LoadOptions& options);

}  // namespace slab::api
