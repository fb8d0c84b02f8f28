#pragma once
// The running engine of a loaded model: submit requests (token ids + sampling + stop
// conditions), read their events from a stream, abort them. Thread-safe; submit and abort
// return at once. The request and output types are the engine's plain data (engine/request.h),
// re-exported here; nothing of the runner or the KV cache is visible.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/request.h"

namespace slab {
class Engine;
}

namespace slab::api {

using slab::finish_reason_name;
using slab::FinishReason;
using slab::Request;
using slab::RequestOutput;
using slab::RequestStream;
using slab::SamplingParams;
using slab::StopConditions;
using slab::TokenLogprobs;

// Counters and gauges (for /metrics), read from any thread.
struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0.0;  // 0..1
  int64_t num_preemptions = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prompt_tokens = 0;  // whole prompts of requests that got their first token
  int64_t generation_tokens = 0;
  int64_t steps = 0;
  // Wall seconds of the engine's steps, and of the thread pool's parallel regions in them: the
  // difference is serial work, which more cores do not shorten.
  double step_seconds = 0;
  double parallel_seconds = 0;
  // The forward passes' wall time by phase ("norms", "qkv", "rope+kv", "attention", "o",
  // "gate_up", "down", "head", "embed"), in that fixed order; empty on the scalar reference path.
  std::vector<std::pair<std::string, double>> forward_phase_seconds;
  // Speculative decoding (zero without it): decode steps that carried a draft, its tokens, those
  // accepted (also by position in the draft), and the tokens those steps emitted.
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  int64_t spec_num_emitted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;  // num_speculative_tokens entries
};

class Engine {
 public:
  explicit Engine(slab::Engine& engine) : engine_(&engine) {}

  // Queues a request; its events (RequestOutput, the last with finished set) arrive on
  // `stream`, which several requests may share. Returns the request's id. Throws
  // std::invalid_argument when the request can never run (empty prompt, prompt + 1 over
  // max_model_len(), token ids outside the vocabulary).
  int64_t submit(Request request, std::shared_ptr<RequestStream> stream);
  // The request ends with FinishReason::abort within one step.
  void abort(int64_t request_id);
  // Every request in flight ends with FinishReason::abort.
  void abort_all();

  EngineStats stats() const;
  int max_model_len() const;

 private:
  slab::Engine* engine_;
};

}  // namespace slab::api
