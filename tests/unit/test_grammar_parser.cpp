// GBNF parsing: each syntax feature, escapes, refusals (the message names the rule), and
// recursive grammars (nested brackets, JSON) against independent checkers.
#include <catch2/catch.hpp>

#include <random>
#include <string>

#include "grammar/grammar.h"
#include "grammar_vocab.h"

using slab::grammar::Grammar;
using slab::grammar::GrammarError;
using slab::grammar::Matcher;

namespace {

bool full_match(const std::shared_ptr<const Grammar>& g, std::string_view text) {
  Matcher m(g);
  return m.accept(text) && m.can_end();
}

bool full_match(std::string_view gbnf, std::string_view text) { return full_match(Grammar::parse(gbnf), text); }

// The GrammarError message of parsing `gbnf` ("" if it parses).
std::string refusal(std::string_view gbnf) {
  try {
    Grammar::parse(gbnf);
  } catch (const GrammarError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("GBNF literals and escapes", "[grammar]") {
  CHECK(full_match(R"(root ::= "abc")", "abc"));
  CHECK_FALSE(full_match(R"(root ::= "abc")", "ab"));
  CHECK_FALSE(full_match(R"(root ::= "abc")", "abcd"));
  CHECK(full_match(R"(root ::= "a\n\r\t\\\"b")", "a\n\r\t\\\"b"));
  // \xHH names the code point U+00HH (UTF-8 encoded), as in llama.cpp.
  CHECK(full_match(R"(root ::= "\x41\xe9")", "A\xC3\xA9"));
  CHECK(full_match(R"(root ::= "\u00e9\u20AC")", "\xC3\xA9\xE2\x82\xAC"));
  CHECK(full_match(R"(root ::= "\U0001F600")", "\xF0\x9F\x98\x80"));
  CHECK(full_match("root ::= \"h\xC3\xA9\"", "h\xC3\xA9"));  // raw UTF-8 in a literal
  CHECK(full_match(R"(root ::= "")", ""));
  CHECK_FALSE(full_match(R"(root ::= "")", "a"));
}

TEST_CASE("GBNF character classes", "[grammar]") {
  const auto digits = Grammar::parse("root ::= [0-9a-fA-F_]");
  for (const char* ok : {"0", "9", "a", "f", "A", "F", "_"}) CHECK(full_match(digits, ok));
  for (const char* bad : {"g", "G", "-", " ", "", "00"}) CHECK_FALSE(full_match(digits, bad));
  const auto negated = Grammar::parse(R"(root ::= [^"\\a-c])");
  CHECK(full_match(negated, "d"));
  CHECK(full_match(negated, "\xC3\xA9"));          // é: any code point outside the class
  CHECK(full_match(negated, "\xF0\x9F\x98\x80"));  // four bytes
  CHECK_FALSE(full_match(negated, "\""));
  CHECK_FALSE(full_match(negated, "\\"));
  CHECK_FALSE(full_match(negated, "b"));
  CHECK_FALSE(full_match(negated, "\xC3"));  // truncated
  CHECK_FALSE(full_match(negated, "\xFF"));  // never in UTF-8
  const auto escaped = Grammar::parse(R"(root ::= [\]\-\x41\u00e9\n])");
  for (const char* ok : {"]", "-", "A", "\xC3\xA9", "\n"}) CHECK(full_match(escaped, ok));
  CHECK_FALSE(full_match(escaped, "\\"));
  const auto unicode = Grammar::parse("root ::= [α-ω]+");
  CHECK(full_match(unicode, "αβγω"));
  CHECK_FALSE(full_match(unicode, "αβA"));
  CHECK(full_match("root ::= [a-]", "-"));  // a trailing '-' is literal
}

TEST_CASE("GBNF any character, groups, alternation and repetition", "[grammar]") {
  const auto any = Grammar::parse("root ::= . .");
  CHECK(full_match(any, "ab"));
  CHECK(full_match(any, "\n\xE2\x82\xAC"));
  CHECK_FALSE(full_match(any, "a"));
  CHECK_FALSE(full_match(any, "a\xED\xA0\x80"));  // a surrogate is no character
  const auto alt = Grammar::parse(R"(root ::= "a" ("b" | "cd")* "e" | "x")");
  for (const char* ok : {"ae", "abe", "acde", "abcdbe", "x"}) CHECK(full_match(alt, ok));
  for (const char* bad : {"a", "ace", "xe", "abx"}) CHECK_FALSE(full_match(alt, bad));
  CHECK(full_match(R"(root ::= "a"+)", "aaa"));
  CHECK_FALSE(full_match(R"(root ::= "a"+)", ""));
  CHECK(full_match(R"(root ::= "a"? "b")", "b"));
  CHECK(full_match(R"(root ::= "a"? "b")", "ab"));
  const auto bounded = Grammar::parse(R"(root ::= "a"{2,4})");
  CHECK_FALSE(full_match(bounded, "a"));
  CHECK(full_match(bounded, "aa"));
  CHECK(full_match(bounded, "aaaa"));
  CHECK_FALSE(full_match(bounded, "aaaaa"));
  CHECK(full_match(R"(root ::= "ab"{3})", "ababab"));
  CHECK_FALSE(full_match(R"(root ::= "ab"{3})", "abab"));
  CHECK(full_match(R"(root ::= "a"{ 2 , })", "aaaaaaa"));
  CHECK_FALSE(full_match(R"(root ::= "a"{2,})", "a"));
  CHECK(full_match(R"(root ::= ("a" | "b"){0,3} "c")", "bac"));
  CHECK(full_match(R"(root ::= [0-9]{0,1000})", std::string(1000, '7')));
  CHECK_FALSE(full_match(R"(root ::= [0-9]{0,1000})", std::string(1001, '7')));
}

TEST_CASE("GBNF rules, comments, layout and start rule", "[grammar]") {
  const char* gbnf = R"(
# a comment line
root ::= greeting-2 " " name   # trailing comment
name ::= "world"
       | "you"
greeting-2 ::= ("hello" |
                "hi")  # alternatives across lines inside a group
)";
  const auto g = Grammar::parse(gbnf);
  CHECK(full_match(g, "hello world"));
  CHECK(full_match(g, "hi you"));
  CHECK_FALSE(full_match(g, "hello"));
  const auto named = Grammar::parse(gbnf, "name");
  CHECK(full_match(named, "you"));
  Matcher m(Grammar::parse(R"(root ::= "ab" "c"?)"));
  CHECK_FALSE(m.can_end());
  CHECK(m.accept("ab"));
  CHECK(m.can_end());
  CHECK_FALSE(m.must_end());
  CHECK_FALSE(m.accept("x"));  // refused: state unchanged
  CHECK(m.accept("c"));
  CHECK(m.must_end());
  Matcher copy = m;
  CHECK(copy.must_end());
}

