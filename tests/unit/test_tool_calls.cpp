// Tool calls and reasoning in model output (src/chat/tool_calls.h): outputs in the syntax the
// real chat templates write (../shared/testdata/chat-templates), malformed ones, the stream
// parser against the whole-text parse over random splits, tool-call grammars through the GBNF
// parser and matcher, and <think> splitting whole and streamed.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "chat/tool_calls.h"
#include "grammar/grammar.h"
#include "grammar_match.h"
#include "test_paths.h"

using namespace slab::chat;
using slab::grammar::Grammar;
using slab::test::full_match;
using ordered_json = nlohmann::ordered_json;

namespace {

struct Call {
  std::string name;
  std::string arguments;
  bool operator==(const Call&) const = default;
};

std::vector<Call> calls_of(const ParsedOutput& out) {
  std::vector<Call> calls;
  for (const auto& call : out.calls) calls.push_back({call.name, call.arguments});
  return calls;
}

// The text split at `cuts` (sorted positions) and fed to a stream parser chunk by chunk.
ParsedOutput parse_streamed(ToolCallFormat format, const std::string& text, const std::vector<size_t>& cuts) {
  ToolCallStreamParser parser(format);
  ParsedOutput out;
  auto take = [&](ParsedOutput piece) {
    out.content += piece.content;
    for (auto& call : piece.calls) out.calls.push_back(std::move(call));
  };
  size_t start = 0;
  for (size_t cut : cuts) {
    take(parser.push(std::string_view(text).substr(start, cut - start)));
    start = cut;
  }
  take(parser.push(std::string_view(text).substr(start)));
  take(parser.finish());
  return out;
}

std::vector<size_t> random_cuts(std::mt19937& random, size_t size) {
  std::vector<size_t> cuts;
  if (size == 0) return cuts;
  std::uniform_int_distribution<size_t> count(0, std::min<size_t>(size, 12));
  std::uniform_int_distribution<size_t> position(0, size);
  for (size_t n = count(random); n > 0; --n) cuts.push_back(position(random));
  std::sort(cuts.begin(), cuts.end());
  return cuts;
}

std::string read_template(const std::string& name) {
  auto path = slab::test::testdata_or_skip("chat-templates/" + name);
  if (path.empty()) return {};
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

const char* kHermesTwoCalls =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n"
    "</tool_call>\n<tool_call>\n{\"name\": \"get_time\", \"arguments\": {\"timezone\": \"Europe/Paris\"}}\n"
    "</tool_call>";

}  // namespace

TEST_CASE("tool call format names and detection from the real chat templates", "[tools]") {
  for (auto format : {ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral}) {
    CHECK(tool_call_format_named(tool_call_format_name(format)) == format);
  }
  CHECK_FALSE(tool_call_format_named("pythonic").has_value());

  // Llama 3.1's own template text (not in the shared data): built-in tools after
  // <|python_tag|>, custom ones as {"name", "parameters"} JSON; 3.2 has the same instruction.
  CHECK(detect_tool_call_format("{{- \"<|python_tag|>\" + tool_call.name + \".call(\" }}") ==
        ToolCallFormat::llama3_json);
  CHECK(detect_tool_call_format("{{- 'Respond in the format {\"name\": function name, \"parameters\": dictionary of "
                                "argument name and its value}.' }}") == ToolCallFormat::llama3_json);
  CHECK_FALSE(detect_tool_call_format("{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"));

  std::string hermes = read_template("NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja");
  if (hermes.empty()) return;
  CHECK(detect_tool_call_format(hermes) == ToolCallFormat::hermes);
  CHECK(detect_tool_call_format(read_template("mistralai-Mistral-Nemo-Instruct-2407.jinja")) ==
        ToolCallFormat::mistral);
  // Formats this module does not parse (Command R's JSON list, functionary's >>>) and templates
  // without tools.
  for (const char* name : {"CohereForAI-c4ai-command-r-plus-tool_use.jinja", "meetkai-functionary-medium-v3.2.jinja",
                           "google-gemma-2-2b-it.jinja", "microsoft-Phi-3.5-mini-instruct.jinja",
                           "deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja"}) {
    INFO(name);
    CHECK_FALSE(detect_tool_call_format(read_template(name)).has_value());
  }
}

TEST_CASE("hermes: <tool_call> blocks as Hermes 2 Pro and Qwen write them", "[tools]") {
  SECTION("one call, arguments object serialised compactly in the order written") {
    auto out = parse_tool_calls(ToolCallFormat::hermes,
                                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"unit\": \"celsius\", "
                                "\"city\": \"Paris\"}}\n</tool_call>");
    CHECK(out.content.empty());
    CHECK(calls_of(out) == std::vector<Call>{{"get_weather", R"({"unit":"celsius","city":"Paris"})"}});
  }
  SECTION("two calls separated by a newline, after some content") {
    auto out = parse_tool_calls(ToolCallFormat::hermes, std::string("I'll look both up.\n\n") + kHermesTwoCalls);
    CHECK(out.content == "I'll look both up.");
    CHECK(calls_of(out) == std::vector<Call>{{"get_weather", R"({"city":"Paris","unit":"celsius"})"},
                                             {"get_time", R"({"timezone":"Europe/Paris"})"}});
  }
  SECTION("arguments written as a JSON string, or absent") {
    auto out = parse_tool_calls(ToolCallFormat::hermes,
                                "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"x\\\": 1}\"}\n</tool_call>\n"
                                "<tool_call>\n{\"name\": \"g\"}\n</tool_call>");
    CHECK(calls_of(out) == std::vector<Call>{{"f", "{\"x\": 1}"}, {"g", "{}"}});
  }
  SECTION("an unclosed last block still parses if its JSON is whole (vLLM's rule)") {
    auto out = parse_tool_calls(ToolCallFormat::hermes, "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n");
    CHECK(calls_of(out) == std::vector<Call>{{"f", "{}"}});
  }
  SECTION("malformed blocks stay content, valid ones around them are calls") {
    std::string bad_json = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"x\": }\n</tool_call>";
    std::string no_name = "<tool_call>\n{\"arguments\": {}}\n</tool_call>";
    std::string number_name = "<tool_call>\n{\"name\": 3, \"arguments\": {}}\n</tool_call>";
    std::string list_arguments = "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>";
    for (const auto& bad : {bad_json, no_name, number_name, list_arguments}) {
      auto out = parse_tool_calls(ToolCallFormat::hermes, bad);
      CHECK(out.content == bad);
      CHECK(out.calls.empty());
    }
    auto out = parse_tool_calls(ToolCallFormat::hermes,
                                bad_json + "\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"y\": 2}}\n</tool_call>");
    CHECK(out.content == bad_json);
    CHECK(calls_of(out) == std::vector<Call>{{"g", R"({"y":2})"}});
    auto unclosed = parse_tool_calls(ToolCallFormat::hermes, "Text <tool_call>\n{\"name\": \"f\", \"argu");
    CHECK(unclosed.content == "Text <tool_call>\n{\"name\": \"f\", \"argu");
    CHECK(unclosed.calls.empty());
  }
  SECTION("text without a block, and other formats' markers, are content") {
    for (const char* text : {"Paris is sunny.", "Use [TOOL_CALLS] or {\"name\": \"f\"}", "a < b <tool c", ""}) {
      auto out = parse_tool_calls(ToolCallFormat::hermes, text);
      CHECK(out.content == text);
      CHECK(out.calls.empty());
    }
  }
}

TEST_CASE("llama3_json: the whole output is JSON calls, optionally after <|python_tag|>", "[tools]") {
  SECTION("one call with parameters, as Llama 3.1/3.2 write it") {
    auto out = parse_tool_calls(ToolCallFormat::llama3_json,
                                "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}");
    CHECK(out.content.empty());
    CHECK(calls_of(out) == std::vector<Call>{{"get_weather", R"({"city":"Paris","days":3})"}});
  }
  SECTION("after the python tag, several separated by ';', \"arguments\" accepted too") {
    auto out = parse_tool_calls(ToolCallFormat::llama3_json,
                                "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"x\": 1}}; {\"name\": \"b\", "
                                "\"arguments\": {\"y\": \"z\"}}");
    CHECK(out.content.empty());
    CHECK(calls_of(out) == std::vector<Call>{{"a", R"({"x":1})"}, {"b", R"({"y":"z"})"}});
  }
  SECTION("content before the JSON, text after it, bad JSON or no name: all content") {
    for (const char* text :
         {"Sure: {\"name\": \"a\", \"parameters\": {}}", "{\"name\": \"a\", \"parameters\": {}} done",
          "{\"name\": \"a\", \"parameters\": {\"x\": }}", "{\"answer\": 42}",
          "<|python_tag|>brave_search.call(query=\"weather\")", "<|python_tag|>",
          "{\"name\": \"a\", \"parameters\": {}}; ; x", "The weather is fine.", "  "}) {
      auto out = parse_tool_calls(ToolCallFormat::llama3_json, text);
      CHECK(out.content == text);
      CHECK(out.calls.empty());
    }
  }
}

TEST_CASE("mistral: [TOOL_CALLS] and a JSON array of calls, as Mistral Nemo writes them", "[tools]") {
  SECTION("calls with the 9-character ids the template writes") {
    auto out =
        parse_tool_calls(ToolCallFormat::mistral,
                         "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
                         "\"a1B2c3D4e\"}, {\"name\": \"get_time\", \"arguments\": {}, \"id\": \"z9Y8x7W6v\"}]");
    CHECK(out.content.empty());
    CHECK(calls_of(out) == std::vector<Call>{{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}});
  }
  SECTION("content before the marker is content") {
    auto out = parse_tool_calls(ToolCallFormat::mistral,
                                "Checking.\n[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"s\": \"]}\\\"[\"}}]");
    CHECK(out.content == "Checking.");
    CHECK(calls_of(out) == std::vector<Call>{{"f", R"({"s":"]}\"["})"}});
  }
  SECTION("one call a marker, NAME[ARGS]{...}, as later Mistral tokenizers (v11) write them") {
    auto out =
        parse_tool_calls(ToolCallFormat::mistral,
                         "Let me see.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[ARGS]{}");
    CHECK(out.content == "Let me see.");
    CHECK(calls_of(out) == std::vector<Call>{{"get_weather", R"({"city":"Paris"})"}, {"get_time", "{}"}});
    for (const char* text : {"[TOOL_CALLS]f[ARGS]", "[TOOL_CALLS]f[ARGS]nope", "[TOOL_CALLS]f[ARGS][1]",
                             "[TOOL_CALLS][ARGS]{}", "[TOOL_CALLS]f[ARG]{}", "[TOOL_CALLS]f[ARGS]{\"a\": }"}) {
      auto bad = parse_tool_calls(ToolCallFormat::mistral, text);
      CHECK(bad.content == text);
      CHECK(bad.calls.empty());
    }
  }
  SECTION("a marker without valid calls stays content") {
    for (const char* text : {"[TOOL_CALLS]", "[TOOL_CALLS] none", "[TOOL_CALLS][]", "[TOOL_CALLS][{\"name\": \"f\"",
                             "[TOOL_CALLS][{\"arguments\": {}}]", "[TOOL_CALLS][{\"name\": \"f\"}, 3]"}) {
      auto out = parse_tool_calls(ToolCallFormat::mistral, text);
      CHECK(out.content == text);
      CHECK(out.calls.empty());
    }
  }
}

