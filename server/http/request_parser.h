#pragma once
// Incremental HTTP/1.1 request framing (RFC 9112): the request line, headers and body of one
// request at a time, from bytes as they arrive, under hard limits. Pure: no sockets, no clock,
// so it is unit-tested and fuzzed on its own.
//
// Framing rules that close request-smuggling and memory holes: Transfer-Encoding together with
// Content-Length is refused; Content-Length must be plain digits, and repeated values must agree;
// only the "chunked" transfer coding is accepted; the body limit holds for every framing (a
// declared length over it is refused before any body byte is read; a chunked body is refused as
// soon as its running total passes it).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/http_message.h"

namespace slab::http {

struct ParserLimits {
  size_t max_header_bytes = 64 << 10;  // request line + header fields (and chunked trailers)
  size_t max_target_bytes = 16 << 10;  // the request-target; 414 above
  size_t max_headers = 128;            // header fields; 431 above
  size_t max_body_bytes = 8 << 20;     // 413 above, whatever the framing
};

class RequestParser {
 public:
  enum class State { need_more, complete, failed };

  explicit RequestParser(ParserLimits limits = {});

  // Frames bytes of `data` (the connection's unconsumed input). Returns how many it consumed:
  // once a request is complete it stops, leaving the next pipelined request's bytes unconsumed.
  size_t feed(std::string_view data);
  State state() const { return state_; }

  // Some byte of a request has arrived (so an idle keep-alive connection is not idle any more).
  bool started() const { return started_; }
  // The header is complete, the body is still to come and the client waits for "100 Continue".
  bool expects_continue() const;
  // After State::failed: the status to answer (400, 413, 414, 431, 501, 505) and why.
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }

  // After State::complete: the request; the parser is ready for the next one.
  HttpRequest take_request();

 private:
  enum class Phase { request_line, header_fields, body, chunk_size, chunk_data, chunk_data_end, trailer, done };

  // Consumes one line (without its CRLF or bare LF) from data[pos...]; false when the line is not
  // complete yet. Counts it against the header limit when `counted`.
  bool take_line(std::string_view data, size_t& pos, std::string_view& line, size_t line_limit, int over_limit_status,
                 const char* what);
  void fail(int status, std::string message);
  void parse_request_line(std::string_view line);
  void parse_header_field(std::string_view line);
  void finish_header();
  void parse_chunk_size(std::string_view line);

  ParserLimits limits_;
  State state_ = State::need_more;
  Phase phase_ = Phase::request_line;
  bool started_ = false;
  size_t header_bytes_ = 0;
  std::string line_;  // a line split across feeds
  HttpRequest request_;
  uint64_t body_remaining_ = 0;  // Content-Length bytes, or the current chunk's
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace slab::http
