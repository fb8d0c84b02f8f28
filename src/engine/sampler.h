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

#include "engine/draft_acceptance.h"
#include "engine/sampling_params.h"
#include "engine/token_selection.h"

namespace slab {

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
  // (stop tokens under min_tokens) get no probability. `allowed` (a bitset over the vocabulary,
  // bit t of word t / 64; empty: all) is an output constraint's mask: it applies first, so
  // log probabilities are those of the constrained distribution, as vLLM reports them.
  // Logits are modified in place.
  SampledToken sample(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      std::span<const int32_t> banned = {}, std::span<const uint64_t> allowed = {});
  // Speculative decoding's verification of one proposed token (engine/draft_acceptance.h): the
  // same processing as sample(), then `draft` is accepted with its probability under the
  // distribution sample() would draw from (greedy: iff it is the argmax), else replaced by a
  // draw from that distribution without it. The returned token is distributed exactly as
  // sample()'s; its logprobs are reported the same way. The draws differ from sample()'s, so a
  // seeded request's tokens depend on whether it speculated (its distribution does not).
  SampledToken verify(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      std::span<const int32_t> banned, std::span<const uint64_t> allowed, int32_t draft,
                      bool& accepted);

  const SamplingParams& params() const { return params_; }

 private:
  // sample() and verify(): `draft` null samples, else verifies it into `accepted`.
  SampledToken choose(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output,
                      std::span<const int32_t> banned, std::span<const uint64_t> allowed, const int32_t* draft,
                      bool* accepted);
  DraftVerdict verify_draw(std::span<const float> logits, int32_t draft);
  void apply_penalties(std::span<float> logits, std::span<const int32_t> prompt, std::span<const int32_t> output);
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
