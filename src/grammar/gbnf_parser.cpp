// GBNF text (llama.cpp's grammars/README notation) to rule sketches: a recursive-descent parser
// that lowers as it goes. Literals and classes become byte-set elements (classes through the
// UTF-8 range splitter), groups with alternatives and repetitions become helper rules.
#include <map>
#include <string>
#include <unordered_map>

#include "grammar/grammar_ir.h"
#include "grammar/utf8_ranges.h"

namespace slab::grammar {
namespace {

constexpr int kMaxRepetition = 100000;

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

class GbnfParser {
 public:
  explicit GbnfParser(std::string_view text) : text_(text) {}

  std::unique_ptr<CompiledGrammar> parse(std::string_view root_name) {
    skip_space(true);
    while (pos_ < text_.size()) {
      parse_rule();
      skip_space(true);
    }
    const auto it = rule_index_.find(std::string(root_name));
    if (it == rule_index_.end() || !rules_[it->second].defined) {
      throw GrammarError("grammar has no rule named '" + std::string(root_name) + "' (the start rule)");
    }
    return check_and_flatten(std::move(rules_), std::move(byte_sets_), it->second);
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    int line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    std::string where = "line " + std::to_string(line) + " column " + std::to_string(col);
    if (!current_rule_.empty()) where = "rule '" + current_rule_ + "' (" + where + ")";
    throw GrammarError("grammar syntax error in " + where + ": " + what);
  }

  int line_at(size_t pos) const {
    int line = 1;
    for (size_t i = 0; i < pos && i < text_.size(); ++i) line += text_[i] == '\n';
    return line;
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < text_.size() ? text_[pos_ + ahead] : '\0'; }

  // Blanks and comments; newlines too where `newlines` (inside groups, between rules).
  void skip_space(bool newlines) {
    while (!at_end()) {
      const char c = peek();
      if (c == ' ' || c == '\t') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && peek() != '\n' && peek() != '\r') ++pos_;
      } else if (newlines && (c == '\n' || c == '\r')) {
        ++pos_;
      } else {
        break;
      }
    }
  }

  std::string parse_name() {
    const size_t start = pos_;
    while (!at_end() && is_name_char(peek())) ++pos_;
    if (pos_ == start) fail("expected a rule name");
    return std::string(text_.substr(start, pos_ - start));
  }

  uint32_t rule_for_name(const std::string& name) {
    const auto [it, inserted] = rule_index_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
    if (inserted) {
      rules_.push_back({});
      rules_.back().name = name;
    }
    return it->second;
  }

  uint32_t new_helper_rule(std::vector<std::vector<Element>> alternatives) {
    RuleSketch rule;
    rule.name = current_rule_;
    rule.line = current_line_;
    rule.defined = true;
    rule.alternatives = std::move(alternatives);
    rules_.push_back(std::move(rule));
    return static_cast<uint32_t>(rules_.size() - 1);
  }

  Element bytes_element(const ByteSet& set) {
    const auto [it, inserted] = byte_set_index_.try_emplace(set.bits, static_cast<uint32_t>(byte_sets_.size()));
    if (inserted) byte_sets_.push_back(set);
    return {ElementKind::kBytes, it->second};
  }

  void parse_rule() {
    current_rule_.clear();
    const size_t start = pos_;
    const std::string name = parse_name();
    current_rule_ = name;
    current_line_ = line_at(start);
    skip_space(false);
    if (text_.substr(pos_, 3) != "::=") fail("expected '::=' after the rule name");
    pos_ += 3;
    skip_space(true);
    const uint32_t index = rule_for_name(name);
    if (rules_[index].defined) {
      fail("rule '" + name + "' is defined twice (first on line " + std::to_string(rules_[index].line) + ")");
    }
    auto alternatives = parse_alternatives(false);
    RuleSketch& rule = rules_[index];
    rule.defined = true;
    rule.line = current_line_;
    rule.alternatives = std::move(alternatives);
    if (!at_end() && peek() != '\n' && peek() != '\r') fail("expected a newline or the end after the rule");
  }

  std::vector<std::vector<Element>> parse_alternatives(bool nested) {
    std::vector<std::vector<Element>> alternatives;
    alternatives.push_back(parse_sequence(nested));
    while (true) {
      // A top-level rule may continue on a following line that starts with '|'.
      const size_t save = pos_;
      skip_space(true);
      if (peek() != '|') {
        pos_ = save;
        break;
      }
      ++pos_;
      skip_space(true);
      alternatives.push_back(parse_sequence(nested));
    }
    return alternatives;
  }

