// Output constraints through the public engine API on the real stories260K model: sampled at
// temperature 1.0 with many seeds, every output follows its grammar (choices, a regex, a JSON
// Schema checked field by field), ends by itself when the grammar is complete, and log
// probabilities are those of the constrained distribution.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "slabserve/slabserve.h"
#include "test_paths.h"

namespace {

using slab::api::LoadedModel;
using slab::api::LoadOptions;
using slab::api::Request;
using slab::api::RequestOutput;
using slab::api::RequestStream;
using json = nlohmann::json;

struct Result {
  std::string text;
  RequestOutput last;
  std::vector<slab::api::TokenLogprobs> logprobs;
};

// Submits one request per seed at once (they run batched) and collects each.
std::vector<Result> generate(LoadedModel& model, const std::string& grammar, int seeds, int max_tokens = 256,
                             int logprobs = -1) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int seed = 0; seed < seeds; ++seed) {
    Request r;
    r.prompt = model.tokenizer().encode("Once upon a time", true);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(seed);
    r.sampling.logprobs = logprobs;
    r.stop.max_tokens = max_tokens;
    r.stop.eos_token_ids = model.eos_token_ids();
    r.grammar = grammar;
    streams.push_back(std::make_shared<RequestStream>());
    model.engine().submit(std::move(r), streams.back());
  }
  std::vector<Result> results;
  for (auto& stream : streams) {
    Result result;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (!result.last.finished) {
      REQUIRE(std::chrono::steady_clock::now() < give_up);
      std::optional<RequestOutput> event = stream->next(std::chrono::milliseconds(500));
      if (!event) continue;
      result.text += event->text;
      result.logprobs.insert(result.logprobs.end(), event->logprobs.begin(), event->logprobs.end());
      result.last = std::move(*event);
    }
    results.push_back(std::move(result));
  }
  return results;
}

std::unique_ptr<LoadedModel> load_stories() {
  const std::string path = slab::test::stories260k_or_skip();
  if (path.empty()) return nullptr;
  LoadOptions options;
  options.model = path;
  options.engine.kv_cache_tokens = 16 * 512;
  options.engine.max_num_seqs = 16;
  return LoadedModel::load(options);
}

}  // namespace

TEST_CASE("sampled outputs are one of the choices and end there", "[grammar][engine]") {
  auto model = load_stories();
  if (!model) return;
  const std::set<std::string> choices = {"yes", "no", "maybe so", "Once \"quoted\""};
  const auto results =
      generate(*model, slab::api::choice_to_gbnf(std::vector<std::string>(choices.begin(), choices.end())), 24);
  for (const Result& r : results) {
    CHECK(choices.count(r.text) == 1);
    CHECK(r.last.finish_reason == slab::api::FinishReason::stop);
  }
}

TEST_CASE("sampled outputs match a regular expression", "[grammar][engine]") {
  auto model = load_stories();
  if (!model) return;
  const std::string pattern = "[a-c]{2,4}-[0-9]{1,3}( ok)?";
  const auto results = generate(*model, slab::api::regex_to_gbnf(pattern), 24);
  const std::regex re(pattern);
  std::set<std::string> distinct;
  for (const Result& r : results) {
    INFO(r.text);
    CHECK(std::regex_match(r.text, re));
    CHECK(r.last.finish_reason == slab::api::FinishReason::stop);
    distinct.insert(r.text);
  }
  CHECK(distinct.size() >= 4);  // sampled, not forced down one path
}

