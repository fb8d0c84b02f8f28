#pragma once
// The compiled form of a grammar (what Grammar::parse produces and Matcher / TokenMasker walk):
// rules of alternatives laid out in one flat element array, each alternative a run of elements
// closed by an End element. Every terminal is one byte drawn from a 256-bit set, so a matcher
// advances over UTF-8 bytes without decoding.
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "grammar/grammar.h"

namespace slab::grammar {

struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi) {
    for (unsigned b = lo; b <= hi; ++b) set(static_cast<uint8_t>(b));
  }
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

enum class ElementKind : uint8_t { kBytes, kRule, kEnd };

struct Element {
  ElementKind kind;
  uint32_t arg;  // kBytes: index into byte_sets; kRule: rule index; kEnd: the rule it closes
};

struct CompiledRule {
  std::string name;  // the user's rule this one was written in (helpers: repetitions, groups, classes)
  std::vector<uint32_t> alternatives;  // start positions in CompiledGrammar::elements
};

struct CompiledGrammar {
  std::vector<Element> elements;
  std::vector<ByteSet> byte_sets;
  std::vector<CompiledRule> rules;
  uint32_t root = 0;

  const ByteSet& bytes_at(uint32_t pos) const { return byte_sets[elements[pos].arg]; }
};

// The parser's output before checks: rule -> alternatives -> elements (no End markers).
struct RuleSketch {
  std::string name;
  int line = 0;
  bool defined = false;
  int first_use_line = 0;  // for "not defined" errors
  std::vector<std::vector<Element>> alternatives;
};

// Checks (undefined rules, empty languages, left recursion) and flattens. Throws GrammarError.
std::unique_ptr<CompiledGrammar> check_and_flatten(std::vector<RuleSketch> rules, std::vector<ByteSet> byte_sets,
                                                   uint32_t root);

}  // namespace slab::grammar
