// Regular expressions (JSON Schema "pattern", vLLM guided_regex) to GBNF.
//
// Accepted (ECMAScript syntax, the subset JSON Schema patterns use): literals (non-ASCII as
// UTF-8), escapes \d \D \w \W \s \S (ASCII digits and word characters as in ECMAScript; \s with
// ECMAScript's Unicode spaces), \n \r \t \f \v \0 \xHH \uHHHH \u{H...} \cX and escaped
// punctuation; classes [a-z] [^...] (\b in a class is backspace; [] matches nothing, [^] any
// character); `.` = any character except \n; groups ( ), (?: ), (?<name> ); | ; quantifiers
// * + ? {m} {m,} {m,n} and their lazy forms (same language); ^ at the start and $ at the end.
// The whole text must match (anchors are implied). A `{` that does not open a quantifier is a
// literal, as in ECMAScript's web-compatibility grammar and Python.
// Refused, with the byte offset: backreferences, lookaround, word boundaries, Unicode property
// escapes, inline flags, possessive or doubled quantifiers, anchors elsewhere, counts above
// kMaxRepeat, patterns whose expansion exceeds kMaxExpandedSize, nesting deeper than kMaxDepth.
#include <string>
#include <vector>

#include "grammar/gbnf_emit.h"
#include "grammar/grammar.h"
#include "grammar/json_schema.h"

namespace slab::grammar {
namespace detail {

namespace {

constexpr int kMaxRepeat = 1000;
constexpr int kMaxDepth = 100;
constexpr double kMaxExpandedSize = 200000;
constexpr int kUnbounded = -1;

struct RegexNode {
  enum class Kind { kNothing, kEmpty, kChars, kConcat, kAlt, kRepeat };
  Kind kind = Kind::kEmpty;
  CodePointSet chars;
  std::vector<RegexNode> children;
  int min = 0;
  int max = 0;  // kUnbounded: no upper bound
};

using Kind = RegexNode::Kind;

RegexNode make(Kind kind) {
  RegexNode node;
  node.kind = kind;
  return node;
}

RegexNode chars_node(CodePointSet set) {
  RegexNode node = make(Kind::kChars);
  node.chars = std::move(set);
  return node;
}

CodePointSet digit_set() { return CodePointSet::range('0', '9'); }

CodePointSet word_set() {
  CodePointSet set = CodePointSet::range('0', '9');
  set.add('A', 'Z');
  set.add('a', 'z');
  set.add('_', '_');
  return set;
}

// ECMAScript's WhiteSpace and LineTerminator.
CodePointSet space_set() {
  CodePointSet set = CodePointSet::range('\t', '\r');
  for (uint32_t cp : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu}) set.add(cp, cp);
  set.add(0x2000, 0x200A);
  return set;
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view pattern) : pattern_(pattern) {}

  RegexNode parse() {
    if (!is_valid_utf8(pattern_)) fail("the pattern is not valid UTF-8", 0);
    if (peek() == '^') ++pos_;
    RegexNode node = parse_alternation(0);
    if (pos_ < pattern_.size()) fail(peek() == ')' ? "unmatched ')'" : "unexpected character", pos_);
    return node;
  }

 private:
  [[noreturn]] void fail(const std::string& what, size_t offset) const {
    throw GrammarError(std::string("regex: ") + what + " at offset " + std::to_string(offset) + " of pattern '" +
                       std::string(pattern_) + "'");
  }

  bool at_end() const { return pos_ >= pattern_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < pattern_.size() ? pattern_[pos_ + ahead] : '\0'; }
  uint32_t next_cp() { return next_code_point(pattern_, pos_); }

  RegexNode parse_alternation(int depth) {
    if (depth > kMaxDepth) fail(std::string("groups nested deeper than ") + std::to_string(kMaxDepth), pos_);
    RegexNode alt = make(Kind::kAlt);
    alt.children.push_back(parse_sequence(depth));
    while (peek() == '|') {
      ++pos_;
      alt.children.push_back(parse_sequence(depth));
    }
    if (alt.children.size() == 1) return std::move(alt.children[0]);
    return alt;
  }

