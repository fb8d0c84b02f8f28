#pragma once
// The body of POST /v1/completions, parsed and validated. Every rejection is an ApiError naming
// the field, so the client sees which part of its request is wrong.
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace slab::server {

// A prompt as the client sent it: text to tokenize, or token ids to use as they are.
using Prompt = std::variant<std::string, std::vector<int32_t>>;

struct CompletionRequest {
  std::string model;
  std::vector<Prompt> prompts;
  std::optional<int> max_tokens;  // absent: up to the context
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  int n = 1;
  bool stream = false;
  bool include_usage = false;
  std::optional<int> logprobs;  // completions: the number of top log probabilities per token
  bool echo = false;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
};

// Throws ApiError(400) naming the field for a wrong type or an out-of-range value.
CompletionRequest parse_completion_request(const nlohmann::json& body);

}  // namespace slab::server
