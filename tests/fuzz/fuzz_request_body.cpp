// libFuzzer: request bodies through the bounded JSON parser and the completions, chat and
// tokenize field parsers. Any ApiError is a fine answer; a crash, a hang or another exception
// type is a bug.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "api_error.h"
#include "chat_request.h"
#include "completion_request.h"
#include "json_fields.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace slab::server;
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const json parsed = parse_json_object(body, kDefaultMaxJsonDepth);
    try {
      (void)parse_completion_request(parsed);
    } catch (const ApiError&) {
    }
    try {
      (void)parse_chat_request(parsed);
    } catch (const ApiError&) {
    }
    try {
      (void)parse_chat_request(parsed, /*for_tokenize=*/true);
    } catch (const ApiError&) {
    }
  } catch (const ApiError&) {
  }
  return 0;
}