// Checks one output against the weather schema below, keyword by keyword.
void check_weather_document(const std::string& text) {
  INFO(text);
  const json doc = json::parse(text, nullptr, false);
  REQUIRE_FALSE(doc.is_discarded());
  REQUIRE(doc.is_object());
  const std::vector<std::string> order = {"city", "days", "unit", "alerts", "hours"};
  size_t last = 0;
  const auto ordered = nlohmann::ordered_json::parse(text);
  for (const auto& [key, value] : ordered.items()) {
    const auto at = std::find(order.begin(), order.end(), key);
    REQUIRE(at != order.end());
    CHECK(static_cast<size_t>(at - order.begin()) >= last);  // the schema's property order
    last = static_cast<size_t>(at - order.begin());
  }
  REQUIRE(doc.contains("city"));
  REQUIRE(doc["city"].is_string());
  CHECK(slab::api::count_code_points(doc["city"].get<std::string>()) <= 12);
  REQUIRE(doc.contains("days"));
  REQUIRE(doc["days"].is_number_integer());
  CHECK(doc["days"].get<int>() >= 1);
  CHECK(doc["days"].get<int>() <= 14);
  REQUIRE(doc.contains("unit"));
  CHECK((doc["unit"] == "celsius" || doc["unit"] == "fahrenheit"));
  if (doc.contains("alerts")) CHECK(doc["alerts"].is_boolean());
  if (doc.contains("hours")) {
    REQUIRE(doc["hours"].is_array());
    CHECK(doc["hours"].size() <= 3);
    for (const json& h : doc["hours"]) CHECK((h.is_number_integer() && h.get<int>() >= 0 && h.get<int>() <= 23));
  }
}

const char* kWeatherSchema = R"({
  "type": "object",
  "properties": {
    "city": {"type": "string", "maxLength": 12},
    "days": {"type": "integer", "minimum": 1, "maximum": 14},
    "unit": {"enum": ["celsius", "fahrenheit"]},
    "alerts": {"type": "boolean"},
    "hours": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 23}, "maxItems": 3}
  },
  "required": ["city", "days", "unit"],
  "additionalProperties": false
})";

TEST_CASE("sampled outputs are JSON documents valid under the schema", "[grammar][engine]") {
  auto model = load_stories();
  if (!model) return;
  const auto schema = nlohmann::ordered_json::parse(kWeatherSchema);
  // Compact (vLLM's disable_any_whitespace): every document completes well within the limit.
  slab::api::JsonSchemaOptions compact;
  compact.allow_whitespace = false;
  for (const Result& r : generate(*model, slab::api::json_schema_to_gbnf(schema, compact), 24, 400)) {
    CHECK(r.last.finish_reason == slab::api::FinishReason::stop);
    if (r.last.finish_reason == slab::api::FinishReason::stop) check_weather_document(r.text);
  }
  // Whitespace allowed (bounded per gap): this small model spends many tokens on it; the ones
  // that complete are valid, and most complete.
  int complete = 0;
  for (const Result& r : generate(*model, slab::api::json_schema_to_gbnf(schema), 24, 400)) {
    if (r.last.finish_reason == slab::api::FinishReason::length) continue;  // cut short: not a document yet
    ++complete;
    CHECK(r.last.finish_reason == slab::api::FinishReason::stop);
    check_weather_document(r.text);
  }
  CHECK(complete >= 20);
}

TEST_CASE("log probabilities under a constraint are those of the constrained distribution", "[grammar][engine]") {
  auto model = load_stories();
  if (!model) return;
  const auto results = generate(*model, slab::api::choice_to_gbnf({"yes", "no"}), 4, 16, /*logprobs=*/20);
  for (const Result& r : results) {
    REQUIRE_FALSE(r.logprobs.empty());
    // The first token: only the tokens that begin "yes" or "no" have probability, and theirs add
    // up to one; every other listed token reports vLLM's -9999 (JSON has no -inf).
    double total = 0.0;
    for (const auto& [token, logprob] : r.logprobs.front().top) {
      if (logprob > -9999.0f) {
        const std::string piece = model->tokenizer().decode(std::vector<int32_t>{token}, false);
        INFO("token " << token << " '" << piece << "'");
        CHECK((std::string("yes").rfind(piece, 0) == 0 || std::string("no").rfind(piece, 0) == 0));
        total += std::exp(logprob);
      } else {
        CHECK(logprob == -9999.0f);
      }
    }
    CHECK(total == Approx(1.0).epsilon(1e-3));
    CHECK(r.logprobs.front().logprob > -9999.0f);
  }
}

TEST_CASE("a grammar that does not compile is refused at submit, naming the fault", "[grammar][engine]") {
  auto model = load_stories();
  if (!model) return;
  Request r;
  r.prompt = model->tokenizer().encode("Once", true);
  r.grammar = "root ::= item\n";  // `item` is not defined
  auto stream = std::make_shared<RequestStream>();
  try {
    model->engine().submit(r, stream);
    FAIL("submit accepted an undefined rule");
  } catch (const std::invalid_argument& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("item"));
  }
}
