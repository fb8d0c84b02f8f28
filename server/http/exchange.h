#pragma once
// What a handler gets for one request: the request, and one way to answer it, either whole
// (respond) or as a stream (begin_stream, write..., end_stream). Streams use chunked transfer
// coding for HTTP/1.1 clients and close-delimited bodies for HTTP/1.0 ones.
#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "http/http_message.h"

namespace slab::http {

struct Connection;
using HeaderList = std::vector<std::pair<std::string, std::string>>;

class Exchange {
 public:
  Exchange(Connection& connection, HttpRequest request, std::chrono::milliseconds write_timeout);
  Exchange(const Exchange&) = delete;
  Exchange& operator=(const Exchange&) = delete;

  const HttpRequest& request() const { return request_; }

  // The whole response. False when the client is gone. Only the first answer counts.
  bool respond(int status, std::string_view content_type, std::string_view body, const HeaderList& headers = {});
  bool begin_stream(int status, std::string_view content_type, const HeaderList& headers = {});
  bool write(std::string_view data);  // one piece of the stream; false when the client is gone
  void end_stream();

  bool responded() const { return state_ != State::none; }
  bool streaming() const { return state_ == State::streaming; }
  // Whether the client closed its connection (or a write to it failed); a handler waiting for
  // a long result polls this to give up early. Cheap: one poll() with no wait.
  bool client_gone() const;
  // Whether the connection can take another request after this one.
  bool reusable() const { return !failed_ && request_.keep_alive && state_ == State::done; }

 private:
  enum class State { none, streaming, done };
  bool send(std::string_view data);
  std::string status_head(int status, std::string_view content_type, const HeaderList& headers) const;

  Connection& connection_;
  HttpRequest request_;
  std::chrono::milliseconds write_timeout_;
  State state_ = State::none;
  bool chunked_ = false;
  bool failed_ = false;
};

}  // namespace slab::http
