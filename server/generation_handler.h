#pragma once
// The one generation path both endpoints share: engine requests from parsed prompts and
// sampling fields (validated once, in parse_sampling_fields and Engine::submit), then either a
// wait for every choice or a stream of server-sent events, and the OpenAI envelope around the
// choices. Each endpoint supplies only its ResponseShape: how a choice looks whole, as a delta,
// and when it finishes.
#include <string>
#include <vector>

#include "api_server.h"
#include "generation_call.h"
#include "http/exchange.h"
#include "sampling_fields.h"

namespace slab::server {

// One prompt ready for the engine, and its text for echo.
struct PromptInput {
  std::vector<int32_t> ids;
  std::string text;
};

struct GenerationJob {
  std::vector<PromptInput> prompts;  // n choices each, prompt-major
  SamplingFields sampling;
  int logprobs = -1;               // -1: none; n >= 0: the chosen token's and the n most likely
  const char* id_prefix = "cmpl";  // "cmpl-…", "chatcmpl-…"
};

class ResponseShape {
 public:
  virtual ~ResponseShape() = default;
  // "text_completion", "chat.completion" / "chat.completion.chunk".
  virtual const char* object(bool chunk) const = 0;
  // A finished choice of a whole (non-streamed) response.
  virtual json choice(size_t index, const ChoiceState& state) = 0;
  // Streams: the choice object that opens a choice (null: none), the one carrying new output
  // (null: nothing to send), and the one that closes it with its finish reason. `state` already
  // includes `output`.
  virtual json opening_delta(size_t index) = 0;
  virtual json output_delta(size_t index, const RequestOutput& output, const ChoiceState& state) = 0;
  virtual json finish_delta(size_t index, const ChoiceState& state) = 0;
};

// Runs the job and answers on `exchange`. Throws ApiError for requests the engine refuses
// (before any byte is sent). A client that goes away aborts its sequences within one step.
void serve_generation(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                      http::Exchange& exchange, const GenerationJob& job, ResponseShape& shape);

}  // namespace slab::server