TEST_CASE("tool call ids look like OpenAI's and differ", "[tools]") {
  auto out = parse_tool_calls(ToolCallFormat::hermes, kHermesTwoCalls);
  REQUIRE(out.calls.size() == 2);
  for (const auto& call : out.calls) {
    REQUIRE(call.id.size() == 29);
    CHECK(call.id.rfind("call_", 0) == 0);
    for (char c : call.id.substr(5)) CHECK(std::isalnum(static_cast<unsigned char>(c)));
  }
  CHECK(out.calls[0].id != out.calls[1].id);
}

TEST_CASE("tool call stream: released early, and any split equals the whole parse", "[tools]") {
  SECTION("content is released as soon as it cannot start a call") {
    ToolCallStreamParser hermes(ToolCallFormat::hermes);
    CHECK(hermes.push("Let me check").content == "Let me check");
    CHECK(hermes.push(" the weather.\n<tool").content == " the weather.");  // "\n<tool" may open a call
    auto call = hermes.push("_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool");
    CHECK(call.content.empty());
    CHECK(call.calls.empty());
    CHECK(hermes.push("_call>").calls.size() == 1);  // released at its closing tag
    CHECK(hermes.push("\nDone").content == "Done");

    ToolCallStreamParser llama(ToolCallFormat::llama3_json);
    CHECK(llama.push(" <|python").content.empty());
    CHECK(llama.push("_ta Hello").content == " <|python_ta Hello");
    ToolCallStreamParser llama_call(ToolCallFormat::llama3_json);
    CHECK(llama_call.push("{\"name\": \"f\", \"parameters\": {}}").calls.empty());  // only at the end
    CHECK(llama_call.finish().calls.size() == 1);

    ToolCallStreamParser mistral(ToolCallFormat::mistral);
    CHECK(mistral.push("OK [TOOL_").content == "OK");
    CHECK(mistral.push("CALLS][{\"name\": \"f\", \"arguments\": {}}").calls.empty());
    CHECK(mistral.push("]").calls.size() == 1);  // released when the array closes
  }

  SECTION("random splits") {
    const std::vector<std::pair<ToolCallFormat, std::string>> outputs = {
        {ToolCallFormat::hermes, kHermesTwoCalls},
        {ToolCallFormat::hermes, std::string("Sure.\n\n") + kHermesTwoCalls + "\n\nAnything else?"},
        {ToolCallFormat::hermes, "<tool_call>\n{\"name\": bad}\n</tool_call>\n<tool_call>\n{\"name\": \"g\"}\n"},
        {ToolCallFormat::hermes, "a <tool_cal b <tool_call> c </tool_call> <<tool_call>{\"name\": \"x\"}</tool_call>"},
        {ToolCallFormat::hermes, "plain answer \n with spaces  \n"},
        {ToolCallFormat::llama3_json,
         "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"}{;\"}}; "
         "{\"name\": \"b\", \"parameters\": {}}"},
        {ToolCallFormat::llama3_json, "  {\"name\": \"a\", \"parameters\": {}}"},
        {ToolCallFormat::llama3_json, "{\"name\": \"a\", \"parameters\": {}} trailing"},
        {ToolCallFormat::llama3_json, "<|python_tag|>print(1)"},
        {ToolCallFormat::llama3_json, "Hello <|python_tag|>{\"name\": \"a\", \"parameters\": {}}"},
        {ToolCallFormat::mistral,
         "Text [TOOL_CALLS][{\"name\": \"f\", \"arguments\": {\"a\": [1, {\"b\": \"]\"}]}}]"
         " after [TOOL_CALLS] nothing [TOOL_CALLS]{\"name\": \"g\", \"arguments\": {}}"},
        {ToolCallFormat::mistral, "[TOOL_CALLS][{\"name\": \"f\", \"arguments\": {}}, {\"oops\": 1}]  tail"},
        {ToolCallFormat::mistral, "x [TOOL_CALLS]f[ARGS]{\"a\": \"}\"} [TOOL_CALLS]g[ARG]{} [TOOL_CALLS]h[ARGS]{}"},
        {ToolCallFormat::mistral, "[TOOL_CALLS] [{\"name\": \"f\", \"arguments\": {\"s\": \"\\\"]\"}}]"},
    };
    std::mt19937 random(20261123);
    for (const auto& [format, text] : outputs) {
      INFO(tool_call_format_name(format) << ": " << text);
      ParsedOutput whole = parse_tool_calls(format, text);
      std::vector<std::vector<size_t>> splits;
      std::vector<size_t> every_byte;
      for (size_t i = 1; i < text.size(); ++i) every_byte.push_back(i);
      splits.push_back(every_byte);
      for (int trial = 0; trial < 300; ++trial) splits.push_back(random_cuts(random, text.size()));
      for (const auto& cuts : splits) {
        ParsedOutput streamed = parse_streamed(format, text, cuts);
        REQUIRE(streamed.content == whole.content);
        REQUIRE(calls_of(streamed) == calls_of(whole));
      }
    }
    // The cases above do what they claim (so that the invariant is not met by parsing nothing).
    CHECK(parse_tool_calls(ToolCallFormat::hermes, outputs[1].second).content == "Sure.Anything else?");
    CHECK(parse_tool_calls(ToolCallFormat::hermes, outputs[3].second).calls.size() == 1);
    CHECK(parse_tool_calls(ToolCallFormat::llama3_json, outputs[5].second).calls.size() == 2);
    CHECK(parse_tool_calls(ToolCallFormat::mistral, outputs[10].second).calls.size() == 2);
    CHECK(parse_tool_calls(ToolCallFormat::mistral, outputs[11].second).calls.empty());
    CHECK(calls_of(parse_tool_calls(ToolCallFormat::mistral, outputs[12].second)) ==
          std::vector<Call>{{"f", R"({"a":"}"})"}, {"h", "{}"}});
    CHECK(parse_tool_calls(ToolCallFormat::mistral, outputs[13].second).calls.size() == 1);
  }
}

