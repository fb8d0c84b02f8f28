#pragma once
// POST /v1/completions: text or token-id prompts (one or many), n choices each, streamed or not.
#include "api_server.h"
#include "http/exchange.h"

namespace slab::server {

void handle_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        http::Exchange& exchange);

}  // namespace slab::server
