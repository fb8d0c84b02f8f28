// HTTP/1.1 request framing: what a client can send in one piece or byte by byte, and every limit
// and smuggling rule, against hand-written requests.
#include <catch2/catch.hpp>

#include <string>

#include "http/request_parser.h"

using namespace slab::http;

namespace {

struct Fed {
  RequestParser::State state;
  size_t consumed;
};

Fed feed_all(RequestParser& p, std::string_view data) {
  const size_t n = p.feed(data);
  return {p.state(), n};
}

// Feeds one byte at a time, as a trickling client sends it.
Fed feed_bytewise(RequestParser& p, std::string_view data) {
  size_t consumed = 0;
  for (size_t i = 0; i < data.size() && p.state() == RequestParser::State::need_more; ++i) {
    consumed += p.feed(data.substr(i, 1));
  }
  return {p.state(), consumed};
}

}  // namespace

TEST_CASE("a request with a Content-Length body is framed whole or byte by byte", "[http]") {
  const std::string raw = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello";
  for (bool bytewise : {false, true}) {
    RequestParser p;
    const Fed f = bytewise ? feed_bytewise(p, raw) : feed_all(p, raw);
    REQUIRE(f.state == RequestParser::State::complete);
    CHECK(f.consumed == raw.size());
    const HttpRequest r = p.take_request();
    CHECK(r.method == "POST");
    CHECK(r.path == "/v1/completions");
    CHECK(r.query == "x=1");
    CHECK(r.body == "hello");
    CHECK(r.keep_alive);
    CHECK(r.header("host") == "a");
    CHECK(p.state() == RequestParser::State::need_more);
    CHECK_FALSE(p.started());
  }
}

TEST_CASE("two pipelined requests in one write are framed one after the other", "[http]") {
  const std::string first = "GET /health HTTP/1.1\r\nHost: a\r\n\r\n";
  const std::string second = "POST /x HTTP/1.1\r\nContent-Length: 2\r\n\r\nok";
  std::string input = first + second;
  RequestParser p;
  size_t n = p.feed(input);
  REQUIRE(p.state() == RequestParser::State::complete);
  CHECK(n == first.size());
  CHECK(p.take_request().path == "/health");
  input.erase(0, n);
  n = p.feed(input);
  REQUIRE(p.state() == RequestParser::State::complete);
  CHECK(n == second.size());
  CHECK(p.take_request().body == "ok");
}

TEST_CASE("chunked bodies are decoded, trailers dropped, and the body limit holds for them", "[http]") {
  const std::string raw =
      "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1\r\n "
      "\r\nA\r\n0123456789\r\n0\r\nX-T: 1\r\n\r\n";
  for (bool bytewise : {false, true}) {
    RequestParser p;
    const Fed f = bytewise ? feed_bytewise(p, raw) : feed_all(p, raw);
    REQUIRE(f.state == RequestParser::State::complete);
    CHECK(f.consumed == raw.size());
    CHECK(p.take_request().body == "hello 0123456789");
  }
  ParserLimits small;
  small.max_body_bytes = 10;
  RequestParser p(small);
  p.feed("POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n8\r\n12345678\r\n3\r\n");
  CHECK(p.state() == RequestParser::State::failed);
  CHECK(p.error_status() == 413);
}

TEST_CASE("a declared body over the limit is refused before any of it is read", "[http]") {
  ParserLimits small;
  small.max_body_bytes = 100;
  RequestParser p(small);
  const std::string head = "POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n";
  CHECK(p.feed(head + "abc") == head.size());
  CHECK(p.state() == RequestParser::State::failed);
  CHECK(p.error_status() == 413);
}

