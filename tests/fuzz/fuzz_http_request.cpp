// libFuzzer: HTTP/1.1 request framing over arbitrary bytes, split at fuzzer-chosen points.
// Properties: never reads past its input, never consumes more than it was given, and a request
// it completes has a body within the limit.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "http/request_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  slab::http::ParserLimits limits;
  limits.max_body_bytes = 4096;
  limits.max_header_bytes = 2048;
  limits.max_target_bytes = 512;
  limits.max_headers = 16;
  slab::http::RequestParser parser(limits);
  // The first byte picks the feed size, so requests arrive split at every kind of boundary.
  const size_t step = 1 + data[0] % 17;
  std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  std::string pending;
  for (size_t at = 0; at < input.size(); at += step) {
    pending.append(input.substr(at, step));
    while (true) {
      const size_t used = parser.feed(pending);
      if (used > pending.size()) __builtin_trap();
      pending.erase(0, used);
      if (parser.state() == slab::http::RequestParser::State::complete) {
        if (parser.take_request().body.size() > limits.max_body_bytes) __builtin_trap();
        continue;
      }
      break;
    }
    if (parser.state() == slab::http::RequestParser::State::failed) break;
  }
  return 0;
}
