// JSON Schema to GBNF (src/grammar/json_schema.cpp) through the GBNF parser and matcher: the
// fixture's documents (scripts/make_json_schema_fixtures.py, checked with Python's jsonschema),
// integer ranges against arithmetic, whitespace bounds, property order, json_object_gbnf.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_match.h"
#include "test_paths.h"

using slab::grammar::Grammar;
using slab::grammar::json_object_gbnf;
using slab::grammar::json_schema_to_gbnf;
using slab::grammar::JsonSchemaOptions;
using slab::test::full_match;
using ordered_json = nlohmann::ordered_json;

namespace {

ordered_json read_fixture(const char* name) {
  std::ifstream in(slab::test::fixtures_dir() / "grammar" / name);
  REQUIRE(in);
  return ordered_json::parse(in);
}

std::shared_ptr<const Grammar> compile(const ordered_json& schema, bool allow_whitespace = true) {
  JsonSchemaOptions options;
  options.allow_whitespace = allow_whitespace;
  return Grammar::parse(json_schema_to_gbnf(schema, options));
}

bool accepts(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  return full_match(grammar, text).accepted;
}

}  // namespace

TEST_CASE("JSON Schema fixtures: valid documents accepted, invalid ones rejected", "[grammar]") {
  const ordered_json fixture = read_fixture("json_schema.json");
  const auto& schemas = fixture.at("schemas");
  REQUIRE(schemas.size() >= 60);
  size_t valid_checked = 0;
  size_t invalid_checked = 0;
  for (const auto& schema_case : schemas) {
    const std::string name = schema_case.at("name").get<std::string>();
    const std::string gbnf = json_schema_to_gbnf(schema_case.at("schema"));
    INFO("schema " << name << "\n" << gbnf);
    const auto grammar = Grammar::parse(gbnf);
    for (const auto& valid : schema_case.at("valid")) {
      const std::string text = valid.at("text").get<std::string>();
      const auto result = full_match(grammar, text);
      INFO(valid.at("style").get<std::string>() << " document, refused at byte " << result.rejected_at << ":\n"
                                                << text);
      CHECK(result.accepted);
      ++valid_checked;
    }
    for (const auto& invalid : schema_case.at("invalid")) {
      const std::string text = invalid.at("text").get<std::string>();
      INFO("invalid (" << invalid.at("why").get<std::string>() << "):\n" << text);
      CHECK_FALSE(accepts(grammar, text));
      ++invalid_checked;
    }
  }
  CHECK(valid_checked >= 500);
  CHECK(invalid_checked >= 500);
}

TEST_CASE("JSON Schema fixtures without whitespace: compact documents only", "[grammar]") {
  const ordered_json fixture = read_fixture("json_schema.json");
  size_t pretty_refused = 0;
  for (const auto& schema_case : fixture.at("schemas")) {
    INFO("schema " << schema_case.at("name").get<std::string>());
    const auto grammar = compile(schema_case.at("schema"), false);
    for (const auto& valid : schema_case.at("valid")) {
      const std::string text = valid.at("text").get<std::string>();
      INFO(text);
      if (valid.at("style") == "pretty") {
        if (text.find('\n') == std::string::npos) continue;  // a scalar prints the same
        CHECK_FALSE(accepts(grammar, text));
        ++pretty_refused;
      } else {
        CHECK(accepts(grammar, text));
      }
    }
  }
  CHECK(pretty_refused >= 100);
}