namespace {

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
    "parameters": {"type": "object", "properties": {
      "city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
      "required": ["city"]}}},
  {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {
      "query": {"type": "string", "minLength": 1}, "limit": {"type": "integer", "minimum": 1, "maximum": 50}},
      "required": ["query", "limit"], "additionalProperties": false}}},
  {"type": "function", "function": {"name": "now"}}
])");

bool accepts(const std::shared_ptr<const Grammar>& grammar, const std::string& text) {
  return full_match(grammar, text).accepted;
}

// One call's text in `format` as the grammar lays it out.
std::string call_text(ToolCallFormat format, const std::string& name, const std::string& arguments) {
  std::string key = format == ToolCallFormat::llama3_json ? "parameters" : "arguments";
  std::string object = "{\"name\": \"" + name + "\", \"" + key + "\": " + arguments + "}";
  return format == ToolCallFormat::hermes ? "<tool_call>\n" + object + "\n</tool_call>" : object;
}

std::string calls_text(ToolCallFormat format, const std::vector<std::string>& calls) {
  std::string separator = format == ToolCallFormat::hermes ? "\n" : format == ToolCallFormat::mistral ? ", " : "; ";
  std::string out;
  for (size_t i = 0; i < calls.size(); ++i) out += (i ? separator : "") + calls[i];
  return format == ToolCallFormat::mistral ? "[TOOL_CALLS][" + out + "]" : out;
}

}  // namespace

