#pragma once
// POST /v1/chat/completions: renders the conversation with the chat template, runs every choice
// on the engine, and writes the OpenAI chat response, whole or as server-sent events.
#include "http_server.h"
#include "metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace slab::server {

void handle_chat_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        const httplib::Request& req,
                             httplib::Response& res);

}  // namespace slab::server
