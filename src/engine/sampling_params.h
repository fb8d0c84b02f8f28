#pragma once
// What a request asks of sampling: plain data, shared by Request (engine/request.h, and through
// it the public API) and the Sampler that applies it (engine/sampler.h).
#include <cstdint>
#include <utility>
#include <vector>

namespace slab {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;  // 0: off
  float min_p = 0.0f;
  uint64_t seed = 0;
  float repetition_penalty = 1.0f;  // > 1 discourages tokens of the prompt and output
  float presence_penalty = 0.0f;    // subtracted once from tokens already in the output
  float frequency_penalty = 0.0f;   // subtracted per occurrence in the output
  std::vector<std::pair<int32_t, float>> logit_bias;
  int logprobs = -1;  // -1: none; n >= 0: the chosen token's logprob and the n most likely
};

}  // namespace slab
