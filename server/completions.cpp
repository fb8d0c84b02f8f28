#include "completions.h"

#include <httplib.h>

#include <random>

#include "api_error.h"
#include "completion_request.h"
#include "generation_call.h"
#include "sse.h"

namespace slab::server {
namespace {

struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

std::vector<PreparedPrompt> prepare_prompts(const LoadedModel& loaded, const CompletionRequest& r) {
  std::vector<PreparedPrompt> out;
  for (const Prompt& p : r.prompts) {
    PreparedPrompt prepared;
    if (const auto* text = std::get_if<std::string>(&p)) {
      prepared.ids = loaded.tokenizer->encode(*text, /*add_special_tokens=*/true);
      prepared.text = *text;
    } else {
      prepared.ids = std::get<std::vector<int32_t>>(p);
      for (int32_t id : prepared.ids) {
        if (id >= loaded.model.config.vocab_size) {
          throw ApiError(400, "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                                  std::to_string(loaded.model.config.vocab_size) + ")", "prompt");
        }
      }
      prepared.text = loaded.tokenizer->decode(prepared.ids, /*skip_special_tokens=*/false);
    }
    if (prepared.ids.empty()) throw ApiError(400, "the prompt is empty", "prompt");
    out.push_back(std::move(prepared));
  }
  return out;
}

// The legacy completions logprobs shape: parallel lists of tokens, their logprobs and top maps.
json logprobs_json(const Tokenizer& tokenizer, const std::vector<TokenLogprobs>& logprobs) {
  json out = {{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}};
  for (const TokenLogprobs& lp : logprobs) {
    out["tokens"].push_back(tokenizer.decode(std::vector<int32_t>{lp.token}, false));
    out["token_logprobs"].push_back(lp.logprob);
    json top = json::object();
    for (const auto& [id, logprob] : lp.top) top[tokenizer.decode(std::vector<int32_t>{id}, false)] = logprob;
    out["top_logprobs"].push_back(top);
  }
  return out;
}

}  // namespace

void handle_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        const httplib::Request& req,
                        httplib::Response& res) {
  const CompletionRequest r = parse_completion_request(parse_json_object(req.body));
  if (!r.model.empty() && r.model != options.served_model_name) {
    throw ApiError(404, "The model '" + r.model + "' does not exist.", "model");
  }
  const std::vector<PreparedPrompt> prompts = prepare_prompts(loaded, r);
  const int n = r.sampling.n;
  const uint64_t base_seed = r.sampling.seed.value_or(std::random_device{}());
  std::vector<Request> requests;  // prompt-major, n choices each
  for (const PreparedPrompt& p : prompts) {
    const uint64_t group = n > 1 ? new_prefix_group() : 0;
    for (int c = 0; c < n; ++c) {
      requests.push_back(make_engine_request(r.sampling, p.ids, loaded.engine->max_model_len(), loaded.eos_token_ids,
                                             base_seed + requests.size(), r.logprobs.value_or(-1)));
      requests.back().prefix_group = group;
    }
  }
  int prompt_tokens = 0;
  for (const PreparedPrompt& p : prompts) prompt_tokens += static_cast<int>(p.ids.size());

  const std::string id = make_response_id("cmpl");
  auto call = std::make_shared<GenerationCall>(*loaded.engine, metrics, id);
  call->submit(std::move(requests));
  const int64_t created = unix_time_now();
  const std::string name = options.served_model_name;
  auto chunk = [id, created, name](size_t index, const std::string& text, const json& logprobs, const json& finish) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                {"choices", json::array({{{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  };

  if (!r.sampling.stream) {
    call->wait_all();
    json choices = json::array();
    for (size_t i = 0; i < call->choices().size(); ++i) {
      const ChoiceState& c = call->choices()[i];
      if (c.finish_reason == FinishReason::error) throw std::runtime_error(c.error);
      choices.push_back({{"index", i}, {"text", r.echo ? prompts[i / n].text + c.text : c.text},
                         {"logprobs", r.logprobs ? logprobs_json(*loaded.tokenizer, c.logprobs) : json(nullptr)},
                         {"finish_reason", finish_reason_name(c.finish_reason)}});
    }
    json response = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                     {"choices", choices}, {"usage", call->usage(prompt_tokens)}};
    res.set_content(response.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    return;
  }

  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&loaded, call, chunk, r, prompts, prompt_tokens, id, created, name](
                                                            size_t, httplib::DataSink& sink) {
    if (r.echo) {
      for (size_t i = 0; i < call->choices().size(); ++i) {
        if (!send_sse(sink, chunk(i, prompts[i / r.sampling.n].text, nullptr, nullptr))) return false;
      }
    }
    const bool ok = call->stream(
        sink,
        [&](size_t choice, const RequestOutput& out) {
          if (out.text.empty() && !(r.logprobs && !out.logprobs.empty())) return json(nullptr);
          return chunk(choice, out.text, r.logprobs ? logprobs_json(*loaded.tokenizer, out.logprobs) : json(nullptr), nullptr);
        },
        [&](size_t choice, const ChoiceState& c) { return chunk(choice, "", nullptr, finish_reason_name(c.finish_reason)); });
    if (!ok) return false;
    if (r.sampling.include_usage) {
      send_sse(sink, {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                      {"choices", json::array()}, {"usage", call->usage(prompt_tokens)}});
    }
    send_sse_done(sink);
    return true;
  });
}

}  // namespace slab::server
