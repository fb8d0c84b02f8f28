#pragma once
// The body of POST /v1/completions, parsed and validated.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "sampling_fields.h"

namespace slab::server {

// A prompt as the client sent it: text to tokenize, or token ids to use as they are.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest {
  std::string model;
  std::vector<Prompt> prompts;
  std::optional<int> logprobs;  // the number of top log probabilities per token
  bool echo = false;
  SamplingFields sampling;
};

// Throws ApiError(400) naming the field for a wrong type or an out-of-range value.
CompletionRequest parse_completion_request(const json& body);

}  // namespace slab::server