TEST_CASE("framing that could smuggle a request or lie about its length is refused", "[http]") {
  struct Case {
    const char* what;
    std::string raw;
    int status;
  };
  const Case cases[] = {
      {"both Transfer-Encoding and Content-Length",
       "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n", 400},
      {"conflicting Content-Length headers", "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", 400},
      {"conflicting Content-Length list", "POST / HTTP/1.1\r\nContent-Length: 3, 4\r\n\r\n", 400},
      {"negative Content-Length", "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400},
      {"signed Content-Length", "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", 400},
      {"non-numeric Content-Length", "POST / HTTP/1.1\r\nContent-Length: 5x\r\n\r\n", 400},
      {"overflowing Content-Length", "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n", 400},
      {"an unknown transfer coding", "POST / HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501},
      {"chunked twice", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 501},
      {"a bad chunk size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400},
      {"a chunk longer than its size", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {"a chunk size over 64 bits", "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n1ffffffffffffffff\r\n", 400},
      {"header folding", "GET / HTTP/1.1\r\nA: b\r\n c\r\n\r\n", 400},
      {"a space before the colon", "GET / HTTP/1.1\r\nA : b\r\n\r\n", 400},
      {"a header without a colon", "GET / HTTP/1.1\r\nAb\r\n\r\n", 400},
      {"a malformed request line", "GET /\r\n\r\n", 400},
      {"an extra space in the request line", "GET  / HTTP/1.1\r\n\r\n", 400},
      {"a control character in the target", std::string("GET /a\x01 HTTP/1.1\r\n\r\n"), 400},
      {"HTTP/2", "PRI * HTTP/2.0\r\n\r\n", 505},
      {"a garbled version", "GET / HTTQ/1.1\r\n\r\n", 400},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    RequestParser p;
    p.feed(c.raw);
    CHECK(p.state() == RequestParser::State::failed);
    CHECK(p.error_status() == c.status);
    CHECK_FALSE(p.error_message().empty());
  }
}

TEST_CASE("header, target and field-count limits give 431 and 414", "[http]") {
  ParserLimits limits;
  limits.max_header_bytes = 1024;
  limits.max_target_bytes = 200;
  limits.max_headers = 4;
  {
    RequestParser p(limits);
    p.feed("GET /" + std::string(300, 'a') + " HTTP/1.1\r\n\r\n");
    CHECK(p.error_status() == 414);
  }
  {
    RequestParser p(limits);  // a target that never ends is cut off at the limit too
    p.feed("GET /" + std::string(5000, 'a'));
    CHECK(p.error_status() == 414);
  }
  {
    RequestParser p(limits);
    p.feed("GET / HTTP/1.1\r\nA: " + std::string(2000, 'x'));
    CHECK(p.error_status() == 431);
  }
  {
    RequestParser p(limits);
    p.feed("GET / HTTP/1.1\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\nE: 1\r\n\r\n");
    CHECK(p.error_status() == 431);
  }
}

TEST_CASE("keep-alive follows the version and the Connection header, and Expect: 100-continue is seen", "[http]") {
  auto keep_alive = [](const std::string& raw) {
    RequestParser p;
    p.feed(raw);
    REQUIRE(p.state() == RequestParser::State::complete);
    return p.take_request().keep_alive;
  };
  CHECK(keep_alive("GET / HTTP/1.1\r\n\r\n"));
  CHECK_FALSE(keep_alive("GET / HTTP/1.1\r\nConnection: close\r\n\r\n"));
  CHECK_FALSE(keep_alive("GET / HTTP/1.1\r\nConnection: Upgrade, Close\r\n\r\n"));
  CHECK_FALSE(keep_alive("GET / HTTP/1.0\r\n\r\n"));
  CHECK(keep_alive("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"));
  CHECK(keep_alive("\r\nGET / HTTP/1.1\r\n\r\n"));  // a stray CRLF before the request line

  RequestParser p;
  p.feed("POST / HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n");
  CHECK(p.expects_continue());
  p.feed("abc");
  CHECK(p.state() == RequestParser::State::complete);
  CHECK_FALSE(p.expects_continue());
}
