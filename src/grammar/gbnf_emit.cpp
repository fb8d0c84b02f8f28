#include "grammar/gbnf_emit.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"
#include "grammar/utf8_ranges.h"

namespace slab::grammar {
namespace detail {

namespace {

constexpr uint32_t kSurrogateLo = 0xD800;
constexpr uint32_t kSurrogateHi = 0xDFFF;

std::string hex_digits(uint32_t value, int width) {
  char buffer[16];
  std::snprintf(buffer, sizeof buffer, "%0*X", width, static_cast<unsigned>(value));
  return buffer;
}

// One code point as it may appear inside a GBNF [class].
std::string class_char(uint32_t cp) {
  switch (cp) {
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\\':
    case ']':
    case '[':
    case '-':
    case '^':
    case '"': return std::string("\\x") + hex_digits(cp, 2);
    default: break;
  }
  if (cp < 0x20 || cp == 0x7F) return std::string("\\x") + hex_digits(cp, 2);
  if (cp < 0x80) return std::string(1, static_cast<char>(cp));
  if (cp <= 0xFFFF) return std::string("\\u") + hex_digits(cp, 4);
  return std::string("\\U") + hex_digits(cp, 8);
}

std::string class_body(const CodePointSet& set) {
  std::string body;
  for (const auto& [lo, hi] : set.ranges()) {
    body += class_char(lo);
    if (hi != lo) {
      if (hi != lo + 1) body += '-';
      body += class_char(hi);
    }
  }
  return body;
}

// Hex digits that a JSON writer may spell in either case: "00" [eE] "9".
std::string hex_any_case(const std::string& upper_hex) {
  std::string out;
  std::string run;
  auto flush = [&] {
    if (run.empty()) return;
    if (!out.empty()) out += ' ';
    out += gbnf_literal(run);
    run.clear();
  };
  for (char c : upper_hex) {
    if (c >= 'A' && c <= 'F') {
      flush();
      if (!out.empty()) out += ' ';
      out += '[';
      out += c;
      out += static_cast<char>(c - 'A' + 'a');
      out += ']';
    } else {
      run += c;
    }
  }
  flush();
  return out;
}

// \uXXXX of a code point (a surrogate pair above U+FFFF), hex in either case.
std::string unicode_escape_gbnf(uint32_t cp) {
  if (cp <= 0xFFFF) return gbnf_literal("\\u") + " " + hex_any_case(hex_digits(cp, 4));
  uint32_t v = cp - 0x10000;
  uint32_t high = 0xD800 + (v >> 10);
  uint32_t low = 0xDC00 + (v & 0x3FF);
  return gbnf_literal("\\u") + " " + hex_any_case(hex_digits(high, 4)) + " " + gbnf_literal("\\u") + " " +
         hex_any_case(hex_digits(low, 4));
}

const char* short_escape(uint32_t cp) {
  switch (cp) {
    case '\b': return "\\b";
    case '\f': return "\\f";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    default: return nullptr;
  }
}

// The encodings of a character that cannot appear raw (or not only raw) in a JSON string.
std::vector<std::string> escaped_forms(uint32_t cp) {
  std::vector<std::string> forms;
  if (cp == '"') {
    forms.push_back(gbnf_literal("\\\""));
  } else if (cp == '\\') {
    forms.push_back(gbnf_literal("\\\\"));
  } else if (cp == '/') {
    forms.push_back(gbnf_literal("\\/"));
  } else if (cp < 0x20) {
    if (const char* s = short_escape(cp)) forms.push_back(gbnf_literal(s));
    forms.push_back(unicode_escape_gbnf(cp));
  } else if (cp >= 0x80) {
    forms.push_back(unicode_escape_gbnf(cp));
  }
  return forms;
}

// One hex digit with a value in lo..hi, in either case.
std::string hex_digit_class(uint32_t lo, uint32_t hi) {
  CodePointSet set;
  for (uint32_t v = lo; v <= hi; ++v) {
    if (v < 10) {
      set.add('0' + v, '0' + v);
    } else {
      set.add('a' + v - 10, 'a' + v - 10);
      set.add('A' + v - 10, 'A' + v - 10);
    }
  }
  return gbnf_class(set);
}

// `width` hex digits spelling a value in lo..hi (the digit-range construction of integer
// bounds, in base 16).
std::string hex_range(uint32_t lo, uint32_t hi, int width) {
  if (width == 0) return {};
  const uint32_t unit = 1u << (4 * (width - 1));
  const uint32_t lo_first = lo / unit;
  const uint32_t hi_first = hi / unit;
  const uint32_t lo_rest = lo % unit;
  const uint32_t hi_rest = hi % unit;
  auto join = [](const std::string& a, const std::string& b) { return b.empty() ? a : a + " " + b; };
  if (lo_first == hi_first) return join(hex_digit_class(lo_first, lo_first), hex_range(lo_rest, hi_rest, width - 1));
  std::vector<std::string> alternatives;
  uint32_t middle_lo = lo_first;
  uint32_t middle_hi = hi_first;
  if (lo_rest != 0) {
    alternatives.push_back(join(hex_digit_class(lo_first, lo_first), hex_range(lo_rest, unit - 1, width - 1)));
    ++middle_lo;
  }
  if (hi_rest != unit - 1) --middle_hi;
  if (middle_lo <= middle_hi) {
    std::string any = width > 1 ? std::string("[0-9a-fA-F]") + quantifier_suffix(width - 1, width - 1) : "";
    alternatives.push_back(join(hex_digit_class(middle_lo, middle_hi), any));
  }
  if (hi_rest != unit - 1) {
    alternatives.push_back(join(hex_digit_class(hi_first, hi_first), hex_range(0, hi_rest, width - 1)));
  }
  if (alternatives.size() == 1) return alternatives[0];
  std::string out = "(";
  for (size_t i = 0; i < alternatives.size(); ++i) out += (i ? " | " : " ") + alternatives[i];
  return out + " )";
}

// \uXXXX escapes (surrogate pairs above U+FFFF) of exactly the non-ASCII code points of the set.
std::vector<std::string> unicode_escapes_gbnf(const CodePointSet& set) {
  const std::string backslash_u = gbnf_literal("\\u");
  std::vector<std::string> out;
  auto pair = [&](uint32_t high_lo, uint32_t high_hi, uint32_t low_lo, uint32_t low_hi) {
    out.push_back(backslash_u + " " + hex_range(high_lo, high_hi, 4) + " " + backslash_u + " " +
                  hex_range(low_lo, low_hi, 4));
  };
  for (auto [lo, hi] : set.ranges()) {
    if (lo <= 0xFFFF) {
      out.push_back(backslash_u + " " + hex_range(lo, std::min<uint32_t>(hi, 0xFFFF), 4));
      if (hi <= 0xFFFF) continue;
      lo = 0x10000;
    }
    const uint32_t high_lo = 0xD800 + ((lo - 0x10000) >> 10);
    const uint32_t low_lo = 0xDC00 + ((lo - 0x10000) & 0x3FF);
    const uint32_t high_hi = 0xD800 + ((hi - 0x10000) >> 10);
    const uint32_t low_hi = 0xDC00 + ((hi - 0x10000) & 0x3FF);
    if (high_lo == high_hi) {
      pair(high_lo, high_lo, low_lo, low_hi);
      continue;
    }
    uint32_t middle_lo = high_lo;
    uint32_t middle_hi = high_hi;
    if (low_lo != 0xDC00) pair(high_lo, high_lo, low_lo, 0xDFFF), ++middle_lo;
    if (low_hi != 0xDFFF) --middle_hi;
    if (middle_lo <= middle_hi) pair(middle_lo, middle_hi, 0xDC00, 0xDFFF);
    if (low_hi != 0xDFFF) pair(high_hi, high_hi, 0xDC00, low_hi);
  }
  return out;
}

std::string alternatives(const std::vector<std::string>& parts) {
  if (parts.size() == 1) return parts[0];
  std::string out = "(";
  for (size_t i = 0; i < parts.size(); ++i) out += (i ? " | " : " ") + parts[i];
  return out + " )";
}

bool raw_in_json_string(uint32_t cp) { return cp >= 0x20 && cp != '"' && cp != '\\'; }

}  // namespace

CodePointSet CodePointSet::range(uint32_t lo, uint32_t hi) {
  CodePointSet set;
  set.add(lo, hi);
  return set;
}

void CodePointSet::add(uint32_t lo, uint32_t hi) {
  if (lo > hi) return;
  ranges_.emplace_back(lo, hi);
  std::sort(ranges_.begin(), ranges_.end());
  std::vector<std::pair<uint32_t, uint32_t>> merged;
  for (const auto& r : ranges_) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  ranges_ = std::move(merged);
}

void CodePointSet::add(const CodePointSet& other) {
  for (const auto& [lo, hi] : other.ranges_) add(lo, hi);
}

CodePointSet CodePointSet::complement() const {
  CodePointSet out;
  uint32_t next = 0;
  for (const auto& [lo, hi] : ranges_) {
    if (lo > next) out.add(next, lo - 1);
    next = hi + 1;
  }
  if (next <= kMaxCodePoint) out.add(next, kMaxCodePoint);
  return out.minus(range(kSurrogateLo, kSurrogateHi));
}

CodePointSet CodePointSet::minus(const CodePointSet& other) const {
  CodePointSet out;
  for (auto [lo, hi] : ranges_) {
    uint32_t start = lo;
    bool alive = true;
    for (const auto& [olo, ohi] : other.ranges_) {
      if (ohi < start || olo > hi) continue;
      if (olo > start) out.add(start, olo - 1);
      if (ohi >= hi) {
        alive = false;
        break;
      }
      start = ohi + 1;
    }
    if (alive) out.add(start, hi);
  }
  return out;
}

bool CodePointSet::contains(uint32_t cp) const { return contains_all(cp, cp); }

bool CodePointSet::contains_all(uint32_t lo, uint32_t hi) const {
  for (const auto& [rlo, rhi] : ranges_) {
    if (rlo <= lo && hi <= rhi) return true;
  }
  return false;
}

uint32_t next_code_point(std::string_view text, size_t& pos) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  uint32_t first = byte(pos);
  int extra = first >= 0xF0 ? 3 : first >= 0xE0 ? 2 : first >= 0xC0 ? 1 : 0;
  if (first < 0xC0 || first > 0xF4 || pos + extra >= text.size()) {
    ++pos;
    return first;
  }
  uint32_t cp = first & (0x3F >> extra);
  for (int i = 1; i <= extra; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) {
      ++pos;
      return first;
    }
    cp = (cp << 6) | (byte(pos + i) & 0x3F);
  }
  pos += extra + 1;
  return cp;
}

