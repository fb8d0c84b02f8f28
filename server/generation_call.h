#pragma once
// The engine requests of one HTTP call (n choices × prompts) and what has come back for each.
// Dropping the call aborts whatever is unfinished, so a client that disconnects frees its KV
// blocks within one engine step.
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "json_fields.h"
#include "metrics.h"
#include "slabserve/engine.h"

namespace slab::server {

struct ChoiceState {
  std::string text;
  std::vector<TokenLogprobs> logprobs;
  int completion_tokens = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  double ttft_seconds = 0.0;
  bool finished = false;
  FinishReason finish_reason = FinishReason::stop;
  std::string error;
};

class GenerationCall {
 public:
  // `log_id` names the call in the per-request log line.
  GenerationCall(api::Engine& engine, Metrics& metrics, std::string log_id);
  ~GenerationCall();
  GenerationCall(const GenerationCall&) = delete;
  GenerationCall& operator=(const GenerationCall&) = delete;

  // Submits every request (choice i is requests[i]). A request the engine refuses becomes an
  // ApiError(400); the ones already submitted are aborted.
  void submit(std::vector<Request> requests);

  struct Event {
    size_t choice;
    RequestOutput output;
  };
  // The next engine event, already folded into its choice; nullopt after `timeout`.
  std::optional<Event> next(std::chrono::milliseconds timeout);

  bool all_finished() const;
  const std::vector<ChoiceState>& choices() const { return choices_; }
  // OpenAI usage: prompt tokens counted once per prompt, completion tokens over all choices.
  json usage(int prompt_tokens) const;

 private:
  void record_finish(size_t choice, FinishReason reason, double queue_seconds);

  api::Engine& engine_;
  Metrics& metrics_;
  std::string log_id_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  std::vector<std::chrono::steady_clock::time_point> last_token_at_;
  std::shared_ptr<RequestStream> stream_ = std::make_shared<RequestStream>();
  std::vector<int64_t> ids_;
  std::unordered_map<int64_t, size_t> choice_of_;
  std::vector<ChoiceState> choices_;
};

// A fresh non-zero Request::prefix_group for the n choices of one prompt.
uint64_t new_prefix_group();

// OpenAI-style ids: "cmpl-…", "chatcmpl-…".
std::string make_response_id(const char* prefix);
int64_t unix_time_now();

}  // namespace slab::server
