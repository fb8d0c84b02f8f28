#pragma once
// POST /tokenize and POST /detokenize, shaped as vLLM serves them.
#include "api_server.h"
#include "http/exchange.h"

namespace slab::server {

// {"prompt": ..., "add_special_tokens"} or {"messages": ..., "tools", "add_generation_prompt",
// "continue_final_message", "chat_template_kwargs"}; "return_token_strs" adds the token strings.
void handle_tokenize(const LoadedModel& loaded, const ServerOptions& options, http::Exchange& exchange);
void handle_detokenize(const LoadedModel& loaded, const ServerOptions& options, http::Exchange& exchange);

}  // namespace slab::server