TEST_CASE("JSON Schema integer bounds: exactly the integers in range", "[grammar]") {
  struct Bounds {
    ordered_json schema;
    long long lo;
    long long hi;
  };
  const std::vector<Bounds> cases = {
      {{{"type", "integer"}, {"minimum", 0}, {"maximum", 0}}, 0, 0},
      {{{"type", "integer"}, {"minimum", 7}, {"maximum", 123}}, 7, 123},
      {{{"type", "integer"}, {"minimum", -120}, {"maximum", -3}}, -120, -3},
      {{{"type", "integer"}, {"minimum", -45}, {"maximum", 1099}}, -45, 1099},
      {{{"type", "integer"}, {"exclusiveMinimum", 9}, {"exclusiveMaximum", 100}}, 10, 99},
      {{{"type", "integer"}, {"minimum", 1000}, {"maximum", 1999}}, 1000, 1999},
      {{{"type", "integer"}, {"minimum", 10.5}, {"maximum", 20.5}}, 11, 20},
      {{{"type", "integer"}, {"minimum", 5}, {"exclusiveMinimum", true}, {"maximum", 9}}, 6, 9},
  };
  for (const auto& c : cases) {
    INFO(c.schema.dump());
    const auto grammar = compile(c.schema);
    for (long long v = c.lo - 300; v <= c.hi + 300; ++v) {
      INFO(v);
      CHECK(accepts(grammar, std::to_string(v)) == (v >= c.lo && v <= c.hi));
    }
    CHECK_FALSE(accepts(grammar, std::string("0") + std::to_string(c.hi)));
    CHECK_FALSE(accepts(grammar, std::to_string(c.lo) + ".0"));
  }
  // One-sided bounds: around the bound, and far beyond it.
  const auto at_least = compile({{"type", "integer"}, {"minimum", 250}});
  for (long long v = -1000; v <= 3000; ++v) CHECK(accepts(at_least, std::to_string(v)) == (v >= 250));
  CHECK(accepts(at_least, "123456789012345678901234567890"));
  CHECK_FALSE(accepts(at_least, "-123456789012345678901234567890"));
  const auto at_most = compile({{"type", "integer"}, {"maximum", -17}});
  for (long long v = -3000; v <= 1000; ++v) CHECK(accepts(at_most, std::to_string(v)) == (v <= -17));
  CHECK(accepts(at_most, "-99999999999999999999"));
  const auto big = compile({{"type", "integer"}, {"minimum", -1000000000000LL}, {"maximum", 999999999999999LL}});
  CHECK(accepts(big, "-1000000000000"));
  CHECK_FALSE(accepts(big, "-1000000000001"));
  CHECK(accepts(big, "999999999999999"));
  CHECK_FALSE(accepts(big, "1000000000000000"));
}

TEST_CASE("JSON Schema numbers: sign bounds", "[grammar]") {
  const auto nonnegative = compile({{"type", "number"}, {"minimum", 0}});
  for (const char* ok : {"0", "0.0", "1.5", "12e-3", "7E+2", "1000"}) CHECK(accepts(nonnegative, ok));
  for (const char* bad : {"-1", "-0.5", "01", ".5", "1.", "1e", "+1"}) CHECK_FALSE(accepts(nonnegative, bad));
  const auto positive = compile({{"type", "number"}, {"exclusiveMinimum", 0}});
  for (const char* ok : {"1", "0.001", "0.10", "3e-7", "25.0"}) CHECK(accepts(positive, ok));
  for (const char* bad : {"0", "0.0", "0.000", "-1", "0e5"}) CHECK_FALSE(accepts(positive, bad));
}

TEST_CASE("JSON Schema whitespace: bounded, and none where not allowed", "[grammar]") {
  const ordered_json schema = {{"type", "array"}, {"items", {{"type", "integer"}}}};
  const auto spaced = compile(schema, true);
  CHECK(accepts(spaced, "[1, 2]"));
  CHECK(accepts(spaced, "[\n" + std::string(20, ' ') + "1\n]"));
  CHECK(accepts(spaced, "[\n\t1 ,\n\t2 ]"));
  CHECK(accepts(spaced, "[ 1 , 2 ]"));
  CHECK_FALSE(accepts(spaced, "[\n" + std::string(21, ' ') + "1\n]"));
  CHECK_FALSE(accepts(spaced, "[  1]"));  // inline, one space at most
  CHECK_FALSE(accepts(spaced, "[\t1]"));  // tabs only as indentation after a newline
  CHECK_FALSE(accepts(spaced, "[\n\n1]"));
  CHECK_FALSE(accepts(spaced, " [1]"));
  CHECK_FALSE(accepts(spaced, "[1] "));
  const auto compact = compile(schema, false);
  CHECK(accepts(compact, "[1,2]"));
  CHECK_FALSE(accepts(compact, "[1, 2]"));
  CHECK(json_schema_to_gbnf(schema, JsonSchemaOptions{false}).find("ws") == std::string::npos);
}

