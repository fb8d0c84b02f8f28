#pragma once
// POST /tokenize and POST /detokenize, shaped as vLLM serves them.
#include "http_server.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace slab::server {

// {"prompt": ..., "add_special_tokens"} or {"messages": ..., "tools", "add_generation_prompt",
// "continue_final_message", "chat_template_kwargs"}; "return_token_strs" adds the token strings.
void handle_tokenize(const LoadedModel& loaded, const httplib::Request& req, httplib::Response& res);
void handle_detokenize(const LoadedModel& loaded, const httplib::Request& req, httplib::Response& res);

}  // namespace slab::server
