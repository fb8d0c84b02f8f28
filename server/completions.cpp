#include "completions.h"

#include <httplib.h>

#include <chrono>
#include <random>

#include "api_error.h"
#include "completion_request.h"
#include "engine/generate.h"
#include "engine/stop_strings.h"

namespace slab::server {
namespace {

using nlohmann::json;

struct PreparedPrompt {
  std::vector<int32_t> ids;
  std::string text;  // for echo
};

struct ChoiceOutcome {
  std::string text;
  int completion_tokens = 0;
  std::string finish_reason;
};

int context_length(const LoadedModel& loaded, const ServerOptions& options) {
  const int model_len = loaded.model.config.max_position_embeddings;
  return options.max_model_len > 0 ? std::min(options.max_model_len, model_len) : model_len;
}

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

GenerationRequest generation_request(const LoadedModel& loaded, const CompletionRequest& r,
                                     const std::vector<int32_t>& prompt, int max_len, uint64_t seed) {
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
  GenerationRequest g;
  g.prompt = prompt;
  g.max_tokens = max_tokens;
  g.sampling = SamplingParams{r.temperature, r.top_p, r.top_k, r.min_p, seed};
  g.ignore_eos = r.ignore_eos;
  g.stop_token_ids = r.stop_token_ids;
  if (!r.ignore_eos) {
    for (int id : loaded.model.config.eos_token_ids) g.stop_token_ids.push_back(id);
    if (auto eos = loaded.tokenizer->eos_id()) g.stop_token_ids.push_back(*eos);
  }
  return g;
}

// Runs one choice, passing each piece of text as soon as it is final. on_text returning false
// (the client went away) stops generation.
ChoiceOutcome run_choice(const LoadedModel& loaded, const GenerationRequest& g,
                         const std::vector<std::string>& stop,
                         const std::function<bool(const std::string&)>& on_text) {
  ChoiceOutcome outcome;
  IncrementalDetokenizer detokenizer(*loaded.tokenizer, /*skip_special_tokens=*/true);
  detokenizer.seed(g.prompt);
  StopStringMatcher matcher(stop);
  bool stopped_by_string = false;
  bool client_gone = false;
  GenerationResult result = generate(loaded.model, g, [&](int32_t token) {
    StopStringMatcher::Output piece = matcher.push(detokenizer.push(token));
    outcome.text += piece.text;
    if (!piece.text.empty() && !on_text(piece.text)) client_gone = true;
    stopped_by_string = piece.stopped;
    return !piece.stopped && !client_gone;
  });
  if (!stopped_by_string && !client_gone) {
    std::string tail = matcher.push(detokenizer.flush()).text + matcher.flush();
    outcome.text += tail;
    if (!tail.empty()) on_text(tail);
  }
  outcome.completion_tokens = static_cast<int>(result.tokens.size());
  outcome.finish_reason = client_gone ? "abort" : finish_reason_name(result.finish_reason);
  return outcome;
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

void handle_completions(const LoadedModel& loaded, const ServerOptions& options,
                        std::mutex& generation_mutex, const httplib::Request& req,
                        httplib::Response& res) {
  json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded()) throw ApiError(400, "the request body is not valid JSON");
  CompletionRequest r = parse_completion_request(body);
  if (!r.model.empty() && r.model != options.served_model_name) {
    throw ApiError(404, "The model '" + r.model + "' does not exist.", "model");
  }
  const int max_len = context_length(loaded, options);
  std::vector<PreparedPrompt> prompts = prepare_prompts(loaded, r);
  const uint64_t base_seed = r.seed.value_or(std::random_device{}());
  std::vector<GenerationRequest> jobs;  // prompt-major, n choices each
  for (const PreparedPrompt& p : prompts) {
    for (int c = 0; c < r.n; ++c) jobs.push_back(generation_request(loaded, r, p.ids, max_len, base_seed + jobs.size()));
  }

  const std::string id = request_id();
  const int64_t created = unix_time();
  // Captures by value: the streaming provider outlives this function.
  auto chunk = [id, created, name = options.served_model_name](size_t index, const std::string& text, const json& finish) {
    return json{{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name},
                {"choices", json::array({{{"index", index}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", finish}}})}};
  };
  int prompt_tokens = 0;
  for (const PreparedPrompt& p : prompts) prompt_tokens += static_cast<int>(p.ids.size()) * r.n;

  if (!r.stream) {
    std::lock_guard lock(generation_mutex);
    json choices = json::array();
    int completion_tokens = 0;
    for (size_t i = 0; i < jobs.size(); ++i) {
      ChoiceOutcome o = run_choice(loaded, jobs[i], r.stop, [](const std::string&) { return true; });
      completion_tokens += o.completion_tokens;
      std::string text = r.echo ? prompts[i / r.n].text + o.text : o.text;
      choices.push_back({{"index", i}, {"text", text}, {"logprobs", nullptr}, {"finish_reason", o.finish_reason}});
    }
    json response = {{"id", id}, {"object", "text_completion"}, {"created", created},
                     {"model", options.served_model_name}, {"choices", choices},
                     {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                                {"total_tokens", prompt_tokens + completion_tokens}}}};
    res.set_content(response.dump(), "application/json");
    return;
  }

  // Streaming: the whole generation runs inside the content provider, on this connection's
  // thread; a failed write means the client is gone and stops generation.
  struct StreamState {
    std::vector<GenerationRequest> jobs;
    std::vector<PreparedPrompt> prompts;
    CompletionRequest request;
  };
  auto state = std::make_shared<StreamState>(StreamState{std::move(jobs), std::move(prompts), r});
  res.set_header("Cache-Control", "no-cache");
  res.set_chunked_content_provider("text/event-stream", [&loaded, &generation_mutex, state, chunk, id, created,
                                                         prompt_tokens, name = options.served_model_name](size_t, httplib::DataSink& sink) {
    auto send = [&sink](const json& event) {
      const std::string line = "data: " + event.dump() + "\n\n";
      return sink.write(line.data(), line.size());
    };
    std::lock_guard lock(generation_mutex);
    int completion_tokens = 0;
    for (size_t i = 0; i < state->jobs.size(); ++i) {
      if (state->request.echo && !send(chunk(i, state->prompts[i / state->request.n].text, nullptr))) return false;
      ChoiceOutcome o = run_choice(loaded, state->jobs[i], state->request.stop,
                                   [&](const std::string& text) { return send(chunk(i, text, nullptr)); });
      if (o.finish_reason == "abort") return false;
      completion_tokens += o.completion_tokens;
      if (!send(chunk(i, "", o.finish_reason))) return false;
    }
    if (state->request.include_usage) {
      send({{"id", id}, {"object", "text_completion"}, {"created", created}, {"model", name}, {"choices", json::array()},
            {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", completion_tokens},
                       {"total_tokens", prompt_tokens + completion_tokens}}}});
    }
    const std::string done = "data: [DONE]\n\n";
    sink.write(done.data(), done.size());
    sink.done();
    return true;
  });
}

}  // namespace slab::server