TEST_CASE("JSON Schema properties: schema order with ordered_json, name order with json", "[grammar]") {
  const char* text =
      R"({"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"integer"}},"required":["b","a"]})";
  const auto ordered = Grammar::parse(json_schema_to_gbnf(ordered_json::parse(text)));
  CHECK(accepts(ordered, R"({"b":1,"a":2})"));
  CHECK_FALSE(accepts(ordered, R"({"a":2,"b":1})"));
  const auto sorted = Grammar::parse(json_schema_to_gbnf(nlohmann::json::parse(text)));
  CHECK(accepts(sorted, R"({"a":2,"b":1})"));
  CHECK_FALSE(accepts(sorted, R"({"b":1,"a":2})"));
}

TEST_CASE("JSON Schema objects: optional properties in order, extra keys only when allowed", "[grammar]") {
  const ordered_json strict = ordered_json::parse(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]})");
  const auto grammar = compile(strict);
  for (const char* ok : {R"({"b":1})", R"({"a":1,"b":2})", R"({"b":2,"c":3})", R"({"a":1,"b":2,"c":3})"}) {
    CHECK(accepts(grammar, ok));
  }
  for (const char* bad : {"{}", R"({"a":1})", R"({"b":1,"a":2})", R"({"b":1,"d":2})", R"({"b":1,})", R"({,"b":1})"}) {
    CHECK_FALSE(accepts(grammar, bad));
  }
  ordered_json open = strict;
  open["additionalProperties"] = {{"type", "string"}};
  const auto open_grammar = compile(open);
  CHECK(accepts(open_grammar, R"({"b":1,"zz":"x","yy":"y"})"));
  CHECK_FALSE(accepts(open_grammar, R"({"b":1,"zz":2})"));
  CHECK_FALSE(accepts(open_grammar, R"({"zz":"x","b":1})"));
  // An extra key is none of the declared ones (a repeated key would override a checked value).
  for (const char* ok : {R"({"b":1,"bb":"x"})", R"({"b":1,"":"x"})", R"({"b":1,"A":"x"})", R"({"b":1,"c2":"x"})"}) {
    CHECK(accepts(open_grammar, ok));
  }
  for (const char* bad : {R"({"b":1,"a":"x"})", R"({"b":1,"b":"x"})", R"({"a":1,"b":2,"c":"x"})"}) {
    CHECK_FALSE(accepts(open_grammar, bad));
  }
  const auto any_object = compile({{"type", "object"}});
  CHECK(accepts(any_object, R"({"anything":[1,{"x":null}],"b":true})"));
}

TEST_CASE("json_object_gbnf: any object, nothing else", "[grammar]") {
  const auto grammar = Grammar::parse(json_object_gbnf());
  for (const char* ok : {"{}", R"({"a":1})", "{\n  \"a\": [1, 2.5e3, \"x\\u00e9\", null, true],\n  \"b\": {}\n}",
                         R"({"k":{"k":{"k":{"k":"\ud83d\ude00"}}}})"}) {
    CHECK(accepts(grammar, ok));
  }
  for (const char* bad : {"[]", "1", "\"s\"", "null", "{", R"({"a":})", R"({"a":1,})", R"({'a':1})", R"({"a":01})",
                          "{\"a\":\"\x01\"}", R"({"a":"\x"})", R"({"a":"\ud800"})"}) {
    CHECK_FALSE(accepts(grammar, bad));
  }
  JsonSchemaOptions compact;
  compact.allow_whitespace = false;
  const auto compact_grammar = Grammar::parse(json_object_gbnf(compact));
  CHECK(accepts(compact_grammar, R"({"a":[1,2]})"));
  CHECK_FALSE(accepts(compact_grammar, R"({"a": [1,2]})"));
}

TEST_CASE("JSON Schema strings: lengths count code points, escapes count once", "[grammar]") {
  const auto grammar = compile({{"type", "string"}, {"minLength", 2}, {"maxLength", 3}});
  for (const char* ok : {R"("ab")", R"("abc")", "\"é日\"", R"("\u00e9\n")", R"("\ud83d\ude00x")", R"("\"\\")"}) {
    CHECK(accepts(grammar, ok));
  }
  for (const char* bad : {R"("a")", R"("abcd")", "\"é\"", R"("\ud83d\ude00")", "\"a\tb\""})
    CHECK_FALSE(accepts(grammar, bad));
}