  RegexNode parse_sequence(int depth) {
    RegexNode seq = make(Kind::kConcat);
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        if (pos_ + 1 == pattern_.size()) {
          ++pos_;
          break;
        }
        fail("anchor '$' other than at the end", pos_);
      }
      if (peek() == '^') fail("anchor '^' other than at the start", pos_);
      RegexNode atom = parse_atom(depth);
      size_t quantifier_at = pos_;
      if (parse_quantifier(atom)) {
        if (peek() == '?') ++pos_;  // lazy: the same language
        RegexNode ignored;
        size_t second_at = pos_;
        if (peek() == '*' || peek() == '+' || peek() == '?' || parse_quantifier(ignored)) {
          fail("a quantifier after a quantifier (possessive or doubled)", second_at);
        }
      } else if (quantifier_at != pos_) {
        fail("internal quantifier state", quantifier_at);
      }
      seq.children.push_back(std::move(atom));
    }
    if (seq.children.size() == 1) return std::move(seq.children[0]);
    return seq;
  }

  // {m}, {m,}, {m,n} at pos_: the bounds, advancing past it; false (pos_ unchanged) otherwise.
  bool brace_quantifier(int& min, int& max) {
    size_t p = pos_;
    if (p >= pattern_.size() || pattern_[p] != '{') return false;
    ++p;
    auto number = [&](int& value) {
      size_t start = p;
      long long v = 0;
      while (p < pattern_.size() && pattern_[p] >= '0' && pattern_[p] <= '9') {
        v = std::min<long long>(v * 10 + (pattern_[p] - '0'), 1LL << 40);
        ++p;
      }
      value = static_cast<int>(std::min<long long>(v, 1LL << 30));
      return p > start;
    };
    if (!number(min)) return false;
    max = min;
    if (p < pattern_.size() && pattern_[p] == ',') {
      ++p;
      if (!number(max)) max = kUnbounded;
    }
    if (p >= pattern_.size() || pattern_[p] != '}') return false;
    if (max != kUnbounded && max < min) fail("quantifier {m,n} with n < m", pos_);
    if (min > kMaxRepeat || max > kMaxRepeat)
      fail(std::string("repetition count above ") + std::to_string(kMaxRepeat), pos_);
    pos_ = p + 1;
    return true;
  }

  bool parse_quantifier(RegexNode& atom) {
    int min = 0;
    int max = 0;
    char c = peek();
    if (c == '*') {
      min = 0, max = kUnbounded, ++pos_;
    } else if (c == '+') {
      min = 1, max = kUnbounded, ++pos_;
    } else if (c == '?') {
      min = 0, max = 1, ++pos_;
    } else if (!brace_quantifier(min, max)) {
      return false;
    }
    RegexNode repeat = make(Kind::kRepeat);
    repeat.min = min;
    repeat.max = max;
    repeat.children.push_back(std::move(atom));
    atom = std::move(repeat);
    return true;
  }

  RegexNode parse_atom(int depth) {
    size_t start = pos_;
    char c = peek();
    if (c == '*' || c == '+' || c == '?') fail("nothing to repeat", start);
    if (c == '{') {
      int min = 0;
      int max = 0;
      if (brace_quantifier(min, max)) fail("nothing to repeat", start);
      ++pos_;
      return chars_node(CodePointSet::single('{'));
    }
    if (c == '(') return parse_group(depth);
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return chars_node(CodePointSet::single('\n').complement());
    }
    if (c == '\\') {
      CodePointSet set;
      parse_escape(set, false);
      return chars_node(std::move(set));
    }
    uint32_t cp = next_cp();
    return chars_node(CodePointSet::single(cp));
  }

  RegexNode parse_group(int depth) {
    size_t start = pos_;
    ++pos_;
    if (peek() == '?') {
      if (peek(1) == ':') {
        pos_ += 2;
      } else if (peek(1) == '=' || peek(1) == '!') {
        fail("lookahead", start);
      } else if (peek(1) == '<' && (peek(2) == '=' || peek(2) == '!')) {
        fail("lookbehind", start);
      } else if (peek(1) == '<' || (peek(1) == 'P' && peek(2) == '<')) {
        size_t close = pattern_.find('>', pos_);
        if (close == std::string_view::npos) fail("unterminated group name", start);
        pos_ = close + 1;
      } else {
        fail(std::string("group syntax '(?") + std::string(1, peek(1)) + "' (inline flags and extensions)", start);
      }
    }
    RegexNode inner = parse_alternation(depth + 1);
    if (peek() != ')') fail("unterminated group", start);
    ++pos_;
    return inner;
  }

  // An escape at pos_ (the backslash) into set; in_class: \b is backspace there.
  void parse_escape(CodePointSet& set, bool in_class) {
    size_t start = pos_;
    ++pos_;
    if (at_end()) fail("a trailing backslash", start);
    char c = peek();
    ++pos_;
    auto hex_value = [&](size_t count) {
      uint32_t value = 0;
      for (size_t i = 0; i < count; ++i) {
        char h = peek();
        int digit = (h >= '0' && h <= '9')   ? h - '0'
                    : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                    : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                             : -1;
        if (digit < 0) fail("a malformed hexadecimal escape", start);
        value = value * 16 + static_cast<uint32_t>(digit);
        ++pos_;
      }
      return value;
    };
    auto literal = [&](uint32_t cp) {
      if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF))
        fail("an escape of a surrogate or beyond U+10FFFF", start);
      set.add(cp, cp);
    };
    switch (c) {
      case 'd': set.add(digit_set()); return;
      case 'D': set.add(digit_set().complement()); return;
      case 'w': set.add(word_set()); return;
      case 'W': set.add(word_set().complement()); return;
      case 's': set.add(space_set()); return;
      case 'S': set.add(space_set().complement()); return;
      case 'n': literal('\n'); return;
      case 'r': literal('\r'); return;
      case 't': literal('\t'); return;
      case 'f': literal('\f'); return;
      case 'v': literal('\v'); return;
      case 'b':
        if (in_class) return literal('\b');
        fail("word boundary assertion \\b", start);
      case 'B': fail("word boundary assertion \\B", start);
      case '0':
        if (peek() >= '0' && peek() <= '9') fail("octal escape", start);
        return literal(0);
      case 'x': return literal(hex_value(2));
      case 'u':
        if (peek() == '{') {
          ++pos_;
          uint32_t value = 0;
          size_t digits = 0;
          while (peek() != '}') {
            value = value * 16 + hex_value(1);
            if (++digits > 6) fail("a malformed \\u{...} escape", start);
          }
          ++pos_;
          if (digits == 0) fail("a malformed \\u{...} escape", start);
          return literal(value);
        }
        return literal(hex_value(4));
      case 'c': {
        char letter = peek();
        if (!((letter >= 'a' && letter <= 'z') || (letter >= 'A' && letter <= 'Z')))
          fail("a malformed \\c escape", start);
        ++pos_;
        return literal(static_cast<uint32_t>(letter) % 32);
      }
      case 'k': fail("backreference", start);
      case 'p':
      case 'P': fail("Unicode property escape", start);
      default: break;
    }
    if (c >= '1' && c <= '9') fail("backreference", start);
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) {
      fail(std::string("unknown escape \\") + c, start);
    }
    --pos_;
    literal(next_cp());  // escaped punctuation or any other character stands for itself
  }

  RegexNode parse_class() {
    size_t start = pos_;
    ++pos_;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    CodePointSet set;
    while (true) {
      if (at_end()) fail("unterminated character class", start);
      if (peek() == ']') {
        ++pos_;
        break;
      }
      size_t item_at = pos_;
      CodePointSet low;
      class_atom(low);
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < pattern_.size()) {
        ++pos_;
        CodePointSet high;
        class_atom(high);
        bool single_low = low.ranges().size() == 1 && low.ranges()[0].first == low.ranges()[0].second;
        bool single_high = high.ranges().size() == 1 && high.ranges()[0].first == high.ranges()[0].second;
        if (!single_low || !single_high) fail("a range with a class escape at an end", item_at);
        uint32_t lo = low.ranges()[0].first;
        uint32_t hi = high.ranges()[0].first;
        if (lo > hi) fail("a character range out of order", item_at);
        set.add(lo, hi);
      } else {
        set.add(low);
      }
    }
    return chars_node(negated ? set.complement() : set);
  }

  void class_atom(CodePointSet& set) {
    if (peek() == '\\') return parse_escape(set, true);
    uint32_t cp = next_cp();
    set.add(cp, cp);
  }

  std::string_view pattern_;
  size_t pos_ = 0;
};