TEST_CASE("GBNF refusals name the rule", "[grammar]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(refusal(R"(root ::= "abc)"), Contains("rule 'root'") && Contains("unterminated"));
  CHECK_THAT(refusal("root = \"a\""), Contains("'::='"));
  CHECK_THAT(refusal("root ::= (\"a\" | \"b\""), Contains("rule 'root'"));
  CHECK_THAT(refusal(R"(root ::= "\q")"), Contains("escape"));
  CHECK_THAT(refusal(R"(root ::= "a"{3,1})"), Contains("n < m"));
  CHECK_THAT(refusal("root ::= [z-a]"), Contains("out of order"));
  CHECK_THAT(refusal("root ::= []"), Contains("empty character class"));
  CHECK_THAT(refusal("root ::= * \"a\""), Contains("nothing to repeat"));
  CHECK_THAT(refusal(R"(root ::= "\uD800")"), Contains("Unicode"));
  CHECK_THAT(refusal("root ::= item\nitem ::= \"a\"\nitem ::= \"b\""), Contains("'item'") && Contains("twice"));
  CHECK_THAT(refusal(R"(root ::= "a" missing-rule)"), Contains("'missing-rule'") && Contains("never defined"));
  CHECK_THAT(refusal(R"(start ::= "a")"), Contains("'root'"));
  CHECK_THAT(refusal("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\""),
             Contains("'expr'") && Contains("left-recursive"));
  CHECK_THAT(refusal("root ::= a\na ::= b \"x\" | \"y\"\nb ::= a \"z\""), Contains("left-recursive"));
  CHECK_THAT(refusal("root ::= a\na ::= opt a \"x\" | \"y\"\nopt ::= \"z\"?"),
             Contains("'a'") && Contains("left-recursive"));
  CHECK_THAT(refusal("root ::= \"a\" loop\nloop ::= \"x\" loop"), Contains("'loop'") && Contains("never match"));
  CHECK(refusal("root ::= \"(\" root \")\" | \"\"") == "");  // right/inner recursion is fine
}

