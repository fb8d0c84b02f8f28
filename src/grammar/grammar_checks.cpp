// The checks that make a grammar safe to run (every rule defined, every rule able to match
// something, no left recursion, which would make the matcher's eager expansion loop) and the
// flattening into CompiledGrammar's element array.
#include <functional>
#include <string>

#include "grammar/grammar_ir.h"

namespace slab::grammar {
namespace {

std::string where(const RuleSketch& rule) {
  return "rule '" + rule.name + "' (line " + std::to_string(rule.line) + ")";
}

// Least fixpoint of "some alternative has only elements satisfying `ok`".
std::vector<bool> fixpoint(const std::vector<RuleSketch>& rules, bool bytes_ok) {
  std::vector<bool> result(rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (result[r]) continue;
      for (const auto& alt : rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt) {
          if (e.kind == ElementKind::kBytes ? !bytes_ok : !result[e.arg]) {
            all = false;
            break;
          }
        }
        if (all) {
          result[r] = true;
          changed = true;
          break;
        }
      }
    }
  }
  return result;
}

}  // namespace

std::unique_ptr<CompiledGrammar> check_and_flatten(std::vector<RuleSketch> rules, std::vector<ByteSet> byte_sets,
                                                   uint32_t root) {
  for (const RuleSketch& rule : rules) {
    if (!rule.defined) {
      throw GrammarError("grammar: rule '" + rule.name + "' is used (line " + std::to_string(rule.first_use_line) +
                         ") but never defined");
    }
  }
  // Empty languages: report a user-named rule where one is at fault (helpers carry the name of
  // the rule they were written in, so either way the message names the user's rule).
  const std::vector<bool> productive = fixpoint(rules, true);
  bool blamed_own = false;
  // Blame the rule whose emptiness is its own (not inherited from another empty rule).
  size_t blamed = rules.size();
  for (size_t r = 0; r < rules.size(); ++r) {
    if (productive[r]) continue;
    bool own = true;
    for (const auto& alt : rules[r].alternatives) {
      for (const Element& e : alt) {
        own = own && !(e.kind == ElementKind::kRule && !productive[e.arg] && rules[e.arg].name != rules[r].name);
      }
    }
    if (blamed == rules.size() || (own && !blamed_own)) {
      blamed = r;
      blamed_own = own;
    }
  }
  if (blamed != rules.size()) {
    throw GrammarError("grammar: " + where(rules[blamed]) + " can never match (its language is empty)");
  }
  // Left recursion: a rule reachable from itself through leading elements that can all match
  // the empty string (direct, indirect, or hidden behind nullable prefixes).
  const std::vector<bool> nullable = fixpoint(rules, false);
  std::vector<std::vector<uint32_t>> leading(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const auto& alt : rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind == ElementKind::kBytes) break;
        leading[r].push_back(e.arg);
        if (!nullable[e.arg]) break;
      }
    }
  }
  std::vector<uint8_t> color(rules.size(), 0);  // 0 new, 1 on the path, 2 done
  std::vector<uint32_t> path;
  // Iterative DFS (deeply chained helper rules from {0,n} would overflow a recursive one).
  for (uint32_t start = 0; start < rules.size(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> todo{{start, 0}};
    color[start] = 1;
    while (!todo.empty()) {
      auto& [r, next] = todo.back();
      if (next == leading[r].size()) {
        color[r] = 2;
        todo.pop_back();
        continue;
      }
      const uint32_t s = leading[r][next++];
      if (color[s] == 1) {
        std::string cycle;
        bool on = false;
        std::string last;
        for (const auto& [q, unused] : todo) {
          on = on || q == s;
          if (on && rules[q].name != last) {
            cycle += "'" + rules[q].name + "' -> ";
            last = rules[q].name;
          }
        }
        cycle += "'" + rules[s].name + "'";
        throw GrammarError("grammar: " + where(rules[s]) + " is left-recursive (" + cycle +
                           " without consuming input); rewrite it with repetition");
      }
      if (color[s] == 0) {
        color[s] = 1;
        todo.push_back({s, 0});
      }
    }
  }
  auto compiled = std::make_unique<CompiledGrammar>();
  compiled->byte_sets = std::move(byte_sets);
  compiled->root = root;
  compiled->rules.resize(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    compiled->rules[r].name = rules[r].name;
    for (const auto& alt : rules[r].alternatives) {
      compiled->rules[r].alternatives.push_back(static_cast<uint32_t>(compiled->elements.size()));
      compiled->elements.insert(compiled->elements.end(), alt.begin(), alt.end());
      compiled->elements.push_back({ElementKind::kEnd, static_cast<uint32_t>(r)});
    }
  }
  return compiled;
}

}  // namespace slab::grammar
