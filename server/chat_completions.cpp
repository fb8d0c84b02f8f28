#include "chat_completions.h"

#include "api_error.h"
#include "chat_prompt.h"
#include "chat_request.h"
#include "generation_handler.h"

namespace slab::server {
namespace {

// The chat shape: {"message": {"role", "content"}} whole, {"delta": ...} streamed (a role-only
// delta first, as OpenAI and vLLM stream it), logprobs as {"content": [{token, logprob, bytes,
// top_logprobs}]}.
class ChatShape : public ResponseShape {
 public:
  ChatShape(const Tokenizer& tokenizer, bool logprobs) : tokenizer_(tokenizer), logprobs_(logprobs) {}

  const char* object(bool chunk) const override { return chunk ? "chat.completion.chunk" : "chat.completion"; }

  json choice(size_t index, const ChoiceState& c) override {
    return {{"index", index},
            {"message", {{"role", "assistant"}, {"content", c.text}}},
            {"logprobs", logprobs_ ? logprobs_json(c.logprobs) : json(nullptr)},
            {"finish_reason", finish_reason_name(c.finish_reason)}};
  }
  json opening_delta(size_t index) override {
    return delta(index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
  }
  json output_delta(size_t index, const RequestOutput& out, const ChoiceState&) override {
    const bool with_logprobs = logprobs_ && !out.logprobs.empty();
    if (out.text.empty() && !with_logprobs) return nullptr;
    return delta(index, {{"content", out.text}}, with_logprobs ? logprobs_json(out.logprobs) : json(nullptr), nullptr);
  }
  json finish_delta(size_t index, const ChoiceState& c) override {
    return delta(index, json::object(), nullptr, finish_reason_name(c.finish_reason));
  }

 private:
  static json delta(size_t index, json content, json logprobs, json finish) {
    return {{"index", index},
            {"delta", std::move(content)},
            {"logprobs", std::move(logprobs)},
            {"finish_reason", std::move(finish)}};
  }

  json token_entry(int32_t id, float logprob) const {
    const std::string text = tokenizer_.decode(std::vector<int32_t>{id}, false);
    return {{"token", text}, {"logprob", logprob}, {"bytes", std::vector<int>(text.begin(), text.end())}};
  }

  json logprobs_json(const std::vector<TokenLogprobs>& logprobs) const {
    json content = json::array();
    for (const TokenLogprobs& lp : logprobs) {
      json entry = token_entry(lp.token, lp.logprob);
      entry["top_logprobs"] = json::array();
      for (const auto& [id, logprob] : lp.top) entry["top_logprobs"].push_back(token_entry(id, logprob));
      content.push_back(std::move(entry));
    }
    return {{"content", content}};
  }

  const Tokenizer& tokenizer_;
  bool logprobs_;
};

}  // namespace

void handle_chat_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                             http::Exchange& exchange) {
  const ChatRequest r = parse_chat_request(parse_json_object(exchange.request().body, options.max_json_depth));
  check_model_name(r.model, options);
  GenerationJob job;
  // The template writes any BOS itself, so the text is tokenized without adding special tokens.
  job.prompts.push_back({loaded.tokenizer().encode(render_chat_prompt(loaded, r), /*add_special_tokens=*/false), {}});
  if (job.prompts.front().ids.empty()) throw ApiError(400, "the chat template rendered an empty prompt", "messages");
  job.sampling = r.sampling;
  job.logprobs = r.logprobs ? r.top_logprobs : -1;
  job.id_prefix = "chatcmpl";
  ChatShape shape(loaded.tokenizer(), r.logprobs);
  serve_generation(loaded, options, metrics, exchange, job, shape);
}

}  // namespace slab::server
