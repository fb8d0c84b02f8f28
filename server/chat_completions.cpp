#include "chat_completions.h"

#include <httplib.h>

#include <random>

#include "api_error.h"
#include "chat_prompt.h"
#include "chat_request.h"
#include "generation_call.h"
#include "sse.h"

namespace slab::server {
namespace {

json token_entry(const Tokenizer& tokenizer, int32_t id, float logprob) {
  const std::string text = tokenizer.decode(std::vector<int32_t>{id}, false);
  return {{"token", text}, {"logprob", logprob}, {"bytes", std::vector<int>(text.begin(), text.end())}};
}

// The chat logprobs shape: {"content": [{token, logprob, bytes, top_logprobs: [...]}, ...]}.
json logprobs_json(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& logprobs) {
  json content = json::array();
  for (const TokenLogprobs& lp : logprobs) {
    json entry = token_entry(tokenizer, lp.token, lp.logprob);
    entry["top_logprobs"] = json::array();
    for (const auto& [id, logprob] : lp.top) entry["top_logprobs"].push_back(token_entry(tokenizer, id, logprob));
    content.push_back(std::move(entry));
  }
  return {{"content", content}};
}

}  // namespace

void handle_chat_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        const httplib::Request& req,
                             httplib::Response& res) {
  const ChatRequest r = parse_chat_request(parse_json_object(req.body));
  if (!r.model.empty() && r.model != options.served_model_name) {
    throw ApiError(404, "The model '" + r.model + "' does not exist.", "model");
  }
  // The template writes any BOS itself, so the text is tokenized without adding special tokens.
  const std::vector<int32_t> prompt = loaded.tokenizer->encode(render_chat_prompt(loaded, r), /*add_special_tokens=*/false);
  if (prompt.empty()) throw ApiError(400, "the chat template rendered an empty prompt", "messages");
  const int top_logprobs = r.logprobs ? r.top_logprobs : -1;
  const uint64_t base_seed = r.sampling.seed.value_or(std::random_device{}());
  std::vector<Request> requests;
  const uint64_t group = r.sampling.n > 1 ? new_prefix_group() : 0;
  for (int c = 0; c < r.sampling.n; ++c) {
    requests.push_back(make_engine_request(r.sampling, prompt, loaded.engine->max_model_len(), loaded.eos_token_ids,
                                           base_seed + static_cast<uint64_t>(c), top_logprobs));
    requests.back().prefix_group = group;
  }
  const int prompt_tokens = static_cast<int>(prompt.size());

  const std::string id = make_response_id("chatcmpl");
  auto call = std::make_shared<GenerationCall>(*loaded.engine, metrics, id);
  call->submit(std::move(requests));
  const int64_t created = unix_time_now();
  const std::string name = options.served_model_name;

  if (!r.sampling.stream) {
    call->wait_all();
    json choices = json::array();
    for (size_t i = 0; i < call->choices().size(); ++i) {
      const ChoiceState& c = call->choices()[i];
      if (c.finish_reason == FinishReason::error) throw std::runtime_error(c.error);
      choices.push_back({{"index", i},
                         {"message", {{"role", "assistant"}, {"content", c.text}}},
                         {"logprobs", r.logprobs ? logprobs_json(*loaded.tokenizer, c.logprobs) : json(nullptr)},
                         {"finish_reason", finish_reason_name(c.finish_reason)}});
    }
    json response = {{"id", id}, {"object", "chat.completion"}, {"created", created}, {"model", name},
                     {"choices", choices}, {"usage", call->usage(prompt_tokens)}};
    res.set_content(response.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    return;
  }

  auto chunk = [id, created, name](size_t index, const json& delta, const json& logprobs, const json& finish) {
    return json{{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", name},
                {"choices", json::array({{{"index", index}, {"delta", delta}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  };
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&loaded, call, chunk, r, prompt_tokens, id, created, name](
                                                            size_t, httplib::DataSink& sink) {
    // Each choice opens with a role-only delta, as OpenAI and vLLM stream it.
    for (size_t i = 0; i < call->choices().size(); ++i) {
      if (!send_sse(sink, chunk(i, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr))) return false;
    }
    const bool ok = call->stream(
        sink,
        [&](size_t choice, const RequestOutput& out) {
          if (out.text.empty() && !(r.logprobs && !out.logprobs.empty())) return json(nullptr);
          return chunk(choice, {{"content", out.text}}, r.logprobs ? logprobs_json(*loaded.tokenizer, out.logprobs) : json(nullptr),
                       nullptr);
        },
        [&](size_t choice, const ChoiceState& c) {
          return chunk(choice, json::object(), nullptr, finish_reason_name(c.finish_reason));
        });
    if (!ok) return false;
    if (r.sampling.include_usage) {
      send_sse(sink, {{"id", id}, {"object", "chat.completion.chunk"}, {"created", created}, {"model", name},
                      {"choices", json::array()}, {"usage", call->usage(prompt_tokens)}});
    }
    send_sse_done(sink);
    return true;
  });
}

}  // namespace slab::server
