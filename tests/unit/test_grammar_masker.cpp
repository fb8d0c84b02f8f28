// TokenMasker against the brute-force mask (token t allowed iff it is non-empty and the
// matcher can accept its bytes) at random reachable states of a JSON grammar: over a synthetic
// vocabulary (no files needed) and over Qwen3's real byte-level vocabulary; and from several
// threads sharing one masker.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_vocab.h"
#include "test_paths.h"

using slab::grammar::Grammar;
using slab::grammar::Matcher;
using slab::grammar::TokenMasker;

namespace {

using Mask = std::vector<uint64_t>;

Mask brute_force_mask(const Matcher& m, const std::vector<std::string>& vocab) {
  Mask mask((vocab.size() + 63) / 64, 0);
  for (size_t t = 0; t < vocab.size(); ++t) {
    if (!vocab[t].empty() && m.can_accept(vocab[t])) mask[t / 64] |= uint64_t{1} << (t % 64);
  }
  return mask;
}

Mask masker_mask(const TokenMasker& masker, const Matcher& m) {
  Mask mask((masker.vocab_size() + 63) / 64, ~uint64_t{0});
  masker.fill_mask(m, mask);
  return mask;
}

// A random JSON object, nested up to `depth`, in the grammar's whitespace conventions. (Built
// by appending: GCC 12 reports a false -Wrestrict on chains of std::string operator+.)
void append_ws(std::mt19937& rng, std::string& s) {
  const unsigned w = rng() % 4;
  s += w == 0 ? " " : w == 1 ? "\n  " : "";
}

void append_json(std::mt19937& rng, int depth, bool object, std::string& s) {
  if (object || (depth > 0 && rng() % 3 == 0)) {
    s += '{';
    append_ws(rng, s);
    for (unsigned k = rng() % 3, i = 0; i < k; ++i) {
      if (i) {
        s += ',';
        append_ws(rng, s);
      }
      const char* pieces[] = {"a", "key", "\\n", "\\\"", "\\u00e9", "\xC3\xA9", "\xF0\x9F\x98\x80", " ", "x1", "}]"};
      s += '"';
      for (unsigned n = rng() % 4; n > 0; --n) s += pieces[rng() % 10];
      s += '"';
      append_ws(rng, s);
      s += ':';
      append_ws(rng, s);
      append_json(rng, depth - 1, false, s);
    }
    s += '}';
    append_ws(rng, s);
    return;
  }
  switch (depth > 0 ? rng() % 4 : 1 + rng() % 3) {
    case 0:
      s += '[';
      append_ws(rng, s);
      for (unsigned k = rng() % 3, i = 0; i < k; ++i) {
        if (i) {
          s += ',';
          append_ws(rng, s);
        }
        append_json(rng, depth - 1, false, s);
      }
      s += ']';
      break;
    case 1: s += rng() % 2 ? "\"x\\\"\xC3\xA9y\"" : "\"\""; break;
    case 2: {
      const char* numbers[] = {"0", "-12", "3.25", "1e5", "-0.5E-3", "42"};
      s += numbers[rng() % 6];
      break;
    }
    default: s += rng() % 2 ? "true" : "null";
  }
  append_ws(rng, s);
}

std::string random_json(std::mt19937& rng, int depth) {
  std::string s;
  append_json(rng, depth, true, s);
  return s;
}

// A deeply nested document (deeper than the masker's context frames).
std::string deep_json(int depth) {
  std::string s;
  for (int i = 0; i < depth; ++i) s += i % 2 ? "[" : "{\"k\":";
  s += "\"v\"";
  for (int i = depth - 1; i >= 0; --i) s += i % 2 ? "]" : "}";
  return "{\"d\":" + s + "}";
}

// Matchers at random prefixes of random documents (cut at UTF-8 continuation bytes too).
std::vector<Matcher> random_states(const std::shared_ptr<const Grammar>& g, int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Matcher> states;
  states.emplace_back(g);
  while (static_cast<int>(states.size()) < count) {
    const std::string doc = states.size() % 5 == 4 ? deep_json(6 + static_cast<int>(rng() % 8)) : random_json(rng, 3);
    Matcher m(g);
    REQUIRE(m.accept(doc));
    Matcher prefix(g);
    REQUIRE(prefix.accept(doc.substr(0, rng() % (doc.size() + 1))));
    states.push_back(prefix);
  }
  return states;
}

// Every byte string of length 1 and 2 over the JSON alphabet, JSON fragments that close several
// levels at once, multi-byte characters split across tokens, and empty (special) tokens.
std::vector<std::string> synthetic_vocab() {
  const std::string alphabet = "{}[]\",:\\ \n0123456789.-+eEtrufalsn abkvxu";
  std::vector<std::string> vocab = {""};
  for (const char a : alphabet) {
    vocab.push_back(std::string(1, a));
    for (const char b : alphabet) vocab.push_back(std::string(1, a) + b);
  }
  for (const char* s : {"\"}]}",
                        "\"}}",
                        "\"}]}]}",
                        "}]}]}]}",
                        "\"v\"}]}]",
                        "true",
                        "false",
                        "null",
                        "\": \"",
                        "\", \"",
                        "\":{\"",
                        "\\u00",
                        "\\u00e9\"",
                        "\xC3",
                        "\xA9",
                        "\xC3\xA9",
                        "\xF0\x9F",
                        "\x98\x80\"",
                        "\xF0\x9F\x98\x80",
                        "\xFF",
                        "1.5e",
                        "e+10",
                        "\"k\":",
                        "\n  ",
                        "",
                        "   \"",
                        "0123456789012345678"}) {
    vocab.push_back(s);
  }
  vocab.push_back("");
  return vocab;
}

}  // namespace

