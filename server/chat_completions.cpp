#include "chat_completions.h"

#include "api_error.h"
#include "chat_output.h"
#include "chat_prompt.h"
#include "chat_request.h"
#include "generation_handler.h"

namespace slab::server {
namespace {

// What a chat choice's text may hold besides content: tool calls in a format, reasoning.
struct ChatOutputOptions {
  std::optional<api::ToolCallFormat> tools;  // the request gave tools the model may call
  std::optional<bool> starts_thinking;       // a reasoning parser runs (and the prompt opened <think>)
};

// The chat shape: {"message": {"role", "content", "reasoning_content", "tool_calls"}} whole,
// {"delta": ...} streamed (a role-only delta first, as OpenAI and vLLM stream it; a tool call
// goes out whole in one delta once complete), logprobs as {"content": [{token, logprob, bytes,
// top_logprobs}]}. A choice that called tools finishes with "tool_calls".
class ChatShape : public ResponseShape {
 public:
  ChatShape(const Tokenizer& tokenizer, bool logprobs, ChatOutputOptions output)
      : tokenizer_(tokenizer), logprobs_(logprobs), output_(output) {}

  const char* object(bool chunk) const override { return chunk ? "chat.completion.chunk" : "chat.completion"; }

  json choice(size_t index, const ChoiceState& c) override {
    ChatOutputParser parser(output_.tools, output_.starts_thinking);
    ChatOutputPiece whole = parser.push(c.text);
    ChatOutputPiece tail = parser.finish();
    whole.reasoning += tail.reasoning;
    whole.content += tail.content;
    for (auto& call : tail.calls) whole.calls.push_back(std::move(call));
    json message = {{"role", "assistant"},
                    {"content", whole.content.empty() && !whole.calls.empty() ? json(nullptr) : json(whole.content)}};
    if (output_.starts_thinking)
      message["reasoning_content"] = whole.reasoning.empty() ? json(nullptr) : json(whole.reasoning);
    if (!whole.calls.empty()) {
      message["tool_calls"] = json::array();
      for (const api::ToolCall& call : whole.calls) message["tool_calls"].push_back(tool_call_json(call));
    }
    return {{"index", index},
            {"message", std::move(message)},
            {"logprobs", logprobs_ ? logprobs_json(c.logprobs) : json(nullptr)},
            {"finish_reason", finish_reason(c, !whole.calls.empty())}};
  }
  json opening_delta(size_t index) override {
    return delta(index, {{"role", "assistant"}, {"content", ""}}, nullptr, nullptr);
  }
  json output_delta(size_t index, const RequestOutput& out, const ChoiceState&) override {
    const bool with_logprobs = logprobs_ && !out.logprobs.empty();
    json fields = piece_fields(index, stream_state(index).parser.push(out.text));
    if (fields.empty() && !with_logprobs) return nullptr;
    return delta(index, std::move(fields), with_logprobs ? logprobs_json(out.logprobs) : json(nullptr), nullptr);
  }
  json finish_delta(size_t index, const ChoiceState& c) override {
    json fields = piece_fields(index, stream_state(index).parser.finish());
    return delta(index, fields.empty() ? json::object() : std::move(fields), nullptr,
                 finish_reason(c, stream_state(index).calls_sent > 0));
  }

 private:
  struct StreamState {
    ChatOutputParser parser;
    int calls_sent = 0;
  };

  StreamState& stream_state(size_t index) {
    while (streams_.size() <= index) streams_.push_back({ChatOutputParser(output_.tools, output_.starts_thinking), 0});
    return streams_[index];
  }

