// Constrained-decoding cost per step: TokenMasker::fill_mask over Qwen3's vocabulary (151,669
// tokens) for llama.cpp's JSON grammar at a few states, the first (cold) call that computes the
// state's context tables and the warm median after, plus the grammar's compile time and the
// masker's construction (sorting the vocabulary). For scale: a decode step of a 0.5B model at
// batch 16 is ~80 ms here, so 16 masks should cost a few percent of that at most.
// Then a 50-property JSON Schema (strings, bounded integers, enums, booleans, arrays): its
// compile time (schema to GBNF to Grammar), and the mask cost per token over a whole document
// for the first request (cold tables) and a repeat one (warm), with targets.
//
// Usage: bench_grammar [tokenizer.json[.xz]] [--reps N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_vocab.h"
#include "machine_limits.h"
#include "runtime/cpu_features.h"

using namespace slab;

namespace {

double micros_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

struct Case {
  const char* name;
  const char* prefix;
};

const Case kCases[] = {
    {"after '{'", "{"},
    {"in a string", "{\"name\": \"hello wor"},
    {"between members", "{\"a\": 1, "},
    {"in a number", "{\"a\": 12"},
    {"after a value", "{\"a\": true"},
    {"nested string (depth 5)", "{\"a\": [{\"b\": [{\"c\": \"x"},
};

// 50 properties of the kinds tool schemas have; required every other one.
nlohmann::ordered_json fifty_property_schema() {
  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  nlohmann::ordered_json required = nlohmann::ordered_json::array();
  for (int i = 0; i < 50; ++i) {
    const std::string name = "field_" + std::to_string(i);
    switch (i % 5) {
      case 0: properties[name] = {{"type", "string"}, {"maxLength", 40}}; break;
      case 1: properties[name] = {{"type", "integer"}, {"minimum", -100}, {"maximum", 5000}}; break;
      case 2: properties[name] = {{"enum", {"low", "medium", "high", "critical"}}}; break;
      case 3: properties[name] = {{"type", "boolean"}}; break;
      default: properties[name] = {{"type", "array"}, {"items", {{"type", "number"}}}, {"maxItems", 4}}; break;
    }
    if (i % 2 == 0) required.push_back(name);
  }
  return {{"type", "object"}, {"properties", properties}, {"required", required}, {"additionalProperties", false}};
}

// A valid compact document for the schema above (every property present).
std::string fifty_property_document() {
  std::string doc = "{";
  for (int i = 0; i < 50; ++i) {
    if (i > 0) doc += ",";
    doc += "\"field_" + std::to_string(i) + "\":";
    switch (i % 5) {
      case 0: doc += "\"value number " + std::to_string(i) + "\""; break;
      case 1: doc += std::to_string(i * 37 - 90); break;
      case 2: doc += "\"medium\""; break;
      case 3: doc += i % 2 ? "true" : "false"; break;
      default: doc += "[1.5,-2,30e2]"; break;
    }
  }
  return doc + "}";
}

// Walks `text` through the masker as a model would: at each step the mask, then the longest
// allowed vocabulary token that continues the text. Returns the mask times (us), one per token.
std::vector<double> masks_over_document(const std::shared_ptr<const grammar::Grammar>& g,
                                        const grammar::TokenMasker& masker, const std::vector<std::string>& vocab,
                                        const std::unordered_map<std::string, int32_t>& ids, const std::string& text) {
  grammar::Matcher m(g);
  std::vector<uint64_t> mask((vocab.size() + 63) / 64);
  std::vector<double> times;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto start = std::chrono::steady_clock::now();
    masker.fill_mask(m, mask);
    times.push_back(micros_since(start));
    int32_t chosen = -1;
    for (size_t len = std::min<size_t>(24, text.size() - pos); len > 0 && chosen < 0; --len) {
      const auto it = ids.find(text.substr(pos, len));
      if (it != ids.end() && ((mask[static_cast<size_t>(it->second) / 64] >> (it->second % 64)) & 1))
        chosen = it->second;
    }
    if (chosen < 0 || !m.accept(vocab[static_cast<size_t>(chosen)])) {
      std::fprintf(stderr, "document refused at byte %zu\n", pos);
      std::exit(1);
    }
    pos += vocab[static_cast<size_t>(chosen)].size();
  }
  return times;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(SLAB_TESTDATA_DIR) + "/tokenizers/qwen3/tokenizer.json.xz";
  int reps = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      path = argv[i];
    }
  }
  std::printf("cpu: %s\n", cpu_features().summary().c_str());
  const auto vocab = std::make_shared<const std::vector<std::string>>(test::load_byte_level_vocab(path));
  std::printf("vocabulary: %s, %zu tokens\n\n", path.c_str(), vocab->size());

  std::vector<double> compile;
  std::shared_ptr<const grammar::Grammar> g;
  for (int i = 0; i < 50; ++i) {
    const auto start = std::chrono::steady_clock::now();
    g = grammar::Grammar::parse(test::kJsonGbnf);
    compile.push_back(micros_since(start));
  }
  std::printf("JSON grammar compile: %.1f us (median of 50)\n", bench::summarize(compile).median);
  const auto build_start = std::chrono::steady_clock::now();
  grammar::TokenMasker shared_masker(g, vocab);
  std::printf("TokenMasker construction (sort the vocabulary): %.1f ms\n\n", micros_since(build_start) / 1000);

  std::vector<uint64_t> mask((vocab->size() + 63) / 64);
  std::printf("%-26s %12s %12s %10s %10s %9s\n", "state", "cold (ms)", "warm (us)", "min (us)", "max (us)", "allowed");
  double warm_total = 0;
  for (const Case& c : kCases) {
    grammar::Matcher m(g);
    if (!m.accept(c.prefix)) {
      std::fprintf(stderr, "prefix refused: %s\n", c.prefix);
      return 1;
    }
    grammar::TokenMasker masker(g, vocab);  // fresh: the first call computes this state's tables
    auto start = std::chrono::steady_clock::now();
    masker.fill_mask(m, mask);
    const double cold = micros_since(start);
    std::vector<double> warm;
    for (int r = 0; r < reps; ++r) {
      start = std::chrono::steady_clock::now();
      masker.fill_mask(m, mask);
      warm.push_back(micros_since(start));
    }
    size_t allowed = 0;
    for (const uint64_t w : mask) allowed += static_cast<size_t>(__builtin_popcountll(w));
    const bench::Stat s = bench::summarize(warm);
    warm_total += s.median;
    std::printf("%-26s %12.2f %12.1f %10.1f %10.1f %9zu\n", c.name, cold / 1000, s.median, s.min, s.max, allowed);
  }
  const double per_step = warm_total / static_cast<double>(std::size(kCases));
  std::printf("\nmean warm fill_mask: %.1f us; 16 sequences: %.2f ms per step (%.2f%% of an 80 ms decode step)\n",
              per_step, 16 * per_step / 1000, 16 * per_step / 1000 / 80 * 100);

  // A 50-property schema, as an agent's tool would send it with every request.
  const nlohmann::ordered_json schema = fifty_property_schema();
  std::vector<double> schema_compile;
  std::shared_ptr<const grammar::Grammar> schema_grammar;
  for (int i = 0; i < 20; ++i) {
    const auto start = std::chrono::steady_clock::now();
    schema_grammar = grammar::Grammar::parse(grammar::json_schema_to_gbnf(schema));
    schema_compile.push_back(micros_since(start));
  }
  const double compile_ms = bench::summarize(schema_compile).median / 1000;
  std::unordered_map<std::string, int32_t> ids;
  for (size_t t = 0; t < vocab->size(); ++t) {
    if (!(*vocab)[t].empty()) ids.emplace((*vocab)[t], static_cast<int32_t>(t));
  }
  const std::string doc = fifty_property_document();
  grammar::TokenMasker schema_masker(schema_grammar, vocab);
  const auto cold_start = std::chrono::steady_clock::now();
  const std::vector<double> first = masks_over_document(schema_grammar, schema_masker, *vocab, ids, doc);
  const double first_total_ms = micros_since(cold_start) / 1000;
  const std::vector<double> repeat = masks_over_document(schema_grammar, schema_masker, *vocab, ids, doc);
  const bench::Stat warm = bench::summarize(repeat);
  const bench::Stat cold = bench::summarize(first);
  // Targets: compile under 10 ms; a repeat request's mask under 50 us per token, so 16
  // constrained sequences add under 1 % to an 80 ms step.
  std::printf("\n50-property schema: compile (schema -> GBNF -> Grammar) %.2f ms [target < 10 ms]\n", compile_ms);
  std::printf(
      "  document of %zu bytes in %zu tokens: first request %.1f ms of masks (cold tables), "
      "repeat request median %.1f us per token, max %.1f us [target < 50 us]\n",
      doc.size(), first.size(), first_total_ms, warm.median, warm.max);
  // The first request's worst step: how long one step of the engine waits for a new position's
  // tables (the engine fills the masks of a step's sequences in parallel on its pool).
  std::printf("  first request: median %.1f us per token, worst token %.2f ms (%.1f%% of an 80 ms step)\n", cold.median,
              cold.max / 1000, cold.max / 1000 / 80 * 100);
  std::printf("  batch 1: %.3f%% of an 80 ms step; batch 16: %.2f%%\n", warm.median / 1000 / 80 * 100,
              16 * warm.median / 1000 / 80 * 100);
  return 0;
}
