#include "engine/generate.h"

#include <algorithm>
#include <chrono>
#include <span>
#include <stdexcept>

#include "kv/contiguous_kv_cache.h"

namespace slab {

const char* finish_reason_name(FinishReason reason) {
  return reason == FinishReason::stop ? "stop" : "length";
}

GenerationResult generate(const Model& model, const GenerationRequest& request,
                          const std::function<bool(int32_t)>& on_token) {
  const ModelConfig& c = model.config;
  const int prompt_len = static_cast<int>(request.prompt.size());
  if (prompt_len == 0) throw std::invalid_argument("generate: the prompt has no tokens");
  if (prompt_len >= c.max_position_embeddings) {
    throw std::invalid_argument("generate: the prompt has " + std::to_string(prompt_len) +
                                " tokens; the model's context is " +
                                std::to_string(c.max_position_embeddings));
  }
  const int max_new = std::min(request.max_tokens, c.max_position_embeddings - prompt_len);

  ContiguousKvCache cache(KvGeometry{c.num_layers, c.num_kv_heads, c.head_dim, 32}, 1,
                          prompt_len + std::max(max_new, 1));
  Sampler sampler(request.sampling);
  GenerationResult result;

  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  auto first_token_time = start;

  ForwardBatch batch;
  batch.tokens.assign(request.prompt.begin(), request.prompt.end());
  batch.sequences = {BatchSequence{0, 0, prompt_len}};
  int pos = prompt_len;
  while (static_cast<int>(result.tokens.size()) < max_new) {
    std::vector<float> logits = forward(model, batch, cache);
    const int32_t token = sampler.sample(std::span<float>(logits.data(), static_cast<size_t>(c.vocab_size)));
    if (result.tokens.empty()) first_token_time = clock::now();
    result.tokens.push_back(token);

    const bool is_stop = !request.ignore_eos &&
        std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(), token) !=
            request.stop_token_ids.end();
    if (!on_token(token) || is_stop) {
      result.finish_reason = FinishReason::stop;
      break;
    }
    batch.tokens = {token};
    batch.sequences = {BatchSequence{0, pos++, 1}};
  }
  const auto end = clock::now();
  result.prefill_seconds = std::chrono::duration<double>(first_token_time - start).count();
  result.decode_seconds = std::chrono::duration<double>(end - first_token_time).count();
  return result;
}

}  // namespace slab
