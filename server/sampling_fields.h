#pragma once
// The generation fields /v1/completions and /v1/chat/completions share (OpenAI's names and
// vLLM's extras), and their translation into an engine Request.
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "json_fields.h"
#include "slabserve/engine.h"

namespace slab::server {

struct SamplingFields {
  std::optional<int> max_tokens;  // absent: up to the context
  float temperature = 1.0f;
  float top_p = 1.0f;
  int top_k = 0;
  float min_p = 0.0f;
  float repetition_penalty = 1.0f;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  std::vector<std::pair<int32_t, float>> logit_bias;
  std::optional<uint64_t> seed;
  int n = 1;
  int min_tokens = 0;
  bool ignore_eos = false;
  std::vector<std::string> stop;
  std::vector<int32_t> stop_token_ids;
  bool stream = false;
  bool include_usage = false;
  std::string grammar;              // the output constraint (output_constraint_fields.h); empty: none
  bool skip_special_tokens = true;  // false while tool calls are parsed (their markers may be special)
};

// The body fields parse_sampling_fields reads (every endpoint that generates accepts them).
inline constexpr std::string_view kSamplingFieldNames[] = {"max_tokens",
                                                           "temperature",
                                                           "top_p",
                                                           "top_k",
                                                           "min_p",
                                                           "repetition_penalty",
                                                           "presence_penalty",
                                                           "frequency_penalty",
                                                           "logit_bias",
                                                           "seed",
                                                           "n",
                                                           "min_tokens",
                                                           "ignore_eos",
                                                           "stop",
                                                           "stop_token_ids",
                                                           "stream",
                                                           "stream_options",
                                                           "best_of",
                                                           "user"};

// Most entries of logit_bias accepted (OpenAI's and vLLM's limit).
inline constexpr size_t kMaxLogitBiasEntries = 300;

// `max_tokens_names` lists the accepted spellings of the length limit, first wins
// (chat accepts max_completion_tokens and max_tokens).
SamplingFields parse_sampling_fields(const json& body, std::initializer_list<const char*> max_tokens_names);

// Builds the engine request for one choice. Throws ApiError(400) when prompt plus max_tokens do
// not fit the context (vLLM's message).
Request make_engine_request(const SamplingFields& fields, std::vector<int32_t> prompt, int max_model_len,
                            const std::vector<int32_t>& eos_token_ids, uint64_t seed, int logprobs);

}  // namespace slab::server
