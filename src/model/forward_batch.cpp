// The batch bookkeeping both forward passes (forward.cpp, forward_bf16.cpp) share: checking a
// ForwardBatch against the model and the KV memory, and laying its tokens out.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "model/model.h"

namespace slab {

// Checks the batch against the model and the cache before any memory is touched.
void validate_forward_batch(const ModelConfig& config, const ForwardBatch& batch, const KvCache& cache) {
  const KvGeometry& g = cache.geometry();
  if (g.num_layers != config.num_layers || g.num_kv_heads != config.num_kv_heads || g.head_dim != config.head_dim) {
    throw std::invalid_argument("forward: KV cache geometry does not match the model");
  }
  size_t total = 0;
  for (const BatchSequence& seq : batch.sequences) {
    if (seq.num_tokens <= 0 || seq.start_pos < 0) {
      throw std::invalid_argument("forward: sequence " + std::to_string(seq.seq_id) +
                                  " has no new tokens or a negative start position");
    }
    if (seq.num_logits < 1 || seq.num_logits > seq.num_tokens) {
      throw std::invalid_argument("forward: sequence " + std::to_string(seq.seq_id) + " asks for " +
                                  std::to_string(seq.num_logits) + " logits rows of " +
                                  std::to_string(seq.num_tokens) + " tokens");
    }
    const size_t capacity = seq.block_table.size() * static_cast<size_t>(g.block_size);
    if (static_cast<size_t>(seq.start_pos + seq.num_tokens) > capacity) {
      throw std::invalid_argument("forward: sequence " + std::to_string(seq.seq_id) +
                                  " runs past the blocks its table holds");
    }
    for (int32_t block : seq.block_table) {
      if (block < 0 || block >= cache.num_blocks()) {
        throw std::invalid_argument("forward: sequence " + std::to_string(seq.seq_id) + " names block " +
                                    std::to_string(block) + " outside the KV cache");
      }
    }
    total += static_cast<size_t>(seq.num_tokens);
  }
  if (total != batch.tokens.size()) {
    throw std::invalid_argument("forward: sequence lengths do not add up to the token count");
  }
  for (int token : batch.tokens) {
    if (token < 0 || token >= config.vocab_size) {
      throw std::invalid_argument("forward: token id " + std::to_string(token) + " outside the vocabulary");
    }
  }
}

BatchLayout layout_batch(const ForwardBatch& batch) {
  BatchLayout layout;
  const size_t n_tokens = batch.tokens.size();
  layout.token_seq.resize(n_tokens);
  layout.token_pos.resize(n_tokens);
  size_t t = 0;
  for (size_t s = 0; s < batch.sequences.size(); ++s) {
    const BatchSequence& seq = batch.sequences[s];
    for (int i = 0; i < seq.num_tokens; ++i, ++t) {
      layout.token_seq[t] = static_cast<int>(s);
      layout.token_pos[t] = seq.start_pos + i;
    }
    layout.end_pos = std::max(layout.end_pos, seq.start_pos + seq.num_tokens);
    if (!batch.all_logits) {
      for (int r = seq.num_logits; r >= 1; --r) layout.logit_rows.push_back(static_cast<int>(t) - r);
    }
  }
  if (batch.all_logits) {
    for (size_t r = 0; r < n_tokens; ++r) layout.logit_rows.push_back(static_cast<int>(r));
  }
  return layout;
}

}  // namespace slab
