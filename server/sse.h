#pragma once
// Server-sent events as OpenAI streams them: "data: {json}\n\n" per event, "data: [DONE]\n\n" at
// the end. A false return means the client is gone.
#include <httplib.h>

#include "json_fields.h"

namespace slab::server {

inline bool send_sse(httplib::DataSink& sink, const json& event) {
  const std::string line = "data: " + event.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
  return sink.write(line.data(), line.size());
}

inline bool send_sse_done(httplib::DataSink& sink) {
  static const std::string done = "data: [DONE]\n\n";
  const bool ok = sink.write(done.data(), done.size());
  sink.done();
  return ok;
}

inline json error_event(const std::string& message) {
  return {{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", 500}}}};
}

}  // namespace slab::server