TEST_CASE("JSON Schema enum and const: the values as JSON writers spell them", "[grammar]") {
  const auto grammar = compile(ordered_json::parse(R"({"enum":["café","a\"b",1.5,null,[1,"x"],{"k":true}]})"));
  for (const char* ok : {"\"café\"", R"("caf\u00e9")", R"("caf\u00E9")", R"("a\"b")", "1.5", "null", "[1,\"x\"]",
                         "[ 1, \"x\" ]", R"({"k":true})", "{\n  \"k\": true\n}"}) {
    CHECK(accepts(grammar, ok));
  }
  for (const char* bad : {"\"cafe\"", "1.50", "[1]", R"({"k":false})", "\"a\\\\\"b\""})
    CHECK_FALSE(accepts(grammar, bad));
}

TEST_CASE("JSON Schema refusals name the feature and where it is", "[grammar]") {
  struct Refusal {
    const char* schema;
    const char* message;
  };
  const std::vector<Refusal> refusals = {
      {R"({"type":"object","patternProperties":{"^x":{}}})",
       "unsupported JSON Schema feature 'patternProperties' at #"},
      {R"({"properties":{"tags":{"type":"array","uniqueItems":true}}})",
       "unsupported JSON Schema feature 'uniqueItems' at #/properties/tags"},
      {R"({"if":{},"then":{},"else":{}})", "unsupported JSON Schema feature 'if' at #"},
      {R"({"properties":{"a":{"not":{"type":"null"}}}})", "unsupported JSON Schema feature 'not' at #/properties/a"},
      {R"({"type":"object","dependentRequired":{"a":["b"]}})",
       "unsupported JSON Schema feature 'dependentRequired' at #"},
      {R"({"type":"number","multipleOf":2})", "unsupported JSON Schema feature 'multipleOf' at #"},
      {R"({"type":"object","minProperties":1})", "unsupported JSON Schema feature 'minProperties' at #"},
      {R"({"type":"array","contains":{"type":"integer"}})", "unsupported JSON Schema feature 'contains' at #"},
      {R"({"type":"object","unevaluatedProperties":false})",
       "unsupported JSON Schema feature 'unevaluatedProperties' at #"},
      {R"({"$ref":"https://example.com/schema.json"})",
       "unsupported JSON Schema feature '$ref to 'https://example.com/schema.json'' at #/$ref"},
      {R"({"items":{"$ref":"#/properties/x"}})",
       "unsupported JSON Schema feature '$ref to '#/properties/x'' at #/items/$ref"},
      {R"({"type":"string","format":"hostname"})", "unsupported JSON Schema feature 'format 'hostname'' at #/format"},
      {R"({"type":"number","minimum":1.5})", "unsupported JSON Schema feature 'number minimum 1.5"},
      {R"({"type":"number","maximum":10})", "unsupported JSON Schema feature 'number maximum 10"},
      {R"({"allOf":[{"type":"object"},{"required":["a"]}]})",
       "unsupported JSON Schema feature 'allOf with more than one schema' at #/allOf"},
      {R"({"anyOf":[{"type":"string","pattern":"(a)\\1"}]})",
       "unsupported JSON Schema feature 'pattern' at #/anyOf/0/pattern: regex: backreference at offset 3"},
      {R"({"properties":{"a/b":{"properties":{"c~d":{"contains":{}}}}}})",
       "unsupported JSON Schema feature 'contains' at #/properties/a~1b/properties/c~0d"},
      {R"({"type":"string","pattern":"^a$","maxLength":3})",
       "unsupported JSON Schema feature 'pattern beside minLength/maxLength' at #"},
      {R"({"$defs":{"A":{"type":"object","maxProperties":2}},"$ref":"#/$defs/A"})",
       "unsupported JSON Schema feature 'maxProperties' at #/$defs/A"},
  };
  for (const auto& r : refusals) {
    INFO(r.schema);
    REQUIRE_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(r.schema)), Catch::Contains(r.message));
  }
}

