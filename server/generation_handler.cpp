#include "generation_handler.h"

#include <random>

#include "api_error.h"
#include "sse.h"

namespace slab::server {
namespace {

std::vector<Request> engine_requests(const LoadedModel& loaded, const ServerOptions& options,
                                     const GenerationJob& job) {
  const int n = job.sampling.n;
  const size_t sequences = job.prompts.size() * static_cast<size_t>(n);
  if (sequences > static_cast<size_t>(options.max_sequences_per_request)) {
    throw ApiError(400,
                   "the request asks for " + std::to_string(sequences) + " sequences (" +
                       std::to_string(job.prompts.size()) + " prompts x n = " + std::to_string(n) +
                       "); the server takes at most " + std::to_string(options.max_sequences_per_request) +
                       " per request (--max-sequences-per-request)",
                   job.prompts.size() > 1 ? "prompt" : "n");
  }
  const uint64_t base_seed = job.sampling.seed.value_or(std::random_device{}());
  const uint64_t call_group = new_prefix_group();
  std::vector<Request> requests;
  for (const PromptInput& p : job.prompts) {
    const uint64_t prompt_group = n > 1 ? new_prefix_group() : 0;
    for (int c = 0; c < n; ++c) {
      requests.push_back(make_engine_request(job.sampling, p.ids, loaded.engine().max_model_len(),
                                             loaded.eos_token_ids(), base_seed + requests.size(), job.logprobs));
      requests.back().prefix_group = prompt_group;
      requests.back().fairness_group = call_group;
    }
  }
  return requests;
}

}  // namespace

void serve_generation(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                      http::Exchange& exchange, const GenerationJob& job, ResponseShape& shape) {
  int prompt_tokens = 0;
  for (const PromptInput& p : job.prompts) prompt_tokens += static_cast<int>(p.ids.size());
  const std::string id = make_response_id(job.id_prefix);
  GenerationCall call(loaded.engine(), metrics, id);
  call.submit(engine_requests(loaded, options, job));
  const json envelope = {{"id", id},
                         {"object", shape.object(job.sampling.stream)},
                         {"created", unix_time_now()},
                         {"model", options.served_model_name}};
  auto with_choices = [&envelope](json choices) {
    json out = envelope;
    out["choices"] = std::move(choices);
    return out;
  };

  if (!job.sampling.stream) {
    // Every event is one engine step for some choice: checking the socket then notices a
    // client that gave up within a step, and dropping `call` aborts what is left.
    while (!call.all_finished()) {
      if (exchange.client_gone()) return;
      call.next(std::chrono::milliseconds(100));
    }
    json choices = json::array();
    for (size_t i = 0; i < call.choices().size(); ++i) {
      const ChoiceState& c = call.choices()[i];
      if (c.finish_reason == FinishReason::error) throw std::runtime_error(c.error);
      choices.push_back(shape.choice(i, c));
    }
    json response = with_choices(std::move(choices));
    response["usage"] = call.usage(prompt_tokens);
    exchange.respond(200, "application/json", response.dump(-1, ' ', false, json::error_handler_t::replace));
    return;
  }

  if (!exchange.begin_stream(200, "text/event-stream", {{"Cache-Control", "no-cache"}})) return;
  for (size_t i = 0; i < call.choices().size(); ++i) {
    const json opening = shape.opening_delta(i);
    if (!opening.is_null() && !send_sse(exchange, with_choices(json::array({opening})))) return;
  }
  while (!call.all_finished()) {
    std::optional<GenerationCall::Event> event = call.next(std::chrono::milliseconds(500));
    if (!event) {
      if (exchange.client_gone()) return;
      continue;
    }
    const ChoiceState& c = call.choices()[event->choice];
    if (c.finished && c.finish_reason == FinishReason::error) {
      send_sse(exchange, error_event(c.error));
      return;
    }
    const json delta = shape.output_delta(event->choice, event->output, c);
    if (!delta.is_null() && !send_sse(exchange, with_choices(json::array({delta})))) return;
    if (c.finished && !send_sse(exchange, with_choices(json::array({shape.finish_delta(event->choice, c)})))) return;
  }
  if (job.sampling.include_usage) {
    json usage = with_choices(json::array());
    usage["usage"] = call.usage(prompt_tokens);
    if (!send_sse(exchange, usage)) return;
  }
  send_sse_done(exchange);
}

}  // namespace slab::server