bool nullable(const RegexNode& node) {
  switch (node.kind) {
    case Kind::kNothing:
    case Kind::kChars: return false;
    case Kind::kEmpty: return true;
    case Kind::kConcat:
      for (const auto& child : node.children) {
        if (!nullable(child)) return false;
      }
      return true;
    case Kind::kAlt:
      for (const auto& child : node.children) {
        if (nullable(child)) return true;
      }
      return false;
    case Kind::kRepeat: return node.min == 0 || nullable(node.children[0]);
  }
  return false;
}

// Folds away empty sets, empty strings and single-child lists.
RegexNode simplify(RegexNode node) {
  for (auto& child : node.children) child = simplify(std::move(child));
  switch (node.kind) {
    case Kind::kChars:
      if (node.chars.empty()) return make(Kind::kNothing);
      return node;
    case Kind::kConcat: {
      std::vector<RegexNode> kept;
      for (auto& child : node.children) {
        if (child.kind == Kind::kNothing) return make(Kind::kNothing);
        if (child.kind == Kind::kEmpty) continue;
        if (child.kind == Kind::kConcat) {
          for (auto& grandchild : child.children) kept.push_back(std::move(grandchild));
        } else {
          kept.push_back(std::move(child));
        }
      }
      if (kept.empty()) return make(Kind::kEmpty);
      if (kept.size() == 1) return std::move(kept[0]);
      node.children = std::move(kept);
      return node;
    }
    case Kind::kAlt: {
      std::vector<RegexNode> kept;
      for (auto& child : node.children) {
        if (child.kind == Kind::kNothing) continue;
        if (child.kind == Kind::kAlt) {
          for (auto& grandchild : child.children) kept.push_back(std::move(grandchild));
        } else {
          kept.push_back(std::move(child));
        }
      }
      if (kept.empty()) return make(Kind::kNothing);
      if (kept.size() == 1) return std::move(kept[0]);
      node.children = std::move(kept);
      return node;
    }
    case Kind::kRepeat: {
      const RegexNode& child = node.children[0];
      if (child.kind == Kind::kNothing) return make(node.min == 0 ? Kind::kEmpty : Kind::kNothing);
      if (child.kind == Kind::kEmpty || node.max == 0) return make(Kind::kEmpty);
      if (node.min == 1 && node.max == 1) return std::move(node.children[0]);
      return node;
    }
    default: return node;
  }
}