TEST_CASE("JSON Schema size limits are refused with where they are", "[grammar]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(
      json_schema_to_gbnf(ordered_json::parse(R"({"properties":{"a":{"type":"array","maxItems":5000}}})")),
      Contains("'maxItems' of 5000 is above the limit of 1000 at #/properties/a"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"type":"string","minLength":1001})")),
                    Contains("'minLength' of 1001 is above the limit of 1000 at #"));
  ordered_json deep = {{"type", "integer"}};
  for (int i = 0; i < 70; ++i) deep = {{"type", "array"}, {"items", deep}};
  CHECK_THROWS_WITH(json_schema_to_gbnf(deep), Contains("nested deeper than 64 at #/items/items"));
  ordered_json wide = {{"type", "object"}, {"properties", ordered_json::object()}};
  for (int i = 0; i < 6000; ++i) {
    std::string key = "p";
    key += std::to_string(i);
    wide["properties"][key] = {{"type", "integer"}};
  }
  CHECK_THROWS_WITH(json_schema_to_gbnf(wide), Contains("more than 10000 grammar rules"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"type":"integer","minimum":1e19})")),
                    Contains("integer bound beyond"));
}

TEST_CASE("JSON Schema invalid schemas are refused", "[grammar]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse("false")), Contains("matches nothing at #"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"type":"strnig"})")),
                    Contains("unknown type 'strnig'"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"$ref":"#/$defs/Missing"})")),
                    Contains("missing definition"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"type":"integer","minimum":5,"maximum":4})")),
                    Contains("admit no value"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse(R"({"enum":[]})")),
                    Contains("'enum' must be a non-empty array"));
  CHECK_THROWS_WITH(json_schema_to_gbnf(ordered_json::parse("[1]")), Contains("must be an object or a boolean"));
}

