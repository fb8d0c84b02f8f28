#pragma once
// A loaded model: its config, generation defaults and weights. Loading from a Hugging Face folder
// (config.json, generation_config.json, safetensors) or a GGUF file (the path of the file, or a
// folder holding exactly one .gguf and no config.json) is the one entry point callers use.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_cache.h"
#include "model/model_config.h"
#include "model/weights.h"

namespace slab {

struct Model {
  ModelConfig config;
  GenerationConfig generation;
  ModelWeights weights;
};

// Throws std::runtime_error with one clear message naming the folder/file/field at fault.
Model load_model(const std::filesystem::path& model_dir);
// config.json and generation_config.json only: a Model with empty weights (the runner packs its
// own from the checkpoint).
Model load_model_metadata(const std::filesystem::path& model_dir);
// The weights of either kind of model path, behind the Checkpoint interface.
std::unique_ptr<Checkpoint> open_model_checkpoint(const std::filesystem::path& model);
// The container and tensor types of a model path, for logs and /v1/models:
// "GGUF v3: Q4_K x 97, F32 x 65" or "safetensors: BF16 x 201". Reads headers only.
std::string describe_model_weights(const std::filesystem::path& model);

// One sequence's share of a forward batch: `num_tokens` new tokens at positions
// start_pos .. start_pos + num_tokens - 1 (start_pos = tokens already in its cache), and its
// block table (block ids of the KvCache in position order, covering every position up to
// start_pos + num_tokens; the caller keeps it alive through the forward call).
struct BatchSequence {
  int64_t seq_id = 0;
  int start_pos = 0;
  int num_tokens = 0;
  std::span<const int32_t> block_table;
  // Tokens the sequence holds (prompt and generated so far), which choose longrope's factor set
  // (model/rope_params.h); 0 or less than start_pos + num_tokens: start_pos + num_tokens. The
  // engine passes the whole prompt's length while prefilling it in chunks.
  int rope_length = 0;
  // Logits for the last num_logits of its tokens (1..num_tokens): more than one for a
  // speculative step, whose draft tokens are each verified against the row before them.
  int num_logits = 1;
};

// A flattened variable-length batch: the new tokens of every sequence, concatenated in the order
// of `sequences`.
struct ForwardBatch {
  std::vector<int> tokens;
  std::vector<BatchSequence> sequences;
  bool all_logits = false;  // logits for every token; otherwise each sequence's last num_logits
};

// Runs the transformer over the batch, writing each new token's K/V into `cache` and returning
// logits, [rows, vocab] row-major: each sequence's last num_logits tokens in batch order, or one
// per token when batch.all_logits.
std::vector<float> forward(const Model& model, const ForwardBatch& batch, KvCache& cache);

// Throws std::invalid_argument when the batch does not fit the model or the cache (every forward
// implementation checks with this before touching memory).
void validate_forward_batch(const ModelConfig& config, const ForwardBatch& batch, const KvCache& cache);

// The batch bookkeeping both forward passes share: each token's sequence and position, and the
// rows whose logits are returned (the last num_logits tokens of each sequence, or every token).
struct BatchLayout {
  std::vector<int> token_seq;
  std::vector<int> token_pos;
  std::vector<int> logit_rows;
  int end_pos = 0;  // one past the furthest position of any sequence
};
BatchLayout layout_batch(const ForwardBatch& batch);

}  // namespace slab
