#pragma once
// Requests the engine tests submit.
#include <cstdint>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace slab::test {

// Greedy decoding of exactly max_tokens tokens (end-of-sequence ignored).
inline Request greedy_request(std::vector<int32_t> prompt, int max_tokens) {
  Request r;
  r.prompt = std::move(prompt);
  r.sampling.temperature = 0.0f;
  r.stop.max_tokens = max_tokens;
  r.stop.ignore_eos = true;
  return r;
}

}  // namespace slab::test