TEST_CASE("JSON Schema recursion through $ref becomes recursive rules", "[grammar]") {
  const ordered_json schema = ordered_json::parse(
      R"({"type":"object","properties":{"name":{"type":"string"},"children":{"type":"array","items":{"$ref":"#"}}},"required":["name"],"additionalProperties":false})");
  const std::string gbnf = json_schema_to_gbnf(schema);
  CHECK(gbnf.find("schema-root ::=") != std::string::npos);
  const auto grammar = Grammar::parse(gbnf);
  CHECK(accepts(grammar, R"({"name":"a","children":[{"name":"b","children":[{"name":"c"}]},{"name":"d"}]})"));
  CHECK_FALSE(accepts(grammar, R"({"name":"a","children":[{"children":[]}]})"));
}

TEST_CASE("JSON Schema pattern: matched over the string's encoded characters", "[grammar]") {
  auto pattern = [](const char* regex) { return compile({{"type", "string"}, {"pattern", regex}}); };
  const auto latin = pattern("^[à-ÿ]+$");
  for (const char* ok : {"\"àÿ\"", R"("\u00e0\u00FF")", R"("\u00f1é")"}) CHECK(accepts(latin, ok));
  for (const char* bad : {R"("\u00df")", R"("\u0100")", R"("a")", R"("\u0061")", R"("")"})
    CHECK_FALSE(accepts(latin, bad));
  const auto wide = pattern("^[\\u0100-\\u2fff😀-🙏]$");
  for (const char* ok : {R"("\u0100")", R"("\u2FfF")", R"("\ud83d\ude00")", R"("\uD83D\uDE4F")", "\"😃\"", "\"ā\""}) {
    CHECK(accepts(wide, ok));
  }
  for (const char* bad : {R"("\u00ff")", R"("\u3000")", R"("\ud83d\ude50")", R"("\ud83d\uddff")", R"("\ud83d")"}) {
    CHECK_FALSE(accepts(wide, bad));
  }
  const auto not_space = pattern("^[^\\s\"]{2}$");
  for (const char* ok : {R"("ab")", R"("\u00e9\\")", R"("\/\u0001")", R"("\ud83d\ude00x")"})
    CHECK(accepts(not_space, ok));
  for (const char* bad : {R"("a ")", R"("\u3000a")", R"("\u2028a")", R"("\"a")", R"("a\u0020")"}) {
    CHECK_FALSE(accepts(not_space, bad));
  }
  const auto quoted = pattern("^\"[a-z]*\"/\\\\$");
  CHECK(accepts(quoted, R"("\"abc\"/\\")"));
  CHECK(accepts(quoted, R"("\"\"\/\\")"));
  CHECK_FALSE(accepts(quoted, R"(""abc"/\")"));
}

TEST_CASE("JSON Schema formats: real calendar dates and times", "[grammar]") {
  const auto date = compile({{"type", "string"}, {"format", "date"}});
  for (const char* ok :
       {"2024-02-29", "2000-02-29", "0004-02-29", "2023-02-28", "2023-04-30", "2023-12-31", "0001-01-01"}) {
    CHECK(accepts(date, std::string("\"") + ok + "\""));
  }
  for (const char* bad : {"2023-02-29", "1900-02-29", "2023-04-31", "2023-02-30", "0000-01-01", "2023-13-01",
                          "2023-00-10", "2023-1-01", "20230101"}) {
    CHECK_FALSE(accepts(date, std::string("\"") + bad + "\""));
  }
  const auto date_time = compile({{"type", "string"}, {"format", "date-time"}});
  for (const char* ok : {"2024-05-06T07:08:09Z", "2024-05-06t23:59:59.123456+05:30", "1999-12-31T00:00:00-08:00"}) {
    CHECK(accepts(date_time, std::string("\"") + ok + "\""));
  }
  for (const char* bad : {"2024-05-06 07:08:09Z", "2024-05-06T24:00:00Z", "2024-05-06T23:59:60Z", "2024-05-06T07:08:09",
                          "2024-05-06T07:08Z"}) {
    CHECK_FALSE(accepts(date_time, std::string("\"") + bad + "\""));
  }
}

// Constrained random walks, as a sampler would take them with a byte vocabulary plus a few
// multi-byte tokens: every step has an allowed token or may end, and every text the walk ends
// on parses as JSON. (Offline, walks like these were also checked against the schemas with
// Python's jsonschema.)
TEST_CASE("JSON Schema grammars drive the token masker to parseable JSON", "[grammar]") {
  const ordered_json fixture = read_fixture("json_schema.json");
  auto vocab = std::make_shared<std::vector<std::string>>();
  for (int b = 0; b < 256; ++b) vocab->push_back(std::string(1, static_cast<char>(b)));
  for (const char* token : {"\": ", ", ", "\n  ", "true", "null", "\"}", "\"]", "\","}) vocab->push_back(token);
  std::mt19937 rng(20261123);
  size_t ended = 0;
  for (const auto& schema_case : fixture.at("schemas")) {
    INFO("schema " << schema_case.at("name").get<std::string>());
    const auto grammar = compile(schema_case.at("schema"));
    slab::grammar::TokenMasker masker(grammar, vocab);
    std::vector<uint64_t> mask((vocab->size() + 63) / 64);
    for (int walk = 0; walk < 5; ++walk) {
      slab::grammar::Matcher matcher(grammar);
      std::string text;
      while (text.size() < 3000 && !(matcher.can_end() && (rng() % 3 == 0 || matcher.must_end()))) {
        masker.fill_mask(matcher, mask);
        std::vector<size_t> allowed;
        for (size_t t = 0; t < vocab->size(); ++t) {
          if ((mask[t / 64] >> (t % 64)) & 1) allowed.push_back(t);
        }
        REQUIRE((!allowed.empty() || matcher.can_end()));
        if (allowed.empty()) break;
        // Closing tokens drawn more often than their share, so that walks end.
        size_t pick = allowed[rng() % allowed.size()];
        for (size_t t : allowed) {
          char first = (*vocab)[t][0];
          if ((first == '"' || first == '}' || first == ']') && rng() % 4 == 0) pick = t;
        }
        REQUIRE(matcher.accept((*vocab)[pick]));
        text += (*vocab)[pick];
      }
      if (!matcher.can_end()) continue;  // cut at the length limit
      INFO(text);
      bool parsed = true;
      try {
        const auto value = nlohmann::json::parse(text);
        parsed = !value.is_discarded();
      } catch (const nlohmann::json::out_of_range& e) {
        parsed = e.id == 406;  // a number beyond double range (1e999) is valid JSON all the same
      } catch (const nlohmann::json::exception&) {
        parsed = false;
      }
      CHECK(parsed);
      ++ended;
    }
  }
  CHECK(ended >= 300);
}
