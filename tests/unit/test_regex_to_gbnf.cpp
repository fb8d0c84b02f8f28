// Regular expressions and fixed choices to GBNF (src/grammar/regex_to_gbnf.cpp, gbnf_emit.cpp):
// full matches against Python's re.fullmatch (tests/fixtures/grammar/regex.json), refusals with
// their position, and choice lists with characters that need escaping.
#include <catch2/catch.hpp>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar_match.h"
#include "test_paths.h"

using slab::grammar::choice_to_gbnf;
using slab::grammar::Grammar;
using slab::grammar::GrammarError;
using slab::grammar::regex_to_gbnf;
using slab::test::full_match;

namespace {

bool regex_accepts(const std::string& pattern, const std::string& text) {
  return full_match(Grammar::parse(regex_to_gbnf(pattern)), text).accepted;
}

}  // namespace

TEST_CASE("regex_to_gbnf: full matches agree with Python's re.fullmatch", "[grammar]") {
  std::ifstream in(slab::test::fixtures_dir() / "grammar" / "regex.json");
  REQUIRE(in);
  const auto fixture = nlohmann::json::parse(in);
  size_t matches = 0;
  size_t non_matches = 0;
  for (const auto& c : fixture.at("cases")) {
    const std::string pattern = c.at("pattern").get<std::string>();
    const std::string gbnf = regex_to_gbnf(pattern);
    INFO("pattern " << pattern << "\n" << gbnf);
    const auto grammar = Grammar::parse(gbnf);
    for (const auto& s : c.at("strings")) {
      const std::string text = s.at("text").get<std::string>();
      const bool expected = s.at("match").get<bool>();
      INFO("text '" << text << "' expected " << expected);
      CHECK(full_match(grammar, text).accepted == expected);
      ++(expected ? matches : non_matches);
    }
  }
  CHECK(fixture.at("cases").size() >= 40);
  CHECK(matches >= 200);
  CHECK(non_matches >= 200);
}

TEST_CASE("regex_to_gbnf: the GBNF it writes", "[grammar]") {
  CHECK(regex_to_gbnf("abc") == "root ::= \"abc\"\n");
  CHECK(regex_to_gbnf("^a|b$") == "root ::= \"a\" | \"b\"\n");
  CHECK(regex_to_gbnf("[a-z]+\\d{2,3}") == "root ::= [a-z]+ [0-9]{2,3}\n");
  CHECK(regex_to_gbnf("(ab)*?c") == "root ::= \"ab\"* \"c\"\n");  // a literal repeats as a whole
  CHECK(regex_to_gbnf("[^\"\\\\]") == "root ::= [^\\x22\\x5C]\n");
  CHECK(regex_to_gbnf("") == "root ::= \"\"\n");
  // A nullable body under a loop is written non-empty (an empty loop would be left recursion).
  CHECK(regex_to_gbnf("(a*)*") == "root ::= ( \"a\"+ )*\n");
}

TEST_CASE("regex_to_gbnf: ECMAScript escapes and classes", "[grammar]") {
  CHECK(regex_accepts("\\u00e9\\x41\\cJ", "éA\n"));
  CHECK(regex_accepts("\\u{1F600}", "😀"));
  CHECK(regex_accepts("[\\b]", "\b"));
  CHECK(regex_accepts("\\s", "\xE2\x80\xA8"));  // U+2028 is ECMAScript whitespace
  CHECK(regex_accepts("[^]", "\n"));
  CHECK_FALSE(regex_accepts(".", "\n"));
  CHECK(regex_accepts(".", "日"));
  CHECK(regex_accepts("a{", "a{"));
  CHECK(regex_accepts("x{2,}", "xxxxx"));
  CHECK_FALSE(regex_accepts("x{2,}", "x"));
  CHECK_THROWS_WITH(regex_to_gbnf("[]"), Catch::Contains("matches nothing"));
}

TEST_CASE("regex_to_gbnf: unsupported syntax is refused with its offset", "[grammar]") {
  using Catch::Contains;
  CHECK_THROWS_WITH(regex_to_gbnf("(a)\\1"), Contains("backreference at offset 3"));
  CHECK_THROWS_WITH(regex_to_gbnf("(?<n>a)\\k<n>"), Contains("backreference at offset 7"));
  CHECK_THROWS_WITH(regex_to_gbnf("a(?=b)"), Contains("lookahead at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("a(?!b)"), Contains("lookahead at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("(?<=a)b"), Contains("lookbehind at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("(?<!a)b"), Contains("lookbehind at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("\\bword"), Contains("word boundary assertion \\b at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("(?i)abc"), Contains("at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("a**"),
                    Contains("a quantifier after a quantifier (possessive or doubled) at offset 2"));
  CHECK_THROWS_WITH(regex_to_gbnf("a{2}{3}"), Contains("at offset 4"));
  CHECK_THROWS_WITH(regex_to_gbnf("*a"), Contains("nothing to repeat at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("a{2000}"), Contains("repetition count above 1000 at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("(a{1000}){1000}"), Contains("too large"));
  CHECK_THROWS_WITH(regex_to_gbnf("a{3,2}"), Contains("n < m at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("(ab"), Contains("unterminated group at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("ab)"), Contains("unmatched ')' at offset 2"));
  CHECK_THROWS_WITH(regex_to_gbnf("[ab"), Contains("unterminated character class at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("[z-a]"), Contains("out of order at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("a^b"), Contains("anchor '^' other than at the start at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("a$b"), Contains("anchor '$' other than at the end at offset 1"));
  CHECK_THROWS_WITH(regex_to_gbnf("\\p{L}"), Contains("Unicode property escape at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("\\q"), Contains("unknown escape \\q at offset 0"));
  CHECK_THROWS_WITH(regex_to_gbnf("abc\\"), Contains("trailing backslash at offset 3"));
  CHECK_THROWS_WITH(regex_to_gbnf(std::string(200, '(') + std::string(200, ')')), Contains("nested deeper than 100"));
  CHECK_THROWS_WITH(regex_to_gbnf("\xff"), Contains("not valid UTF-8"));
  CHECK_THROWS_AS(regex_to_gbnf("(?=x)"), GrammarError);
}

TEST_CASE("choice_to_gbnf: exactly one of the strings, escaped", "[grammar]") {
  const std::vector<std::string> choices = {"yes",
                                            "no",
                                            "say \"hi\"",
                                            "back\\slash",
                                            "日本語",
                                            "tab\there",
                                            "line\nbreak",
                                            "\x01"
                                            "ctl",
                                            "yes please",
                                            "😀"};
  const auto grammar = Grammar::parse(choice_to_gbnf(choices));
  for (const auto& choice : choices) {
    INFO(choice);
    CHECK(full_match(grammar, choice).accepted);
  }
  for (const char* bad : {"", "ye", "yes!", "No", "say \\\"hi\\\"", "back\\\\slash", "日本", "yesno"}) {
    INFO(bad);
    CHECK_FALSE(full_match(grammar, bad).accepted);
  }
  CHECK(choice_to_gbnf({"a\"b"}) == "root ::= \"a\\\"b\"\n");
  const auto with_empty = Grammar::parse(choice_to_gbnf({"", "x"}));
  CHECK(full_match(with_empty, "").accepted);
  CHECK(full_match(with_empty, "x").accepted);
  CHECK_THROWS_AS(choice_to_gbnf({}), GrammarError);
  CHECK_THROWS_WITH(choice_to_gbnf({}), Catch::Contains("empty"));
}
