#pragma once
// Building blocks shared by the constraint compilers (json_schema.cpp, regex_to_gbnf.cpp): GBNF
// literals and character classes from code points, JSON-string encodings of text, and the regex
// compiler in the two forms the compilers need (the raw text, or the content of a JSON string).
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/utf8_ranges.h"

namespace slab::grammar::detail {

inline constexpr uint32_t kMaxCodePoint = 0x10FFFF;

// A set of Unicode code points as sorted, disjoint, non-adjacent inclusive ranges.
class CodePointSet {
 public:
  CodePointSet() = default;
  static CodePointSet single(uint32_t cp) { return range(cp, cp); }
  static CodePointSet range(uint32_t lo, uint32_t hi);
  void add(uint32_t lo, uint32_t hi);
  void add(const CodePointSet& other);
  // Every code point not in the set; surrogates (U+D800..U+DFFF, never in UTF-8 text) are left
  // out of the complement.
  CodePointSet complement() const;
  CodePointSet minus(const CodePointSet& other) const;
  bool contains(uint32_t cp) const;
  bool contains_all(uint32_t lo, uint32_t hi) const;
  bool empty() const { return ranges_.empty(); }
  const std::vector<std::pair<uint32_t, uint32_t>>& ranges() const { return ranges_; }

 private:
  std::vector<std::pair<uint32_t, uint32_t>> ranges_;
};

using grammar::append_utf8;  // utf8_ranges.h
// Decodes one code point at text[pos] and advances pos; invalid UTF-8 yields the byte's value
// (callers validate beforehand where it matters).
uint32_t next_code_point(std::string_view text, size_t& pos);
bool is_valid_utf8(std::string_view text);

// A GBNF "literal" matching exactly these bytes (UTF-8 passes through).
std::string gbnf_literal(std::string_view bytes);
// A GBNF [class] matching exactly the code points of the set (negated form where shorter).
// The set must not be empty.
std::string gbnf_class(const CodePointSet& set);

// GBNF matching the ways JSON writers encode this text inside a string (without the quotes):
// printable characters raw, " and \ escaped, control characters by their short escape or
// \u00XX, / raw or \/, non-ASCII raw UTF-8 or \uXXXX (a surrogate pair above U+FFFF), hex in
// either case. Python's json.dumps (ensure_ascii true or false) and nlohmann::json both fit.
// quoted: the whole JSON string, quotes included.
std::string json_string_content_gbnf(std::string_view text, bool quoted = false);
// One code point of a JSON string drawn from the set, in the encodings above (\u escapes of
// exactly the set's non-ASCII code points); "" for an empty set. nonascii_escape_rule: a rule
// matching the \u escapes of every non-ASCII code point, used where the set holds all of them.
std::string json_string_char_gbnf(const CodePointSet& set, const std::string& nonascii_escape_rule);
// The body of that rule: \uXXXX of U+0080..U+FFFF (no lone surrogate) or a surrogate pair.
std::string json_nonascii_escape_body();

// How a GBNF expression binds: an alternation needs parentheses inside a sequence, anything but
// a single element (a literal, a class, a rule name, a parenthesised group) needs them under a
// quantifier.
enum class Binding { kAlternation, kSequence, kElement };
Binding binding_of(const std::string& expression);
// The expression as one element (wrapped in parentheses unless it is one already).
std::string as_element(const std::string& expression);
// The expression as one element that a quantifier may follow (not itself quantified).
std::string as_quantifiable(const std::string& expression);
// `*`, `?`, `{m,n}` ... for a repetition count (max -1: unbounded); "" for exactly once.
std::string quantifier_suffix(int min, int max);

// The decimal integers lo..hi (either bound may be absent), no leading zeros, "-" before
// negatives: exact digit-range alternatives.
std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi);

enum class RegexTarget {
  kRawText,            // the pattern over the text itself (guided_regex)
  kJsonStringContent,  // the pattern over a JSON string's value, matched in its encoded form
};
// Compiles an ECMAScript-style pattern (full match) to one GBNF expression. Throws GrammarError
// naming the position of unsupported or invalid syntax. nonascii_escape_rule as above (kJsonStringContent only).
std::string regex_to_gbnf_expression(std::string_view pattern, RegexTarget target,
                                     const std::string& nonascii_escape_rule = {});

}  // namespace slab::grammar::detail
