#pragma once
// What a front end hands the engine (Request) and what it gets back (RequestOutput events on a
// RequestStream). Plain data: the engine knows nothing of HTTP, the server nothing of tensors.
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engine/sampling_params.h"

namespace slab {

enum class FinishReason { stop, length, abort, error };
const char* finish_reason_name(FinishReason reason);

struct StopConditions {
  int max_tokens = 16;
  int min_tokens = 0;                   // EOS and stop tokens are suppressed before this many
  std::vector<int32_t> stop_token_ids;  // end generation; emitted as tokens, not as text
  std::vector<int32_t> eos_token_ids;   // the model's EOS; ignored with ignore_eos
  bool ignore_eos = false;
  std::vector<std::string> stop_strings;  // end generation; never part of the text
};

struct Request {
  std::vector<int32_t> prompt;
  SamplingParams sampling;
  StopConditions stop;
  int priority = 0;  // lower runs first among requests that arrived together (tiebreak)
  // Requests with the same non-zero group share a prompt (the n choices of one request): later
  // ones are admitted once the first has its prompt in the cache, and reuse its blocks.
  uint64_t prefix_group = 0;
  // Requests with the same non-zero group came from one client call (its prompts x n choices).
  // Admission is fair across groups: a call with many sequences cannot keep others waiting.
  uint64_t fairness_group = 0;
  // The output must follow this grammar (GBNF text, grammar/grammar.h; JSON schemas, regexes and
  // choices are converted to it by grammar/json_schema.h). Empty: unconstrained. Enforced in
  // decoding: each step samples only tokens the grammar allows, the model's end tokens only where
  // the grammar may end, and the request stops when the grammar is complete.
  std::string grammar;
  // Special tokens' text is left out of the output text (Hugging Face's default). A front end
  // that parses tool calls keeps it: Mistral's [TOOL_CALLS] and Llama's <|python_tag|> are
  // special tokens. EOS and stop tokens are never part of the text either way.
  bool skip_special_tokens = true;
};

// The tokens and their log probabilities for one generated position, when asked for.
struct TokenLogprobs {
  int32_t token = 0;
  float logprob = 0.0f;
  std::vector<std::pair<int32_t, float>> top;  // most likely tokens first
};

// One event of a request's output. Text is always complete UTF-8 with stop strings held back.
struct RequestOutput {
  int64_t request_id = 0;               // as submit() returned it; several requests may share a stream
  std::vector<int32_t> tokens;          // newly generated
  std::vector<TokenLogprobs> logprobs;  // one per new token when sampling.logprobs >= 0
  std::string text;                     // new text
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;
  std::string error;  // with FinishReason::error
  int prompt_tokens = 0;
  int cached_prompt_tokens = 0;  // served from the prefix cache
  int completion_tokens = 0;     // so far
  double queue_seconds = 0.0;    // from submit until first scheduled (so far, if still waiting)
  // Engine-side clock, from submit: when the first token was sampled (0 before) and when this
  // event was made. Consumers that read events late still get true generation speeds.
  double first_token_seconds = 0.0;
  double elapsed_seconds = 0.0;
};

// Engine to consumer, one per request. push() never blocks the engine loop.
class RequestStream {
 public:
  void push(RequestOutput output);
  // Waits up to `timeout` for the next event; nullopt on time-out.
  std::optional<RequestOutput> next(std::chrono::milliseconds timeout);

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<RequestOutput> events_;
};

}  // namespace slab