TEST_CASE("tool call grammar: accepts the tools' calls, refuses others, and parses back", "[tools]") {
  const std::vector<std::pair<std::string, std::string>> valid = {
      {"get_weather", R"({"city": "Paris"})"},
      {"get_weather", R"({"city": "Oslo", "unit": "celsius"})"},
      {"search", R"({"query": "tool calls", "limit": 5})"},
      {"search", "{\n  \"query\": \"x\",\n  \"limit\": 50\n}"},
      {"now", "{}"},
      {"now", R"({"anything": [1, {"goes": null}]})"},
  };
  const std::vector<std::pair<std::string, std::string>> invalid = {
      {"get_wether", R"({"city": "Paris"})"},                     // unknown function
      {"get_weather", R"({"unit": "celsius"})"},                  // required city missing
      {"get_weather", R"({"city": "Paris", "unit": "kelvin"})"},  // not in the enum
      {"search", R"({"query": "", "limit": 5})"},                 // minLength
      {"search", R"({"query": "x", "limit": 51})"},               // maximum
      {"search", R"({"query": "x", "limit": 5, "extra": 1})"},    // additionalProperties false
      {"now", "[]"},                                              // not an object
  };
  for (auto format : {ToolCallFormat::hermes, ToolCallFormat::llama3_json, ToolCallFormat::mistral}) {
    INFO(tool_call_format_name(format));
    auto single = Grammar::parse(tool_call_gbnf(format, kTools, std::nullopt, false));
    auto parallel = Grammar::parse(tool_call_gbnf(format, kTools, std::nullopt, true));
    std::vector<std::string> valid_calls;
    for (const auto& [name, arguments] : valid) {
      std::string call = call_text(format, name, arguments);
      valid_calls.push_back(call);
      std::string text = calls_text(format, {call});
      INFO(text);
      CHECK(accepts(single, text));
      CHECK(accepts(parallel, text));
      ParsedOutput parsed = parse_tool_calls(format, text);
      CHECK(parsed.content.empty());
      REQUIRE(parsed.calls.size() == 1);
      CHECK(parsed.calls[0].name == name);
      CHECK(ordered_json::parse(parsed.calls[0].arguments) == ordered_json::parse(arguments));
    }
    for (const auto& [name, arguments] : invalid) {
      std::string text = calls_text(format, {call_text(format, name, arguments)});
      INFO(text);
      CHECK_FALSE(accepts(single, text));
      CHECK_FALSE(accepts(parallel, text));
    }
    std::string several = calls_text(format, valid_calls);
    CHECK_FALSE(accepts(single, several));
    REQUIRE(accepts(parallel, several));
    CHECK(parse_tool_calls(format, several).calls.size() == valid.size());
    CHECK_FALSE(accepts(single, "Sure. " + calls_text(format, {valid_calls[0]})));  // no content around a call
  }

  // A name that needs escaping in JSON and in GBNF.
  ordered_json odd_name = ordered_json::array(
      {{{"type", "function"}, {"function", {{"name", "caf\u00e9 \"x\" \\ y"}, {"parameters", {{"type", "object"}}}}}}});
  auto odd = Grammar::parse(tool_call_gbnf(ToolCallFormat::hermes, odd_name, std::nullopt, false));
  std::string odd_call = "<tool_call>\n{\"name\": \"caf\u00e9 \\\"x\\\" \\\\ y\", \"arguments\": {}}\n</tool_call>";
  CHECK(accepts(odd, odd_call));
  CHECK(calls_of(parse_tool_calls(ToolCallFormat::hermes, odd_call)) ==
        std::vector<Call>{{"caf\u00e9 \"x\" \\ y", "{}"}});

  auto only_search = Grammar::parse(tool_call_gbnf(ToolCallFormat::hermes, kTools, "search", false));
  CHECK(accepts(only_search, call_text(ToolCallFormat::hermes, "search", R"({"query": "q", "limit": 1})")));
  CHECK_FALSE(accepts(only_search, call_text(ToolCallFormat::hermes, "now", "{}")));
}

