#include "completions.h"

#include <httplib.h>

#include <chrono>
#include <random>
#include <unordered_map>

#include "api_error.h"
#include "completion_request.h"

namespace slab::server {
namespace {

using nlohmann::json;

struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

// Everything the response needs about one choice, built up from engine events.
struct ChoiceState {
  std::string text;
  json tokens = json::array();
  json token_logprobs = json::array();
  json top_logprobs = json::array();
  int completion_tokens = 0;
  int prompt_tokens = 0;
  int cached_tokens = 0;
  bool finished = false;
  std::string finish_reason;
  std::string error;
};

// The requests of one HTTP call; aborts whatever is unfinished when the call goes away, so a
// client that disconnects frees its KV blocks within one engine step.
struct CompletionCall {
  Engine& engine;
  std::shared_ptr<RequestStream> stream = std::make_shared<RequestStream>();
  std::vector<int64_t> ids;
  std::unordered_map<int64_t, size_t> choice_of;
  std::vector<ChoiceState> choices;
  std::vector<PreparedPrompt> prompts;
  CompletionRequest request;

  explicit CompletionCall(Engine& e) : engine(e) {}
  ~CompletionCall() {
    for (size_t i = 0; i < ids.size(); ++i) {
      if (!choices[i].finished) engine.abort(ids[i]);
    }
  }
  bool all_finished() const {
    return std::all_of(choices.begin(), choices.end(), [](const ChoiceState& c) { return c.finished; });
  }
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

Request engine_request(const LoadedModel& loaded, const CompletionRequest& r, const std::vector<int32_t>& prompt,
                       uint64_t seed) {
  const int max_len = loaded.engine->max_model_len();
  const int prompt_len = static_cast<int>(prompt.size());
  const int room = max_len - prompt_len;
  const int max_tokens = r.max_tokens.value_or(room);
  if (room <= 0 || max_tokens > room) {
    throw ApiError(400, "This model's maximum context length is " + std::to_string(max_len) +
                            " tokens. However, you requested " + std::to_string(prompt_len + max_tokens) +
                            " tokens (" + std::to_string(prompt_len) + " in the prompt, " +
                            std::to_string(max_tokens) + " for the completion). Please reduce the prompt or max_tokens.",
                   "max_tokens");
  }
  Request e;
  e.prompt = prompt;
  e.sampling.temperature = r.temperature;
  e.sampling.top_p = r.top_p;
  e.sampling.top_k = r.top_k;
  e.sampling.min_p = r.min_p;
  e.sampling.seed = seed;
  e.sampling.logprobs = r.logprobs.value_or(-1);
  e.stop.max_tokens = max_tokens;
  e.stop.ignore_eos = r.ignore_eos;
  e.stop.stop_token_ids = r.stop_token_ids;
  e.stop.stop_strings = r.stop;
  e.stop.eos_token_ids = loaded.model.config.eos_token_ids;
  if (auto eos = loaded.tokenizer->eos_id()) e.stop.eos_token_ids.push_back(*eos);
  return e;
}

// Folds one engine event into its choice; returns the text it added.
std::string apply_event(const LoadedModel& loaded, ChoiceState& c, const RequestOutput& out, json* delta_logprobs) {
  c.text += out.text;
  c.completion_tokens = out.completion_tokens;
  c.prompt_tokens = out.prompt_tokens;
  c.cached_tokens = out.cached_prompt_tokens;
  for (const TokenLogprobs& lp : out.logprobs) {
    const std::string token_text = loaded.tokenizer->decode(std::vector<int32_t>{lp.token}, false);
    json top = json::object();
    for (const auto& [id, logprob] : lp.top) top[loaded.tokenizer->decode(std::vector<int32_t>{id}, false)] = logprob;
    c.tokens.push_back(token_text);
    c.token_logprobs.push_back(lp.logprob);
    c.top_logprobs.push_back(top);
    if (delta_logprobs != nullptr) {
      (*delta_logprobs)["tokens"].push_back(token_text);
      (*delta_logprobs)["token_logprobs"].push_back(lp.logprob);
      (*delta_logprobs)["top_logprobs"].push_back(top);
    }
  }
  if (out.finished) {
    c.finished = true;
    c.finish_reason = finish_reason_name(out.finish_reason);
    c.error = out.error;
  }
  return out.text;
}

json usage_json(const std::vector<ChoiceState>& choices, const std::vector<PreparedPrompt>& prompts) {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  int cached = 0;
  for (const PreparedPrompt& p : prompts) prompt_tokens += static_cast<int>(p.ids.size());
  for (const ChoiceState& c : choices) {
    completion_tokens += c.completion_tokens;
    cached = std::max(cached, c.cached_tokens);
  }
  return {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
          {"total_tokens", prompt_tokens + completion_tokens}, {"prompt_tokens_details", {{"cached_tokens", cached}}}};
}

std::string request_id() {
  static std::mt19937_64 rng{std::random_device{}()};
  static std::mutex m;
  std::lock_guard lock(m);
  char buf[40];
  std::snprintf(buf, sizeof buf, "cmpl-%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

int64_t unix_time() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void handle_completions(const LoadedModel& loaded, const ServerOptions& options, const httplib::Request& req,
                        httplib::Response& res) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  auto call = std::make_shared<CompletionCall>(*loaded.engine);
  call->request = parse_completion_request(body);
  const CompletionRequest& r = call->request;
  if (!r.model.empty() && r.model != options.served_model_name) {
    throw ApiError(404, "The model '" + r.model + "' does not exist.", "model");
  }
  call->prompts = prepare_prompts(loaded, r);
  const uint64_t base_seed = r.seed.value_or(std::random_device{}());
  std::vector<Request> requests;  // prompt-major, n choices each
  for (const PreparedPrompt& p : call->prompts) {
    for (int c = 0; c < r.n; ++c) requests.push_back(engine_request(loaded, r, p.ids, base_seed + requests.size()));
  }
  call->choices.resize(requests.size());
  for (Request& e : requests) {
    try {
      call->ids.push_back(loaded.engine->submit(std::move(e), call->stream));
    } catch (const std::invalid_argument& err) {
      call->choices.resize(call->ids.size());  // the destructor aborts only what was submitted
      throw ApiError(400, err.what(), "prompt");
    }
    call->choice_of[call->ids.back()] = call->ids.size() - 1;
  }

  const std::string id = request_id();
  const int64_t created = unix_time();
  const std::string name = options.served_model_name;
  auto choice_chunk = [id, created, name](size_t index, const std::string& text, const json& logprobs, const json& finish) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                {"choices", json::array({{{"index", index}, {"text", text}, {"logprobs", logprobs}, {"finish_reason", finish}}})}};
  };

