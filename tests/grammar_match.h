#pragma once
// Test helper: whether a GBNF grammar (grammar.h's Grammar and Matcher) accepts a whole text,
// fed byte by byte as a model's tokens would arrive.
#include <string>
#include <string_view>

#include "grammar/grammar.h"

namespace slab::test {

struct MatchResult {
  bool accepted = false;   // every byte accepted and the text may end there
  size_t rejected_at = 0;  // the first refused byte, or the text's size
};

inline MatchResult full_match(const std::shared_ptr<const grammar::Grammar>& grammar, std::string_view text) {
  grammar::Matcher matcher(grammar);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!matcher.accept(text.substr(i, 1))) return {false, i};
  }
  return {matcher.can_end(), text.size()};
}

}  // namespace slab::test
