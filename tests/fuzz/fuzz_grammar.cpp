// libFuzzer: what a request can hand the grammar engine. The first byte picks the input kind
// (GBNF text, a JSON Schema, a regex); the rest up to the first NUL is the constraint, what
// follows is text fed to a Matcher byte by byte, and every step's token mask over a small
// vocabulary is checked against accepting each token. A GrammarError (or a JSON parse error for
// the schema) is a fine answer; a crash, a hang, a compiler output the parser refuses, or a mask
// that disagrees with the matcher is a bug.
#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace {

using slab::grammar::Grammar;
using slab::grammar::GrammarError;

// Single bytes (all 256), some JSON-ish multi-byte tokens, a UTF-8 character and its halves.
std::shared_ptr<const std::vector<std::string>> vocabulary() {
  static const auto vocab = [] {
    auto v = std::make_shared<std::vector<std::string>>();
    for (int b = 0; b < 256; ++b) v->push_back(std::string(1, static_cast<char>(b)));
    for (const char* t : {"{\"", "\":", "\",\"", "\"}", "true", "false", "null", "  ", "\n ", "12", "-0", "e+",
                          "\xC3\xA9", "\xE6\x97\xA5", "\xE6\x97", "\x97\xA5", "abc", "[]", "{}", ""}) {
      v->push_back(t);
    }
    return std::shared_ptr<const std::vector<std::string>>(std::move(v));
  }();
  return vocab;
}

void walk(const std::shared_ptr<const Grammar>& grammar, std::string_view text) {
  slab::grammar::Matcher matcher(grammar);
  const auto vocab = vocabulary();
  slab::grammar::TokenMasker masker(grammar, vocab);
  std::vector<uint64_t> mask((vocab->size() + 63) / 64);
  for (size_t i = 0; i <= text.size() && i < 64; ++i) {
    masker.fill_mask(matcher, mask);
    for (size_t t = 0; t < vocab->size(); ++t) {
      const bool allowed = (mask[t / 64] >> (t % 64)) & 1;
      const bool accepted = !(*vocab)[t].empty() && matcher.can_accept((*vocab)[t]);
      if (allowed != accepted) std::abort();  // the mask must be exactly what the matcher takes
    }
    (void)matcher.can_end();
    if (i == text.size() || !matcher.accept(text.substr(i, 1))) break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t nul = all.find('\0');
  const std::string_view constraint = all.substr(0, nul);
  const std::string_view text = nul == std::string_view::npos ? std::string_view() : all.substr(nul + 1);
  std::string gbnf;
  try {
    switch (data[0] % 3) {
      case 0: gbnf = std::string(constraint); break;
      case 1: {
        const auto schema = nlohmann::ordered_json::parse(constraint, nullptr, /*allow_exceptions=*/false);
        if (schema.is_discarded()) return 0;
        gbnf = slab::grammar::json_schema_to_gbnf(schema);
        break;
      }
      default: gbnf = slab::grammar::regex_to_gbnf(constraint); break;
    }
  } catch (const GrammarError&) {
    return 0;
  }
  std::shared_ptr<const Grammar> grammar;
  try {
    grammar = Grammar::parse(gbnf);
  } catch (const GrammarError&) {
    if (data[0] % 3 != 0) std::abort();  // the compilers must emit grammars the parser takes
    return 0;
  }
  try {
    walk(grammar, text);
  } catch (const GrammarError&) {  // the ambiguity limit
  }
  return 0;
}
