#pragma once
// POST /v1/chat/completions: renders the conversation with the chat template, then the shared
// generation path with the chat response shape.
#include "api_server.h"
#include "http/exchange.h"

namespace slab::server {

void handle_chat_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                             http::Exchange& exchange);

}  // namespace slab::server
