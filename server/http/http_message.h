#pragma once
// One HTTP/1.1 request as the connection layer hands it to a handler: already framed, its body
// complete and within the size limit. Plain data; no sockets.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace slab::http {

// ASCII case-insensitive equality, for header names and tokens such as "chunked" or "Bearer".
bool equals_ignore_case(std::string_view a, std::string_view b);

struct HttpRequest {
  std::string method;                                        // as sent: "GET", "POST", ...
  std::string target;                                        // the request-target: path and query
  std::string path;                                          // target up to '?'
  std::string query;                                         // after '?', without it
  int minor_version = 1;                                     // HTTP/1.<minor>
  std::vector<std::pair<std::string, std::string>> headers;  // in arrival order, values trimmed
  std::string body;                                          // de-chunked
  bool keep_alive = true;  // what the client asked for (version default, Connection header)

  // The first header of that name (case-insensitive), or nullopt.
  std::optional<std::string_view> header(std::string_view name) const;
};

// An HTTP status code's reason phrase ("Not Found"); "Unknown" for codes it does not list.
const char* reason_phrase(int status);

}  // namespace slab::http