TEST_CASE("tool call grammar: schema rule names of several tools do not clash", "[tools]") {
  // Property names that json_schema.cpp turns into rule names like the shared and fixed ones
  // ("root", "ws", "call", "json-value", "tool0-args"), the same names in two tools, and a
  // recursive $ref: each tool must keep its own rules.
  ordered_json tools = ordered_json::parse(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object", "properties": {
      "root": {"type": "integer"}, "ws": {"type": "boolean"}, "call": {"type": "string", "maxLength": 2},
      "json-value": {"type": "null"}, "tool0-args": {"type": "integer"}}, "required": ["root"]}}},
    {"type": "function", "function": {"name": "b", "parameters": {"type": "object", "properties": {
      "root": {"type": "string"}, "node": {"$ref": "#/$defs/node"}}, "required": ["root"],
      "$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}}}}}}}
  ])");
  auto grammar = Grammar::parse(tool_call_gbnf(ToolCallFormat::llama3_json, tools, std::nullopt, false));
  CHECK(accepts(grammar, call_text(ToolCallFormat::llama3_json, "a", R"({"root": 1, "ws": true, "call": "ab"})")));
  CHECK(accepts(grammar, call_text(ToolCallFormat::llama3_json, "b", R"({"root": "x", "node": {"next": {}}})")));
  CHECK_FALSE(accepts(grammar, call_text(ToolCallFormat::llama3_json, "a", R"({"root": "x"})")));
  CHECK_FALSE(accepts(grammar, call_text(ToolCallFormat::llama3_json, "b", R"({"root": 1})")));
  CHECK_FALSE(accepts(grammar, call_text(ToolCallFormat::llama3_json, "a", R"({"root": 1, "call": "abc"})")));
}