// The node's language without the empty string: a repetition of a nullable body is written as
// a repetition of this, so that no emitted loop can match empty (the GBNF matcher refuses left
// recursion and an empty loop would be one).
RegexNode non_empty(const RegexNode& node) {
  switch (node.kind) {
    case Kind::kNothing:
    case Kind::kEmpty: return make(Kind::kNothing);
    case Kind::kChars: return node;
    case Kind::kAlt: {
      RegexNode alt = make(Kind::kAlt);
      for (const auto& child : node.children) alt.children.push_back(non_empty(child));
      return simplify(std::move(alt));
    }
    case Kind::kConcat: {
      RegexNode alt = make(Kind::kAlt);
      for (size_t i = 0; i < node.children.size(); ++i) {
        RegexNode branch = make(Kind::kConcat);
        branch.children.push_back(non_empty(node.children[i]));
        for (size_t j = i + 1; j < node.children.size(); ++j) branch.children.push_back(node.children[j]);
        alt.children.push_back(std::move(branch));
        if (!nullable(node.children[i])) break;
      }
      return simplify(std::move(alt));
    }
    case Kind::kRepeat: {
      RegexNode repeat = node;
      if (nullable(node.children[0])) {
        repeat.children[0] = non_empty(node.children[0]);
        repeat.min = 1;
      } else {
        repeat.min = std::max(node.min, 1);
      }
      return simplify(std::move(repeat));
    }
  }
  return node;
}

double expanded_size(const RegexNode& node) {
  switch (node.kind) {
    case Kind::kChars: return 1;
    case Kind::kConcat:
    case Kind::kAlt: {
      double total = 0;
      for (const auto& child : node.children) total += expanded_size(child);
      return total;
    }
    case Kind::kRepeat:
      return expanded_size(node.children[0]) * std::max(1, node.max == kUnbounded ? node.min + 1 : node.max);
    default: return 0;
  }
}