  std::vector<Element> parse_sequence(bool nested) {
    std::vector<Element> out;
    while (!at_end()) {
      const char c = peek();
      if (c == '|' || c == ')' || c == '\n' || c == '\r') break;
      if (is_name_char(c)) {
        // A name followed by ::= begins the next rule (only reachable when a newline was missed).
        size_t look = pos_;
        while (look < text_.size() && is_name_char(text_[look])) ++look;
        while (look < text_.size() && (text_[look] == ' ' || text_[look] == '\t')) ++look;
        if (text_.substr(look, 3) == "::=") fail("expected a newline before the next rule");
      }
      std::vector<Element> item = parse_item();
      parse_postfix(item);
      out.insert(out.end(), item.begin(), item.end());
      skip_space(nested);
    }
    if (nested && at_end()) fail("unclosed '('");
    return out;
  }

  // One element (literal, class, reference, group); several byte elements for a literal.
  std::vector<Element> parse_item() {
    const char c = peek();
    if (c == '"') {
      ++pos_;
      std::string bytes;
      while (true) {
        if (at_end() || peek() == '\n' || peek() == '\r') fail("unterminated string literal");
        if (peek() == '"') break;
        if (peek() == '\\') {
          append_utf8(bytes, parse_escape());
        } else {
          bytes += text_[pos_++];
        }
      }
      ++pos_;
      std::vector<Element> out;
      for (const char b : bytes) {
        ByteSet s;
        s.set(static_cast<uint8_t>(b));
        out.push_back(bytes_element(s));
      }
      return out;
    }
    if (c == '[') return parse_class();
    if (c == '.') {
      ++pos_;
      return class_elements(normalize_ranges({}, true));
    }
    if (c == '(') {
      ++pos_;
      skip_space(true);
      auto alternatives = parse_alternatives(true);
      skip_space(true);
      if (peek() != ')') fail("expected ')'");
      ++pos_;
      if (alternatives.size() == 1) return std::move(alternatives[0]);
      return {{ElementKind::kRule, new_helper_rule(std::move(alternatives))}};
    }
    if (is_name_char(c)) {
      const size_t start = pos_;
      const std::string name = parse_name();
      const uint32_t index = rule_for_name(name);
      if (rules_[index].first_use_line == 0) rules_[index].first_use_line = line_at(start);
      return {{ElementKind::kRule, index}};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') fail(std::string("'") + c + "' with nothing to repeat");
    fail(std::string("unexpected character '") + c + "'");
  }

  uint32_t parse_hex(int digits) {
    uint32_t value = 0;
    for (int i = 0; i < digits; ++i) {
      const char h = peek();
      int d;
      if (h >= '0' && h <= '9') {
        d = h - '0';
      } else if (h >= 'a' && h <= 'f') {
        d = h - 'a' + 10;
      } else if (h >= 'A' && h <= 'F') {
        d = h - 'A' + 10;
      } else {
        fail("expected " + std::to_string(digits) + " hex digits in an escape");
      }
      value = value * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    return value;
  }

  uint32_t check_code_point(uint32_t cp) {
    if (cp > kMaxCodePoint || (cp >= 0xD800 && cp <= 0xDFFF)) fail("escape names no Unicode scalar value");
    return cp;
  }

  // At a backslash: the code point it names (\xHH names U+00HH, as in llama.cpp).
  uint32_t parse_escape() {
    ++pos_;
    const char e = peek();
    ++pos_;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': return '\\';
      case '"': return '"';
      case '[': return '[';
      case ']': return ']';
      case '-': return '-';
      case '^': return '^';
      case 'x': return parse_hex(2);
      case 'u': return check_code_point(parse_hex(4));
      case 'U': return check_code_point(parse_hex(8));
      default: --pos_; fail(std::string("unknown escape '\\") + e + "'");
    }
  }

  // One code point of a class: an escape or one UTF-8 encoded character.
  uint32_t parse_class_char() {
    if (peek() == '\\') return parse_escape();
    const auto b0 = static_cast<uint8_t>(peek());
    int len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
    if (len == 0 || pos_ + static_cast<size_t>(len) > text_.size()) fail("invalid UTF-8 in a character class");
    uint32_t cp = len == 1 ? b0 : b0 & (0x7F >> len);
    for (int i = 1; i < len; ++i) {
      const auto b = static_cast<uint8_t>(text_[pos_ + static_cast<size_t>(i)]);
      if ((b & 0xC0) != 0x80) fail("invalid UTF-8 in a character class");
      cp = (cp << 6) | (b & 0x3F);
    }
    pos_ += static_cast<size_t>(len);
    return cp;
  }

  std::vector<Element> parse_class() {
    ++pos_;
    bool negate = false;
    if (peek() == '^') {
      negate = true;
      ++pos_;
    }
    std::vector<CodePointRange> ranges;
    while (true) {
      if (at_end() || peek() == '\n') fail("unterminated character class");
      if (peek() == ']') break;
      const uint32_t lo = parse_class_char();
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && peek(1) != '\0') {
        ++pos_;
        hi = parse_class_char();
        if (hi < lo) fail("character range out of order");
      }
      ranges.push_back({lo, hi});
    }
    ++pos_;
    if (ranges.empty() && !negate) fail("empty character class '[]'");
    const auto normalized = normalize_ranges(std::move(ranges), negate);
    if (normalized.empty()) fail("character class matches nothing");
    return class_elements(normalized);
  }