TEST_CASE("tool call grammar: errors name the tool", "[tools]") {
  auto message_of = [](const ordered_json& tools, const std::optional<std::string>& only) {
    try {
      tool_call_gbnf(ToolCallFormat::hermes, tools, only, false);
    } catch (const std::invalid_argument& error) {
      return std::string(error.what());
    }
    return std::string("no error");
  };
  using Catch::Matchers::Contains;
  CHECK_THAT(message_of(kTools, "missing"), Contains("'missing'"));
  CHECK_THAT(message_of(ordered_json::parse(R"([{"type": "retrieval"}])"), std::nullopt), Contains("tools[0]"));
  CHECK_THAT(
      message_of(ordered_json::parse(R"([{"type": "function", "function": {"description": "x"}}])"), std::nullopt),
      Contains("tools[0]"));
  CHECK_THAT(message_of(ordered_json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
                        {"type": "object", "patternProperties": {"^x": {}}}}}])"),
                        std::nullopt),
             Contains("tool 'f'") && Contains("patternProperties"));
  CHECK_THAT(message_of(ordered_json::array(), std::nullopt), Contains("tools"));
}

namespace {

ReasoningSplitter::Piece split_streamed(bool starts_thinking, const std::string& text,
                                        const std::vector<size_t>& cuts) {
  ReasoningSplitter splitter(starts_thinking);
  ReasoningSplitter::Piece out;
  auto take = [&](const ReasoningSplitter::Piece& piece) {
    out.reasoning += piece.reasoning;
    out.content += piece.content;
  };
  size_t start = 0;
  for (size_t cut : cuts) {
    take(splitter.push(std::string_view(text).substr(start, cut - start)));
    start = cut;
  }
  take(splitter.push(std::string_view(text).substr(start)));
  take(splitter.finish());
  return out;
}

}  // namespace