class RegexEmitter {
 public:
  RegexEmitter(RegexTarget target, const std::string& nonascii_escape_rule)
      : target_(target), nonascii_escape_rule_(nonascii_escape_rule) {}

  // "" for the empty string.
  std::string emit(const RegexNode& node) {
    switch (node.kind) {
      case Kind::kNothing:
      case Kind::kEmpty: return {};
      case Kind::kChars: return emit_chars(node.chars);
      case Kind::kConcat: return emit_concat(node);
      case Kind::kAlt: {
        std::vector<std::string> parts;
        bool optional = false;
        for (const auto& child : node.children) {
          std::string text = emit(child);
          if (text.empty()) {
            optional = true;
          } else {
            parts.push_back(text);
          }
        }
        std::string joined;
        for (const auto& part : parts) joined += (joined.empty() ? "" : " | ") + part;
        if (optional) return joined.empty() ? joined : std::string("( ") + joined + " )?";
        return joined;
      }
      case Kind::kRepeat: {
        const RegexNode& body = node.children[0];
        int min = node.min;
        RegexNode body_non_empty;
        const RegexNode* emitted = &body;
        if (nullable(body)) {
          body_non_empty = non_empty(body);
          if (body_non_empty.kind == Kind::kNothing) return {};
          emitted = &body_non_empty;
          min = 0;
        }
        std::string text = as_quantifiable(emit(*emitted));
        if (min == 1 && node.max == 1) return text;
        return text + quantifier_suffix(min, node.max);
      }
    }
    return {};
  }

 private:
  static bool single_code_point(const RegexNode& node) {
    return node.kind == Kind::kChars && node.chars.ranges().size() == 1 &&
           node.chars.ranges()[0].first == node.chars.ranges()[0].second;
  }

  std::string emit_chars(const CodePointSet& set) {
    if (target_ == RegexTarget::kRawText) return gbnf_class(set);
    if (set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second) {
      std::string text;
      append_utf8(text, set.ranges()[0].first);
      return json_string_content_gbnf(text);
    }
    return json_string_char_gbnf(set, nonascii_escape_rule_);
  }

  std::string emit_concat(const RegexNode& node) {
    std::vector<std::string> parts;
    std::string run;  // consecutive literal characters, written as one literal
    auto flush = [&] {
      if (run.empty()) return;
      parts.push_back(target_ == RegexTarget::kRawText ? gbnf_literal(run) : json_string_content_gbnf(run));
      run.clear();
    };
    for (const auto& child : node.children) {
      if (single_code_point(child)) {
        append_utf8(run, child.chars.ranges()[0].first);
        continue;
      }
      flush();
      std::string text = emit(child);
      if (text.empty()) continue;
      if (binding_of(text) == Binding::kAlternation) text = std::string("( ") + text + " )";
      parts.push_back(text);
    }
    flush();
    std::string joined;
    for (const auto& part : parts) joined += (joined.empty() ? "" : " ") + part;
    return joined;
  }

  RegexTarget target_;
  const std::string& nonascii_escape_rule_;
};

}  // namespace

std::string regex_to_gbnf_expression(std::string_view pattern, RegexTarget target,
                                     const std::string& nonascii_escape_rule) {
  RegexNode node = simplify(RegexParser(pattern).parse());
  if (node.kind == Kind::kNothing) {
    throw GrammarError(std::string("regex: pattern '") + std::string(pattern) + "' matches nothing");
  }
  if (expanded_size(node) > kMaxExpandedSize) {
    throw GrammarError(std::string("regex: pattern '") + std::string(pattern) +
                       "' is too large once its repetitions are expanded");
  }
  std::string text = RegexEmitter(target, nonascii_escape_rule).emit(node);
  return text.empty() ? "\"\"" : text;
}

}  // namespace detail

std::string regex_to_gbnf(std::string_view pattern) {
  return std::string("root ::= ") + detail::regex_to_gbnf_expression(pattern, detail::RegexTarget::kRawText) + "\n";
}

}  // namespace slab::grammar
