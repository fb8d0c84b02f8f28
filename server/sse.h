#pragma once
// Server-sent events as OpenAI streams them: "data: {json}\n\n" per event, "data: [DONE]\n\n" at
// the end. A false return means the client is gone.
#include "http/exchange.h"
#include "json_fields.h"

namespace slab::server {

inline bool send_sse(http::Exchange& exchange, const json& event) {
  return exchange.write("data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n");
}

inline bool send_sse_done(http::Exchange& exchange) {
  const bool ok = exchange.write("data: [DONE]\n\n");
  exchange.end_stream();
  return ok;
}

inline json error_event(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", 500}}}};
}

}  // namespace slab::server
