// slab::api::Engine: the public face of slab::Engine, forwarding each call.
#include "slabserve/engine.h"

#include "engine/engine.h"

namespace slab::api {

int64_t Engine::submit(Request request, std::shared_ptr<RequestStream> stream) {
  return engine_->submit(std::move(request), std::move(stream));
}

void Engine::abort(int64_t request_id) { engine_->abort(request_id); }

void Engine::abort_all() { engine_->abort_all(); }

EngineStats Engine::stats() const {
  const slab::EngineStats s = engine_->stats();
  EngineStats out;
  out.num_running = s.num_running;
  out.num_waiting = s.num_waiting;
  out.kv_cache_usage = s.kv_cache_usage;
  out.num_preemptions = s.num_preemptions;
  out.prefix_query_tokens = s.prefix_query_tokens;
  out.prefix_hit_tokens = s.prefix_hit_tokens;
  out.prompt_tokens = s.prompt_tokens;
  out.generation_tokens = s.generation_tokens;
  out.steps = s.steps;
  out.step_seconds = s.step_seconds;
  out.parallel_seconds = s.parallel_seconds;
  if (s.forward_phase_seconds.total() > 0) {
    for (int i = 0; i < static_cast<int>(slab::ForwardPhase::count); ++i) {
      const auto phase = static_cast<slab::ForwardPhase>(i);
      out.forward_phase_seconds.emplace_back(slab::forward_phase_name(phase), s.forward_phase_seconds[phase]);
    }
  }
  out.spec_num_drafts = s.spec_num_drafts;
  out.spec_num_draft_tokens = s.spec_num_draft_tokens;
  out.spec_num_accepted_tokens = s.spec_num_accepted_tokens;
  out.spec_num_emitted_tokens = s.spec_num_emitted_tokens;
  out.spec_accepted_per_position = s.spec_accepted_per_position;
  return out;
}

int Engine::max_model_len() const { return engine_->max_model_len(); }

}  // namespace slab::api