TEST_CASE("recursive grammar: nested brackets against a stack checker", "[grammar]") {
  const auto g = Grammar::parse(R"gbnf(
root ::= item*
item ::= "(" root ")" | "[" root "]" | "x"
)gbnf");
  auto balanced = [](const std::string& s) {
    std::string open;
    for (const char c : s) {
      if (c == '(' || c == '[') {
        open += c;
      } else if (c == ')' || c == ']') {
        if (open.empty() || open.back() != (c == ')' ? '(' : '[')) return false;
        open.pop_back();
      }
    }
    return open.empty();
  };
  std::mt19937 rng(7);
  int matched = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s;
    const int len = static_cast<int>(rng() % 14);
    for (int k = 0; k < len; ++k) s += "()[]x"[rng() % 5];
    const bool expected = balanced(s);
    INFO(s);
    CHECK(full_match(g, s) == expected);
    matched += expected;
  }
  CHECK(matched > 50);
  CHECK(full_match(g, std::string(300, '(') + std::string(300, ')')));  // deep nesting
}

TEST_CASE("recursive grammar: JSON", "[grammar]") {
  const auto g = Grammar::parse(slab::test::kJsonGbnf);
  for (const char* ok : {R"({})", R"({"a": 1})", R"({"a":[1, -2.5e3, true, null, "x\n\u00e9"], "b": {"c": {}}})",
                         "{\n  \"k\": \"v\\\"q\"}", R"({"é": "😀"})"}) {
    INFO(ok);
    CHECK(full_match(g, ok));
  }
  for (const char* bad : {R"([])", R"({"a" 1})", R"({"a": 01})", R"({"a": [1,]})", R"({"a": "x)", R"({a: 1})",
                          R"({"a": tru})", "{\"a\": \"\x01\"}", R"({"a": "\q"})", R"({"a": 1}})"}) {
    INFO(bad);
    CHECK_FALSE(full_match(g, bad));
  }
  Matcher m(g);
  CHECK(m.accept(R"({"a": [1, {"b": )"));
  CHECK_FALSE(m.can_end());
  CHECK_FALSE(m.can_accept("]"));
  CHECK(m.can_accept("\"x\"}]}"));
}

TEST_CASE("an exploding ambiguous grammar is refused, not slow", "[grammar]") {
  // After n x's, every sequence of n pending y/z closers is a distinct stack: 2^n of them.
  const auto g = Grammar::parse(R"(root ::= "x" root "y" | "x" root "z" | "")");
  Matcher m(g);
  CHECK(m.accept("xxxxx"));  // 32 stacks: fine
  Matcher copy = m;
  CHECK(copy.accept("zyzzy"));
  CHECK(copy.can_end());
  CHECK_THROWS_AS(m.accept(std::string(20, 'x')), GrammarError);
}
