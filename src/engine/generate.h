#pragma once
// One sequence generated start to finish with the KV cache it owns: what `slabserve generate`
// runs. The continuous-batching Engine serves many sequences at once; this is its single-stream
// special case, kept because it needs no scheduler and is the easiest path to reason about.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/sampler.h"
#include "model/model.h"

namespace slab {

struct GenerationRequest {
  std::vector<int32_t> prompt;  // must be non-empty
  int max_tokens = 16;
  SamplingParams sampling;
  std::vector<int32_t> stop_token_ids;  // EOS ids; generation stops after emitting one
  bool ignore_eos = false;
};

enum class FinishReason { stop, length };
const char* finish_reason_name(FinishReason reason);

struct GenerationResult {
  std::vector<int32_t> tokens;
  FinishReason finish_reason = FinishReason::length;
  double prefill_seconds = 0.0;  // prompt processing up to the first token
  double decode_seconds = 0.0;   // every later token
};

// Calls on_token for each generated token as soon as it is sampled; returning false stops early
// (finish reason stop). Throws std::invalid_argument if the prompt is empty or longer than the
// model's context.
GenerationResult generate(const Model& model, const GenerationRequest& request,
                          const std::function<bool(int32_t)>& on_token);

}  // namespace slab
