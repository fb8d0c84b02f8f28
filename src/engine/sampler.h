#pragma once
// Picks the next token from one row of logits under a request's sampling parameters.
#include <cstdint>
#include <random>
#include <span>

namespace slab {

struct SamplingParams {
  float temperature = 1.0f;  // 0: greedy
  float top_p = 1.0f;
  int top_k = 0;             // 0: off
  float min_p = 0.0f;
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);
  // Logits are modified in place (temperature, filtering).
  int32_t sample(std::span<float> logits);

 private:
  SamplingParams params_;
  std::mt19937_64 rng_;
};

// Index of the largest logit; ties go to the lowest index, as torch.argmax does.
int32_t argmax(std::span<const float> logits);

}  // namespace slab
