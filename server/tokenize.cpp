#include "tokenize.h"

#include "api_error.h"
#include "chat_prompt.h"
#include "chat_request.h"
#include "json_fields.h"

namespace slab::server {

void handle_tokenize(const LoadedModel& loaded, const ServerOptions& options, http::Exchange& exchange) {
  const json body = parse_json_object(exchange.request().body, options.max_json_depth);
  std::vector<int32_t> ids;
  if (find_field(body, "messages") != nullptr) {
    const ChatRequest chat = parse_chat_request(body, /*for_tokenize=*/true);
    // Like chat completions: the template writes BOS; vLLM's add_special_tokens defaults to
    // false for messages.
    ids = loaded.tokenizer().encode(render_chat_prompt(loaded, chat), read_bool(body, "add_special_tokens", false));
  } else {
    static constexpr std::string_view kPromptFields[] = {"model", "prompt", "add_special_tokens", "return_token_strs"};
    reject_unknown_fields(body, {kPromptFields});
    const std::optional<std::string> prompt = read_string(body, "prompt");
    if (!prompt) throw ApiError(400, "'prompt' (a string) or 'messages' is required", "prompt");
    ids = loaded.tokenizer().encode(*prompt, read_bool(body, "add_special_tokens", true));
  }
  json out = {{"count", ids.size()}, {"max_model_len", loaded.engine().max_model_len()}, {"tokens", ids}};
  if (read_bool(body, "return_token_strs", false)) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(loaded.tokenizer().id_to_piece(id));
    out["token_strs"] = strs;
  }
  exchange.respond(200, "application/json", out.dump(-1, ' ', false, json::error_handler_t::replace));
}

void handle_detokenize(const LoadedModel& loaded, const ServerOptions& options, http::Exchange& exchange) {
  const json body = parse_json_object(exchange.request().body, options.max_json_depth);
  static constexpr std::string_view kFields[] = {"model", "tokens"};
  reject_unknown_fields(body, {kFields});
  const json* tokens = find_field(body, "tokens");
  if (tokens == nullptr) throw ApiError(400, "'tokens' is required", "tokens");
  const std::vector<int32_t> ids = read_token_ids(*tokens, "tokens");
  for (int32_t id : ids) {
    if (id >= loaded.tokenizer().vocab_size())
      throw ApiError(400, "token id " + std::to_string(id) + " is outside the vocabulary", "tokens");
  }
  json out = {{"prompt", loaded.tokenizer().decode(ids, /*skip_special_tokens=*/false)}};
  exchange.respond(200, "application/json", out.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace slab::server
