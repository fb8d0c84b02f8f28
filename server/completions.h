#pragma once
// POST /v1/completions: tokenizes the prompts, runs every choice on the engine, and writes the
// OpenAI response, whole or as server-sent events.
#include "http_server.h"
#include "metrics.h"

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace slab::server {

void handle_completions(const LoadedModel& loaded, const ServerOptions& options, Metrics& metrics,
                        const httplib::Request& req,
                        httplib::Response& res);

}  // namespace slab::server
