#pragma once
// Picks the next token of one sequence from its row of logits, under the request's sampling
// parameters, in vLLM's order: logit bias and min_tokens suppression, repetition/presence/
// frequency penalties, temperature, top-k, top-p, min-p. Each sequence owns its Sampler, so a
// seeded request draws the same tokens whatever else is in the batch. No step sorts the
// vocabulary (engine/token_selection.h finds the few tokens that matter).
#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "engine/token_selection.h"

namespace slab {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;             // 0: off
  float min_p = 0.0f;
  uint64_t seed = 0;
  float repetition_penalty = 1.0f;  // > 1 discourages tokens of the prompt and output
  float presence_penalty = 0.0f;    // subtracted once from tokens already in the output
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;
  int logprobs = -1;  // -1: none; n >= 0: the chosen token's logprob and the n most likely
};

struct SampledToken {
  int32_t token = 0;
  float logprob = 0.0f;                        // of the chosen token under the model's distribution
  std::vector<std::pair<int32_t, float>> top;  // when params.logprobs > 0
};

class Sampler {
 public:
  // isa: which sampling row kernels run (tests pin each one).
  explicit Sampler(const SamplingParams& params, kern::Isa isa = best_sampling_isa());

  // `prompt` and `output` are the sequence's tokens so far (for penalties); `banned` tokens
  // (stop tokens under min_tokens) get no probability. Logits are modified in place.
  SampledToken sample(std::span<float> logits, std::span<const int32_t> prompt,
                      std::span<const int32_t> output, std::span<const int32_t> banned = {});

  const SamplingParams& params() const { return params_; }

 private:
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt,
                       std::span<const int32_t> output);
  int32_t greedy(std::span<const float> logits) const;
  int32_t draw(std::span<const float> logits);
  int32_t draw_from_whole_vocab(std::span<const float> logits);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<int32_t> counts_;  // scratch: occurrences per token in the output
  TokenSelector selector_;
};

// Index of the largest logit; ties go to the lowest index, as torch.argmax does.
int32_t argmax(std::span<const float> logits);

}  // namespace slab