TEST_CASE("token masks equal brute force: synthetic vocabulary", "[grammar]") {
  const auto g = Grammar::parse(slab::test::kJsonGbnf);
  const auto vocab = std::make_shared<const std::vector<std::string>>(synthetic_vocab());
  const TokenMasker masker(g, vocab);
  CHECK(masker.vocab_size() == vocab->size());
  size_t allowed = 0;
  for (const Matcher& m : random_states(g, 300, 11)) {
    const Mask expected = brute_force_mask(m, *vocab);
    REQUIRE(masker_mask(masker, m) == expected);
    REQUIRE(masker_mask(masker, m) == expected);  // warm
    for (const uint64_t w : expected) allowed += static_cast<size_t>(__builtin_popcountll(w));
  }
  CHECK(allowed > 1000);
}

TEST_CASE("token masks equal brute force: Qwen3 vocabulary", "[grammar]") {
  const auto path = slab::test::testdata_or_skip("tokenizers/qwen3/tokenizer.json.xz");
  if (path.empty()) return;
  const auto vocab = std::make_shared<const std::vector<std::string>>(slab::test::load_byte_level_vocab(path));
  REQUIRE(vocab->size() > 150000);
  const auto g = Grammar::parse(slab::test::kJsonGbnf);
  const TokenMasker masker(g, vocab);
  for (const Matcher& m : random_states(g, 12, 5)) {
    REQUIRE(masker_mask(masker, m) == brute_force_mask(m, *vocab));
  }
}

TEST_CASE("token masks from several threads sharing one masker", "[grammar]") {
  const auto g = Grammar::parse(slab::test::kJsonGbnf);
  const auto vocab = std::make_shared<const std::vector<std::string>>(synthetic_vocab());
  const std::vector<Matcher> states = random_states(g, 120, 23);
  std::vector<Mask> expected;
  for (const Matcher& m : states) expected.push_back(brute_force_mask(m, *vocab));
  const TokenMasker masker(g, vocab);  // cold: the threads race to fill its cache
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int pass = 0; pass < 2; ++pass) {
        for (size_t i = 0; i < states.size(); ++i) {
          const size_t k = (i * 7 + static_cast<size_t>(t) * 31) % states.size();
          Matcher copy = states[k];  // a per-thread copy sharing the frames
          mismatches[static_cast<size_t>(t)] += masker_mask(masker, copy) != expected[k];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (const int n : mismatches) CHECK(n == 0);
}

TEST_CASE("token masks never allow empty tokens and follow the grammar's end", "[grammar]") {
  const auto g = Grammar::parse(R"(root ::= "ab" | "abc")");
  const auto vocab = std::make_shared<const std::vector<std::string>>(
      std::vector<std::string>{"", "a", "ab", "abc", "abcd", "b", "c", "bc"});
  const TokenMasker masker(g, vocab);
  Matcher m(g);
  CHECK(masker_mask(masker, m) == Mask{0b00001110});
  REQUIRE(m.accept("ab"));
  CHECK(masker_mask(masker, m) == Mask{0b01000000});
  REQUIRE(m.accept("c"));
  CHECK(m.must_end());
  CHECK(masker_mask(masker, m) == Mask{0});
}

// The layered context tables: one rule (a string of at most 12 characters, whose {0,12} is a
// chain of 12 nested rules) used from many places with different continuations, walked at random
// along the brute-force masks, so every state compared is one a sampler can reach.
TEST_CASE("token masks equal brute force: random walks through a JSON Schema grammar", "[grammar]") {
  nlohmann::ordered_json properties = nlohmann::ordered_json::object();
  for (int i = 0; i < 6; ++i) {
    std::string name = "p";  // appended: GCC 12's false -Wrestrict on operator+
    name += std::to_string(i);
    switch (i % 3) {
      case 0: properties[name] = {{"type", "string"}, {"maxLength", 12}}; break;
      case 1: properties[name] = {{"type", "integer"}, {"minimum", -40}, {"maximum", 300}}; break;
      default: properties[name] = {{"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 3}}}}; break;
    }
  }
  const nlohmann::ordered_json schema = {
      {"type", "object"}, {"properties", properties}, {"required", {"p0", "p1"}}, {"additionalProperties", false}};
  const auto g = Grammar::parse(slab::grammar::json_schema_to_gbnf(schema));
  auto tokens = synthetic_vocab();
  for (const char* s : {"p", "\"p", "p1\":", "\"p0\":\"", "\",\"p1\":", "\",", "\"]", "\"],", "abcdefgh",
                        "abcdefghijklm", "12,", "300}", "\"}", "\",\"", "\xC3\xA9\"", "\xE2\x82\xAC\xE2\x82\xAC"}) {
    tokens.push_back(s);
  }
  const auto vocab = std::make_shared<const std::vector<std::string>>(std::move(tokens));
  const TokenMasker masker(g, vocab);
  std::mt19937 rng(7);
  size_t steps = 0, ended = 0;
  for (int walk = 0; walk < 40; ++walk) {
    Matcher m(g);
    while (true) {
      const Mask expected = brute_force_mask(m, *vocab);
      REQUIRE(masker_mask(masker, m) == expected);
      std::vector<size_t> allowed;
      for (size_t t = 0; t < vocab->size(); ++t) {
        if (expected[t / 64] >> (t % 64) & 1) allowed.push_back(t);
      }
      if (allowed.empty() || (m.can_end() && rng() % 4 == 0)) break;
      REQUIRE(m.accept((*vocab)[allowed[rng() % allowed.size()]]));
      ++steps;
    }
    ended += m.can_end();
  }
  INFO(steps << " steps, " << ended << " walks ended complete");
  CHECK(steps > 400);
  CHECK(ended > 20);
}