bool is_valid_utf8(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t start = pos;
    uint32_t cp = next_code_point(text, pos);
    size_t length = pos - start;
    if (length == 1 && cp >= 0x80) return false;
    size_t expected = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (length != expected || cp > kMaxCodePoint || (cp >= kSurrogateLo && cp <= kSurrogateHi)) return false;
  }
  return true;
}

std::string gbnf_literal(std::string_view bytes) {
  std::string out = "\"";
  for (char c : bytes) {
    auto byte = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (byte < 0x20 || byte == 0x7F) {
          out += std::string("\\x") + hex_digits(byte, 2);
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

std::string gbnf_class(const CodePointSet& set) {
  if (set.contains(kMaxCodePoint)) {
    CodePointSet rest = set.complement();
    if (!rest.empty()) return std::string("[^") + class_body(rest) + "]";
  }
  if (set.ranges().size() == 1 && set.ranges()[0].first == set.ranges()[0].second) {
    std::string bytes;
    append_utf8(bytes, set.ranges()[0].first);
    return gbnf_literal(bytes);
  }
  return std::string("[") + class_body(set) + "]";
}

std::string json_string_content_gbnf(std::string_view text, bool quoted) {
  std::vector<std::string> parts;
  std::string run = quoted ? "\"" : "";  // bytes with one spelling, written as one literal
  auto flush = [&] {
    if (!run.empty()) parts.push_back(gbnf_literal(run));
    run.clear();
  };
  size_t pos = 0;
  while (pos < text.size()) {
    uint32_t cp = next_code_point(text, pos);
    if (cp >= 0x20 && cp < 0x80 && cp != '"' && cp != '\\' && cp != '/') {
      run += static_cast<char>(cp);
      continue;
    }
    if (cp == '"' || cp == '\\') {
      run += '\\';
      run += static_cast<char>(cp);
      continue;
    }
    flush();
    std::vector<std::string> forms;
    if (raw_in_json_string(cp)) {
      std::string raw;
      append_utf8(raw, cp);
      forms.push_back(gbnf_literal(raw));
    }
    for (auto& form : escaped_forms(cp)) forms.push_back(std::move(form));
    parts.push_back(alternatives(forms));
  }
  if (quoted) run += '"';
  flush();
  std::string out;
  for (const auto& part : parts) out += (out.empty() ? "" : " ") + part;
  return out;
}

std::string json_nonascii_escape_body() {
  return "\"\\\\u\" ( \"00\" [89a-fA-F] [0-9a-fA-F] | \"0\" [1-9a-fA-F] [0-9a-fA-F]{2} | "
         "[1-9a-cA-CeEfF] [0-9a-fA-F]{3} | [dD] [0-7] [0-9a-fA-F]{2} | "
         "[dD] [89abAB] [0-9a-fA-F]{2} \"\\\\u\" [dD] [c-fC-F] [0-9a-fA-F]{2} )";
}

std::string json_string_char_gbnf(const CodePointSet& set, const std::string& nonascii_escape_rule) {
  std::vector<std::string> parts;
  CodePointSet raw = set;
  CodePointSet not_raw = CodePointSet::range(0, 0x1F);
  not_raw.add('"', '"');
  not_raw.add('\\', '\\');
  raw = raw.minus(not_raw);
  if (!raw.empty()) parts.push_back(gbnf_class(raw));
  if (set.contains('"')) parts.push_back(gbnf_literal("\\\""));
  if (set.contains('\\')) parts.push_back(gbnf_literal("\\\\"));
  if (set.contains('/')) parts.push_back(gbnf_literal("\\/"));
  if (set.contains_all(0, 0x1F)) {
    parts.push_back(gbnf_literal("\\") + " ( [bfnrt] | \"u00\" [01] [0-9a-fA-F] )");
  } else {
    for (uint32_t cp = 0; cp < 0x20; ++cp) {
      if (!set.contains(cp)) continue;
      for (auto& form : escaped_forms(cp)) parts.push_back(std::move(form));
    }
  }
  if (set.contains_all(0x80, kSurrogateLo - 1) && set.contains_all(kSurrogateHi + 1, kMaxCodePoint)) {
    parts.push_back(nonascii_escape_rule);
  } else {
    for (auto& escape : unicode_escapes_gbnf(set.minus(CodePointSet::range(0, 0x7F))))
      parts.push_back(std::move(escape));
  }
  if (parts.empty()) return {};
  return alternatives(parts);
}

Binding binding_of(const std::string& text) {
  int depth = 0;
  int elements = 0;
  bool in_element = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '"' || c == '[') {
      char close = c == '"' ? '"' : ']';
      if (depth == 0 && !in_element) ++elements, in_element = true;
      for (++i; i < text.size() && text[i] != close; ++i) {
        if (text[i] == '\\') ++i;
      }
      continue;
    }
    if (c == '(') {
      if (depth == 0 && !in_element) ++elements, in_element = true;
      ++depth;
    } else if (c == ')') {
      --depth;
    } else if (c == ' ') {
      if (depth == 0) in_element = false;
    } else if (c == '|' && depth == 0) {
      return Binding::kAlternation;
    } else if (depth == 0 && !in_element) {
      ++elements, in_element = true;
    }
  }
  return elements == 1 ? Binding::kElement : Binding::kSequence;
}

std::string as_element(const std::string& expression) {
  return binding_of(expression) == Binding::kElement ? expression : std::string("( ") + expression + " )";
}

std::string as_quantifiable(const std::string& expression) {
  char last = expression.empty() ? ' ' : expression.back();
  bool quantified = last == '*' || last == '+' || last == '?' || last == '}';
  return binding_of(expression) == Binding::kElement && !quantified ? expression
                                                                    : std::string("( ") + expression + " )";
}

std::string quantifier_suffix(int min, int max) {
  if (min == 1 && max == 1) return "";
  if (min == 0 && max == 1) return "?";
  if (min == 0 && max == -1) return "*";
  if (min == 1 && max == -1) return "+";
  if (max == -1) return std::string("{") + std::to_string(min) + ",}";
  if (min == max) return std::string("{") + std::to_string(min) + "}";
  return std::string("{") + std::to_string(min) + "," + std::to_string(max) + "}";
}

namespace {

// Parts of a digit-range expression in sequence (empty parts dropped; an alternation wrapped).
std::string digit_seq(std::initializer_list<std::string> parts) {
  std::string out;
  for (const auto& part : parts) {
    if (part.empty()) continue;
    if (!out.empty()) out += ' ';
    out += binding_of(part) == Binding::kAlternation ? std::string("( ") + part + " )" : part;
  }
  return out;
}

// Digits of the numbers lo..hi, both of the same length (leading zeros written as given).
std::string same_length_range(const std::string& lo, const std::string& hi) {
  if (lo.empty()) return {};
  if (lo == hi) return gbnf_literal(lo);
  if (lo[0] == hi[0]) return digit_seq({gbnf_literal(lo.substr(0, 1)), same_length_range(lo.substr(1), hi.substr(1))});
  size_t rest = lo.size() - 1;
  bool lo_rest_zero = lo.find_first_not_of('0', 1) == std::string::npos;
  bool hi_rest_nine = hi.find_first_not_of('9', 1) == std::string::npos;
  char middle_lo = lo_rest_zero ? lo[0] : static_cast<char>(lo[0] + 1);
  char middle_hi = hi_rest_nine ? hi[0] : static_cast<char>(hi[0] - 1);
  std::vector<std::string> alternatives;
  if (!lo_rest_zero) {
    alternatives.push_back(
        digit_seq({gbnf_literal(lo.substr(0, 1)), same_length_range(lo.substr(1), std::string(rest, '9'))}));
  }
  if (middle_lo <= middle_hi) {
    std::string digit = middle_lo == middle_hi ? gbnf_literal(std::string(1, middle_lo))
                                               : std::string("[") + middle_lo + "-" + middle_hi + "]";
    alternatives.push_back(digit_seq(
        {digit, rest ? std::string("[0-9]") + quantifier_suffix(static_cast<int>(rest), static_cast<int>(rest)) : ""}));
  }
  if (!hi_rest_nine) {
    alternatives.push_back(
        digit_seq({gbnf_literal(hi.substr(0, 1)), same_length_range(std::string(rest, '0'), hi.substr(1))}));
  }
  std::string out;
  for (const auto& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return alternatives.size() > 1 ? std::string("( ") + out + " )" : out;
}

// Decimal numbers lo..hi without leading zeros (hi absent: unbounded).
std::string nonnegative_range(uint64_t lo, std::optional<uint64_t> hi) {
  std::string lo_text = std::to_string(lo);
  std::string hi_text = hi ? std::to_string(*hi) : std::string();
  size_t last_length = hi ? hi_text.size() : lo_text.size();
  std::vector<std::string> alternatives;
  for (size_t length = lo_text.size(); length <= last_length; ++length) {
    std::string from = length == lo_text.size() ? lo_text : std::string("1") + std::string(length - 1, '0');
    std::string to = hi && length == hi_text.size() ? hi_text : std::string(length, '9');
    alternatives.push_back(same_length_range(from, to));
  }
  if (!hi) alternatives.push_back(std::string("[1-9] [0-9]{") + std::to_string(lo_text.size()) + ",}");
  std::string out;
  for (const auto& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return out;
}

}  // namespace

std::string integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<std::string> alternatives;
  if (!hi || *hi >= 0) {
    alternatives.push_back(nonnegative_range(lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0,
                                             hi ? std::optional<uint64_t>(static_cast<uint64_t>(*hi)) : std::nullopt));
  }
  if (!lo || *lo < 0) {
    uint64_t magnitude_lo = hi && *hi < 0 ? static_cast<uint64_t>(-*hi) : 1;
    std::optional<uint64_t> magnitude_hi;
    if (lo) magnitude_hi = static_cast<uint64_t>(-*lo);
    alternatives.push_back(std::string("\"-\" ( ") + nonnegative_range(magnitude_lo, magnitude_hi) + " )");
  }
  std::string out;
  for (const auto& a : alternatives) out += (out.empty() ? "" : " | ") + a;
  return out;
}

}  // namespace detail

std::string choice_to_gbnf(const std::vector<std::string>& choices) {
  if (choices.empty()) throw GrammarError("guided_choice: the list of choices is empty");
  std::string out = "root ::=";
  bool first = true;
  bool has_empty = false;
  for (const auto& choice : choices) {
    if (!detail::is_valid_utf8(choice)) throw GrammarError("guided_choice: a choice is not valid UTF-8");
    if (choice.empty()) {
      has_empty = true;
      continue;
    }
    out += (first ? " " : " | ") + detail::gbnf_literal(choice);
    first = false;
  }
  // An empty choice: the other choices become optional (GBNF has no empty literal we rely on).
  if (has_empty) out = first ? "root ::= \"\"" : std::string("root ::= (") + out.substr(8) + " )?";
  return out + "\n";
}

}  // namespace slab::grammar
