#include "grammar/gbnf_emit.h"

#include <algorithm>
#include <cstdio>

#include "grammar/grammar.h"
#include "grammar/json_schema.h"

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

void append_utf8(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
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

std::string json_string_content_gbnf(std::string_view text) {
  std::vector<std::string> parts;
  std::string run;
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
  // Past this many non-ASCII code points in a class that does not hold them all, their \u
  // escapes are not enumerated (raw UTF-8 only).
  constexpr size_t kMaxEnumeratedEscapes = 64;
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
    size_t count = 0;
    CodePointSet nonascii = set.minus(CodePointSet::range(0, 0x7F));
    for (const auto& [lo, hi] : nonascii.ranges()) count += hi - lo + 1;
    if (count <= kMaxEnumeratedEscapes) {
      for (const auto& [lo, hi] : nonascii.ranges()) {
        for (uint32_t cp = lo; cp <= hi; ++cp) parts.push_back(unicode_escape_gbnf(cp));
      }
    }
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