TEST_CASE("reasoning: <think> blocks of Qwen3 and DeepSeek-R1 distills, whole and streamed", "[tools]") {
  struct Case {
    bool starts_thinking;
    std::string text;
    std::string reasoning;
    std::string content;
  };
  const std::vector<Case> cases = {
      // Qwen3: the output opens the block; "\n\n" after it is dropped.
      {false, "<think>\nThe user greets me.\n</think>\n\nHello!", "\nThe user greets me.\n", "Hello!"},
      // Qwen3 with thinking disabled (the prompt holds an empty block): all content.
      {false, "Hello! How can I help?", "", "Hello! How can I help?"},
      {false, "a </think> b", "", "a </think> b"},
      // DeepSeek-R1 distills: the prompt ends with "<think>\n".
      {true, "Okay, 2+2 is 4.\n</think>\n\nThe answer is **4**.", "Okay, 2+2 is 4.\n", "The answer is **4**."},
      {true, "<think>\nrepeated opening\n</think>\n\nok", "\nrepeated opening\n", "ok"},
      {true, "cut off while thinking </thi", "cut off while thinking </thi", ""},
      {false, "<think>never closed", "never closed", ""},
      {false, "<think></think>", "", ""},
      {false, "<thinking>not a tag", "", "<thinking>not a tag"},
      {false, "\n<think>x</think>y <think>z</think>", "x", "y <think>z</think>"},
  };
  std::mt19937 random(7);
  for (const auto& c : cases) {
    INFO(c.starts_thinking << ": " << c.text);
    auto whole = split_streamed(c.starts_thinking, c.text, {});
    CHECK(whole.reasoning == c.reasoning);
    CHECK(whole.content == c.content);
    for (int trial = 0; trial < 200; ++trial) {
      auto streamed = split_streamed(c.starts_thinking, c.text, random_cuts(random, c.text.size()));
      REQUIRE(streamed.reasoning == c.reasoning);
      REQUIRE(streamed.content == c.content);
    }
  }

  // Only a possible partial tag is held back.
  ReasoningSplitter qwen(false);
  CHECK(qwen.push("<thi").reasoning.empty());
  CHECK(qwen.push("nk>\nStep one</th").reasoning == "\nStep one");
  auto closing = qwen.push("ink>\n\nAns");
  CHECK(closing.reasoning.empty());
  CHECK(closing.content == "Ans");
  CHECK(qwen.push("wer").content == "wer");
  ReasoningSplitter plain(false);
  CHECK(plain.push("Hi").content == "Hi");
}
