#include "completions.h"

#include "api_error.h"
#include "completion_request.h"
#include "generation_handler.h"

namespace slab::server {
namespace {

std::vector<PromptInput> prepare_prompts(const LoadedModel& loaded, const CompletionRequest& r) {
  std::vector<PromptInput> out;
  for (const Prompt& p : r.prompts) {
    PromptInput prepared;
    if (const auto* text = std::get_if<std::string>(&p)) {
      prepared.ids = loaded.tokenizer().encode(*text, /*add_special_tokens=*/true);
      prepared.text = *text;
    } else {
      prepared.ids = std::get<std::vector<int32_t>>(p);
      for (int32_t id : prepared.ids) {
        if (id >= loaded.description().vocab_size) {
          throw ApiError(400,
                         "token id " + std::to_string(id) + " is outside the vocabulary (size " +
                             std::to_string(loaded.description().vocab_size) + ")",
                         "prompt");
        }
      }
      prepared.text = loaded.tokenizer().decode(prepared.ids, /*skip_special_tokens=*/false);
    }
    if (prepared.ids.empty()) throw ApiError(400, "the prompt is empty", "prompt");
    out.push_back(std::move(prepared));
  }
  return out;
}

// The legacy completions shape: {"text", "logprobs": {tokens, token_logprobs, top_logprobs,
// text_offset}}. text_offset counts characters (code points) of the token strings before each
// token in the choice's text, continuing across stream events, as vLLM reports it.
class CompletionShape : public ResponseShape {
 public:
  CompletionShape(const LoadedModel& loaded, const CompletionRequest& request, const std::vector<PromptInput>& prompts)
      : tokenizer_(loaded.tokenizer()), request_(request), prompts_(prompts),
        offsets_(prompts.size() * static_cast<size_t>(request.sampling.n), 0) {}

  const char* object(bool) const override { return "text_completion"; }

  json choice(size_t index, const ChoiceState& c) override {
    return entry(index, (request_.echo ? prompt_text(index) : std::string()) + c.text, logprobs(index, c.logprobs),
                 finish_reason_name(c.finish_reason));
  }
  json opening_delta(size_t index) override {
    return request_.echo ? entry(index, prompt_text(index), nullptr, nullptr) : json(nullptr);
  }
  json output_delta(size_t index, const RequestOutput& out, const ChoiceState&) override {
    const bool with_logprobs = request_.logprobs && !out.logprobs.empty();
    if (out.text.empty() && !with_logprobs) return nullptr;
    return entry(index, out.text, with_logprobs ? logprobs(index, out.logprobs) : json(nullptr), nullptr);
  }
  json finish_delta(size_t index, const ChoiceState& c) override {
    return entry(index, "", nullptr, finish_reason_name(c.finish_reason));
  }

 private:
  const std::string& prompt_text(size_t index) const {
    return prompts_[index / static_cast<size_t>(request_.sampling.n)].text;
  }

  static json entry(size_t index, const std::string& text, json logprobs, json finish) {
    return {{"index", index}, {"text", text}, {"logprobs", std::move(logprobs)}, {"finish_reason", std::move(finish)}};
  }

  json logprobs(size_t index, const std::vector<TokenLogprobs>& logprobs) {
    if (!request_.logprobs) return nullptr;
    json out = {{"tokens", json::array()},
                {"token_logprobs", json::array()},
                {"top_logprobs", json::array()},
                {"text_offset", json::array()}};
    for (const TokenLogprobs& lp : logprobs) {
      const std::string token = tokenizer_.decode(std::vector<int32_t>{lp.token}, false);
      out["text_offset"].push_back(offsets_[index]);
      offsets_[index] += api::count_code_points(token);
      out["tokens"].push_back(token);
      out["token_logprobs"].push_back(lp.logprob);
      json top = json::object();
      for (const auto& [id, logprob] : lp.top) top[tokenizer_.decode(std::vector<int32_t>{id}, false)] = logprob;
      out["top_logprobs"].push_back(top);
    }
    return out;
  }

  const Tokenizer& tokenizer_;
  const CompletionRequest& request_;
  const std::vector<PromptInput>& prompts_;
  std::vector<size_t> offsets_;  // per choice
};

}  // namespace

void handle_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        http::Exchange& exchange) {
  const CompletionRequest r =
      parse_completion_request(parse_json_object(exchange.request().body, options.max_json_depth));
  check_model_name(r.model, options);
  GenerationJob job;
  job.prompts = prepare_prompts(loaded, r);
  job.sampling = r.sampling;
  job.logprobs = r.logprobs.value_or(-1);
  job.id_prefix = "cmpl";
  CompletionShape shape(loaded, r, job.prompts);
  serve_generation(loaded, options, metrics, exchange, job, shape);
}

}  // namespace slab::server