  // A streamed piece as delta fields; tool calls numbered within their choice.
  json piece_fields(size_t index, ChatOutputPiece piece) {
    json fields = json::object();
    if (!piece.reasoning.empty()) fields["reasoning_content"] = std::move(piece.reasoning);
    if (!piece.content.empty()) fields["content"] = std::move(piece.content);
    if (!piece.calls.empty()) {
      fields["tool_calls"] = json::array();
      for (const api::ToolCall& call : piece.calls) {
        json entry = tool_call_json(call);
        entry["index"] = stream_state(index).calls_sent++;
        fields["tool_calls"].push_back(std::move(entry));
      }
    }
    return fields;
  }

  static json tool_call_json(const api::ToolCall& call) {
    return {{"id", call.id}, {"type", "function"}, {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
  }

  static const char* finish_reason(const ChoiceState& c, bool called_tools) {
    return called_tools && c.finish_reason == FinishReason::stop ? "tool_calls" : finish_reason_name(c.finish_reason);
  }

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
  ChatOutputOptions output_;
  std::vector<StreamState> streams_;  // per choice, streamed responses only
};

// The format tool calls are parsed in: --tool-call-parser, or what the chat template shows.
api::ToolCallFormat tool_call_format(const LoadedModel& loaded, const ServerOptions& options) {
  if (options.tool_call_parser != "auto") {
    if (auto named = api::tool_call_format_named(options.tool_call_parser)) return *named;
  }
  if (auto detected = api::detect_tool_call_format(loaded.chat_template_source())) return *detected;
  throw ApiError(400,
                 "'tools': this model's chat template shows no tool-call format slabserve parses; start the server "
                 "with --tool-call-parser hermes|llama3_json|mistral",
                 "tools");
}

// The prompt ends inside a <think> block (DeepSeek-R1 distills' templates open it): the output
// starts as reasoning.
bool prompt_opens_thinking(const std::string& prompt) {
  const size_t end = prompt.find_last_not_of(" \n\r\t");
  const std::string_view open = "<think>";
  return end != std::string::npos && end + 1 >= open.size() &&
         std::string_view(prompt).substr(end + 1 - open.size(), open.size()) == open;
}

}  // namespace

void handle_chat_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                             http::Exchange& exchange) {
  ChatRequest r = parse_chat_request(parse_json_object(exchange.request().body, options.max_json_depth));
  check_model_name(r.model, options);
  ChatOutputOptions output;
  if (r.tool_choice != ChatRequest::ToolChoice::none) {
    output.tools = tool_call_format(loaded, options);
    r.sampling.skip_special_tokens = false;  // as vLLM does for tool parsing: markers may be special tokens
    if (r.tool_choice == ChatRequest::ToolChoice::required || r.tool_choice == ChatRequest::ToolChoice::named) {
      if (!r.sampling.grammar.empty()) {
        throw ApiError(400, "'tool_choice' forces a tool call and the output is also constrained otherwise: give one",
                       "tool_choice");
      }
      try {
        r.sampling.grammar = api::tool_call_gbnf(
            *output.tools, r.tools,
            r.tool_choice == ChatRequest::ToolChoice::named ? std::optional(r.tool_choice_name) : std::nullopt,
            r.parallel_tool_calls);
      } catch (const std::invalid_argument& e) {
        throw ApiError(400, std::string("'tools': ") + e.what(), "tools");
      }
    }
  }
  const std::string prompt = render_chat_prompt(loaded, r);
  if (!options.reasoning_parser.empty()) output.starts_thinking = prompt_opens_thinking(prompt);
  GenerationJob job;
  // The template writes any BOS itself, so the text is tokenized without adding special tokens.
  job.prompts.push_back({loaded.tokenizer().encode(prompt, /*add_special_tokens=*/false), {}});
  if (job.prompts.front().ids.empty()) throw ApiError(400, "the chat template rendered an empty prompt", "messages");
  job.sampling = r.sampling;
  job.logprobs = r.logprobs ? r.top_logprobs : -1;
  job.id_prefix = "chatcmpl";
  ChatShape shape(loaded.tokenizer(), r.logprobs, output);
  serve_generation(loaded, options, metrics, exchange, job, shape);
}

}  // namespace slab::server
