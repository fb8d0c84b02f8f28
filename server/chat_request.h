#pragma once
// The body of POST /v1/chat/completions (and /tokenize with messages): the conversation as the
// chat template will see it, plus the generation fields.
#include <optional>
#include <string>

#include "sampling_fields.h"

namespace slab::server {

struct ChatRequest {
  std::string model;
  json messages;  // validated: roles, content as a string or text parts (flattened to a string)
  json tools;     // null when absent; validated: a list of {"type": "function", "function": {...}}
  // tool_choice: none (no call parsed), auto (the model decides; its calls are parsed),
  // required (a call is forced by grammar), or one named function (forced likewise).
  enum class ToolChoice { none, automatic, required, named } tool_choice = ToolChoice::automatic;
  std::string tool_choice_name;     // with ToolChoice::named
  bool parallel_tool_calls = true;  // more than one call allowed
  bool add_generation_prompt = true;
  bool continue_final_message = false;
  json chat_template_kwargs = json::object();
  bool logprobs = false;
  int top_logprobs = 0;
  SamplingFields sampling;
};

// Throws ApiError(400) naming the field. `for_tokenize` skips the generation fields.
ChatRequest parse_chat_request(const json& body, bool for_tokenize = false);

}  // namespace slab::server
