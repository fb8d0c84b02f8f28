// Request bodies: the bounded JSON parser against nlohmann's own parser on ordinary input, and
// on the hostile shapes that crashed or stalled the server (deep nesting, 100k keys).
#include <catch2/catch.hpp>

#include <string>

#include "api_error.h"
#include "json_fields.h"

using namespace slab::server;

TEST_CASE("request bodies parse to what nlohmann::ordered_json parses, key order kept", "[api][json]") {
  const std::string bodies[] = {
      R"({"model":"m","prompt":["a","b"],"n":2,"logit_bias":{"5":1.5,"3":-2},"x":null,"y":true,"z":1e-3})",
      R"({"messages":[{"role":"user","content":[{"type":"text","text":"héllo \u00e9 \ud83d\ude00"}]}],"b":{"c":{"d":[[],{}]}}})",
      R"({"big":18446744073709551615,"neg":-9223372036854775808,"f":3.25})",
      R"(  {"z":1,"a":2,"m":3}  )",
  };
  for (const std::string& body : bodies) {
    INFO(body);
    CHECK(parse_json_object(body, 64) == json::parse(body));
    CHECK(parse_json_object(body, 64).dump() == json::parse(body).dump());
  }
}

TEST_CASE("a repeated key keeps its first position and its last value, as Python's json does", "[api][json]") {
  const json parsed = parse_json_object(R"({"a":1,"b":2,"a":3})", 64);
  CHECK(parsed.dump() == R"({"a":3,"b":2})");
}

TEST_CASE("nesting deeper than the limit is a 400 naming the limit, even 20,000 levels deep", "[api][json]") {
  CHECK_NOTHROW(parse_json_object("{\"a\":" + std::string(62, '[') + std::string(62, ']') + "}", 64));
  for (const size_t depth : {64, 65, 20000}) {
    const std::string body = "{\"a\":" + std::string(depth, '[') + std::string(depth, ']') + "}";
    try {
      parse_json_object(body, 64);
      FAIL("depth " << depth << " was accepted");
    } catch (const ApiError& e) {
      CHECK(e.status == 400);
      CHECK(std::string(e.what()).find("deeper than 64 levels") != std::string::npos);
    }
  }
}

namespace {
std::string object_of(int members) {
  std::string text = "{";
  for (int i = 0; i < members; ++i) text += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":" + std::to_string(i);
  return text + "}";
}
}  // namespace

TEST_CASE("an inner object of 4096 members parses in insertion order and one more is refused", "[api][json]") {
  const json parsed = parse_json_object("{\"logit_bias\":" + object_of(4096) + "}", 64);
  REQUIRE(parsed["logit_bias"].size() == 4096);
  CHECK(parsed["logit_bias"].begin().key() == "k0");
  CHECK((--parsed["logit_bias"].end()).key() == "k4095");
  CHECK_THROWS_WITH(parse_json_object("{\"logit_bias\":" + object_of(4097) + "}", 64),
                    Catch::Matchers::Contains("more than 4096 members"));
}

TEST_CASE("a body of 256 fields parses and 257 or 100,000 are refused at the first one over", "[api][json]") {
  CHECK(parse_json_object(object_of(256), 64).size() == 256);
  CHECK_THROWS_WITH(parse_json_object(object_of(257), 64), Catch::Matchers::Contains("more than 256 fields"));
  CHECK_THROWS_WITH(parse_json_object(object_of(100000), 64), Catch::Matchers::Contains("more than 256 fields"));
}

TEST_CASE("repeated keys count once: 300,000 entries over 500 keys parse in linear time", "[api][json]") {
  std::string body = "{\"logit_bias\":{";
  for (int i = 0; i < 300000; ++i) body += (i ? ",\"" : "\"") + std::to_string(i % 500) + "\":" + std::to_string(i);
  body += "}}";
  const json parsed = parse_json_object(body, 64);
  REQUIRE(parsed["logit_bias"].size() == 500);
  CHECK(parsed["logit_bias"]["499"] == 299999);
}

TEST_CASE("bodies that are not one JSON object are refused with 400", "[api][json]") {
  for (const char* body : {"", "[]", "1", "\"s\"", "{", "{\"a\":}", "{} {}", "{\"a\":\"\xff\"}", "nul"}) {
    INFO(body);
    try {
      parse_json_object(body, 64);
      FAIL("accepted");
    } catch (const ApiError& e) {
      CHECK(e.status == 400);
    }
  }
}

TEST_CASE("unknown fields are refused by name, known-unsupported ones with the reason", "[api][json]") {
  static constexpr std::string_view kAccepted[] = {"model", "prompt"};
  CHECK_NOTHROW(reject_unknown_fields(json::parse(R"({"model":"x","prompt":"y"})"), {kAccepted}));
  CHECK_THROWS_WITH(reject_unknown_fields(json::parse(R"({"prompt":"y","bogus":1})"), {kAccepted}),
                    Catch::Contains("Unrecognized request argument supplied: 'bogus'"));
  CHECK_THROWS_WITH(reject_unknown_fields(json::parse(R"({"suffix":"y"})"), {kAccepted}, {{"suffix", "no infill"}}),
                    Catch::Contains("'suffix' is not supported: no infill"));
}