  std::vector<Element> class_elements(const std::vector<CodePointRange>& normalized) {
    const auto alternatives = class_alternatives(normalized);
    std::vector<std::vector<Element>> lowered;
    for (const auto& alt : alternatives) {
      std::vector<Element> seq;
      for (const ByteSet& s : alt) seq.push_back(bytes_element(s));
      lowered.push_back(std::move(seq));
    }
    if (lowered.size() == 1) return lowered[0];
    // One helper rule per distinct class, shared by every use.
    const auto [it, inserted] = class_rules_.try_emplace(normalized, 0);
    if (inserted) it->second = new_helper_rule(std::move(lowered));
    return {{ElementKind::kRule, it->second}};
  }

  int parse_int() {
    const size_t start = pos_;
    long value = 0;
    while (!at_end() && peek() >= '0' && peek() <= '9') {
      value = value * 10 + (peek() - '0');
      if (value > kMaxRepetition) fail("repetition count above " + std::to_string(kMaxRepetition));
      ++pos_;
    }
    if (pos_ == start) fail("expected a number in '{...}'");
    return static_cast<int>(value);
  }

  // * + ? {m} {m,} {m,n} after an item, any number of times.
  void parse_postfix(std::vector<Element>& item) {
    while (true) {
      const char c = peek();
      int min, max;  // max -1: unbounded
      if (c == '*') {
        min = 0, max = -1;
        ++pos_;
      } else if (c == '+') {
        min = 1, max = -1;
        ++pos_;
      } else if (c == '?') {
        min = 0, max = 1;
        ++pos_;
      } else if (c == '{') {
        ++pos_;
        skip_space(false);
        min = parse_int();
        skip_space(false);
        max = min;
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          max = peek() == '}' ? -1 : parse_int();
          skip_space(false);
        }
        if (peek() != '}') fail("expected '}'");
        ++pos_;
        if (max != -1 && max < min) fail("repetition {m,n} with n < m");
      } else {
        return;
      }
      item = repeat(item, min, max);
    }
  }

  // x{min,max} as min copies of x followed by x* or a chain of optional rules
  // O1 ::= x | ""  ;  Ok ::= x O(k-1) | ""  (so {0,n} costs n small rules, not n alternatives).
  std::vector<Element> repeat(const std::vector<Element>& item, int min, int max) {
    Element unit;
    if (item.size() == 1) {
      unit = item[0];
    } else {
      unit = {ElementKind::kRule, new_helper_rule({item})};
    }
    std::vector<Element> out(static_cast<size_t>(min), unit);
    if (max == -1) {
      const auto star = static_cast<uint32_t>(rules_.size());
      new_helper_rule({{unit, {ElementKind::kRule, star}}, {}});
      out.push_back({ElementKind::kRule, star});
    } else if (max > min) {
      uint32_t previous = new_helper_rule({{unit}, {}});
      for (int k = 2; k <= max - min; ++k) previous = new_helper_rule({{unit, {ElementKind::kRule, previous}}, {}});
      out.push_back({ElementKind::kRule, previous});
    }
    return out;
  }

  std::string_view text_;
  size_t pos_ = 0;
  std::string current_rule_;
  int current_line_ = 0;
  std::vector<RuleSketch> rules_;
  std::unordered_map<std::string, uint32_t> rule_index_;
  std::vector<ByteSet> byte_sets_;
  std::map<std::array<uint64_t, 4>, uint32_t> byte_set_index_;
  std::map<std::vector<CodePointRange>, uint32_t> class_rules_;
};

}  // namespace

Grammar::Grammar(std::unique_ptr<CompiledGrammar> compiled) : compiled_(std::move(compiled)) {}
Grammar::~Grammar() = default;

std::shared_ptr<const Grammar> Grammar::parse(std::string_view gbnf, std::string_view root) {
  GbnfParser parser(gbnf);
  return std::shared_ptr<const Grammar>(new Grammar(parser.parse(root)));
}

}  // namespace slab::grammar