  if (!r.stream) {
    while (!call->all_finished()) {
      if (std::optional<RequestOutput> out = call->stream->next(std::chrono::milliseconds(1000))) {
        apply_event(loaded, call->choices[call->choice_of.at(out->request_id)], *out, nullptr);
      }
    }
    json choices = json::array();
    for (size_t i = 0; i < call->choices.size(); ++i) {
      const ChoiceState& c = call->choices[i];
      if (c.finish_reason == "error") throw std::runtime_error(c.error);
      json logprobs = nullptr;
      if (r.logprobs) logprobs = {{"tokens", c.tokens}, {"token_logprobs", c.token_logprobs}, {"top_logprobs", c.top_logprobs}};
      choices.push_back({{"index", i}, {"text", r.echo ? call->prompts[i / r.n].text + c.text : c.text},
                         {"logprobs", logprobs}, {"finish_reason", c.finish_reason}});
    }
    json response = {{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                     {"choices", choices}, {"usage", usage_json(call->choices, call->prompts)}};
    res.set_content(response.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
    return;
  }

  // Streaming: events are forwarded as they come; a failed write means the client is gone,
  // and dropping `call` aborts its unfinished requests.
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&loaded, call, choice_chunk, id, created, name](size_t, httplib::DataSink& sink) {
    auto send = [&sink](const json& event) {
      const std::string line = "data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
      return sink.write(line.data(), line.size());
    };
    const CompletionRequest& rq = call->request;
    if (rq.echo) {
      for (size_t i = 0; i < call->choices.size(); ++i) {
        if (!send(choice_chunk(i, call->prompts[i / rq.n].text, nullptr, nullptr))) return false;
      }
    }
    while (!call->all_finished()) {
      std::optional<RequestOutput> out = call->stream->next(std::chrono::milliseconds(500));
      if (!out) {
        if (!sink.is_writable()) return false;
        continue;
      }
      const size_t index = call->choice_of.at(out->request_id);
      ChoiceState& c = call->choices[index];
      json delta_logprobs = rq.logprobs ? json{{"tokens", json::array()}, {"token_logprobs", json::array()}, {"top_logprobs", json::array()}} : json(nullptr);
      const std::string text = apply_event(loaded, c, *out, rq.logprobs ? &delta_logprobs : nullptr);
      if (c.finished && c.finish_reason == "error") {
        send({{"error", {{"message", c.error}, {"type", "server_error"}, {"param", nullptr}, {"code", 500}}}});
        return false;
      }
      if ((!text.empty() || (rq.logprobs && !out->tokens.empty())) && !send(choice_chunk(index, text, delta_logprobs, nullptr))) return false;
      if (c.finished && !send(choice_chunk(index, "", nullptr, c.finish_reason))) return false;
    }
    if (rq.include_usage) {
      send({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name}, {"choices", json::array()},
            {"usage", usage_json(call->choices, call->prompts)}});
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    return true;
  });
}

}  // namespace slab::server
