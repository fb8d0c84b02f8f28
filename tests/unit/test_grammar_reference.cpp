// The matcher against independent references: random small regular grammars emitted both as
// GBNF and as an ECMAScript std::regex (inputs drawn from a small alphabet that includes two
// non-ASCII characters and stray invalid bytes, so the byte-level regex can spell exactly what
// a UTF-8 class means over that alphabet), and UTF-8 classes against a scalar decoder.
#include <catch2/catch.hpp>

#include <optional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "grammar/grammar.h"
#include "runtime/utf8_encode.h"

using slab::grammar::Grammar;
using slab::grammar::Matcher;

namespace {

// Characters of the random grammars and inputs: ASCII plus é and ñ.
const std::vector<std::string> kUnits = {"a", "b", "c", "x", "0", "-", " ", "\xC3\xA9", "\xC3\xB1"};
const std::vector<std::string> kInvalid = {"\xC3", "\xFF", "\xA9"};

std::string hex(unsigned char c) {
  const char* digits = "0123456789abcdef";
  return std::string("\\x") + digits[c >> 4] + digits[c & 15];
}

struct Node {
  enum Kind { kLiteral, kClass, kDot, kAlt, kSeq, kRepeat } kind;
  std::vector<std::string> literal;        // units
  std::vector<std::pair<int, int>> ascii;  // class: ASCII ranges
  bool e_acute = false, n_tilde = false, negated = false;
  std::vector<Node> children;
  int min = 0, max = -1;

  bool nullable() const {
    switch (kind) {
      case kLiteral: return literal.empty();
      case kClass:
      case kDot: return false;
      case kAlt:
        for (const Node& c : children) {
          if (c.nullable()) return true;
        }
        return false;
      case kSeq:
        for (const Node& c : children) {
          if (!c.nullable()) return false;
        }
        return true;
      case kRepeat: return min == 0 || children[0].nullable();
    }
    return false;
  }

  std::string gbnf() const {
    std::string out;
    switch (kind) {
      case kLiteral:
        out = "\"";
        for (const auto& u : literal) out += u;
        return out + "\"";
      case kClass:
        out = negated ? "[^" : "[";
        for (const auto& [lo, hi] : ascii)
          out += hex(static_cast<unsigned char>(lo)) + "-" + hex(static_cast<unsigned char>(hi));
        if (e_acute) out += "\xC3\xA9";
        if (n_tilde) out += "\\u00f1";
        return out + "]";
      case kDot: return ".";
      case kAlt:
        out = "(";
        for (size_t i = 0; i < children.size(); ++i) out += (i ? " | " : "") + children[i].gbnf();
        return out + ")";
      case kSeq:
        out = "(";
        for (size_t i = 0; i < children.size(); ++i) out += (i ? " " : "") + children[i].gbnf();
        return out + ")";
      case kRepeat: return "(" + children[0].gbnf() + ")" + quantifier();
    }
    return out;
  }

  std::string quantifier() const {
    if (min == 0 && max == -1) return "*";
    if (min == 1 && max == -1) return "+";
    if (min == 0 && max == 1) return "?";
    if (max == -1) return "{" + std::to_string(min) + ",}";
    if (min == max) return "{" + std::to_string(min) + "}";
    return "{" + std::to_string(min) + "," + std::to_string(max) + "}";
  }

  // Over the test alphabet, where é and ñ are the only non-ASCII characters.
  std::string regex() const {
    std::string out;
    switch (kind) {
      case kLiteral:
        for (const auto& u : literal) {
          for (const char c : u) out += hex(static_cast<unsigned char>(c));
        }
        return "(?:" + out + ")";
      case kClass: {
        std::vector<bool> in(128, false);
        for (const auto& [lo, hi] : ascii) {
          for (int c = lo; c <= hi; ++c) in[static_cast<size_t>(c)] = true;
        }
        std::vector<std::string> alts;
        std::string bracket;
        for (int c = 0; c < 128; ++c) {
          if (in[static_cast<size_t>(c)] != negated) bracket += hex(static_cast<unsigned char>(c));
        }
        if (!bracket.empty()) alts.push_back("[" + bracket + "]");
        if (e_acute != negated) alts.push_back("\\xc3\\xa9");
        if (n_tilde != negated) alts.push_back("\\xc3\\xb1");
        if (alts.empty()) return "(?!)";
        for (size_t i = 0; i < alts.size(); ++i) out += (i ? "|" : "") + alts[i];
        return "(?:" + out + ")";
      }
      case kDot: return "(?:[\\x00-\\x7f]|\\xc3\\xa9|\\xc3\\xb1)";
      case kAlt:
        for (size_t i = 0; i < children.size(); ++i) out += (i ? "|" : "") + children[i].regex();
        return "(?:" + out + ")";
      case kSeq:
        for (const Node& c : children) out += c.regex();
        return "(?:" + out + ")";
      case kRepeat: return "(?:" + children[0].regex() + ")" + quantifier();
    }
    return out;
  }

  // A random sentence of this node.
  void sample(std::mt19937& rng, std::string& out) const {
    switch (kind) {
      case kLiteral:
        for (const auto& u : literal) out += u;
        return;
      case kClass:
      case kDot:
        for (int tries = 0; tries < 200; ++tries) {
          const std::string& u = kUnits[rng() % kUnits.size()];
          if (std::regex_match(u, std::regex(regex()))) {
            out += u;
            return;
          }
        }
        out += "?";  // class holds no test unit: the string will not match
        return;
      case kAlt: children[rng() % children.size()].sample(rng, out); return;
      case kSeq:
        for (const Node& c : children) c.sample(rng, out);
        return;
      case kRepeat: {
        const int n = min + static_cast<int>(rng() % static_cast<unsigned>((max == -1 ? 3 : max - min) + 1));
        for (int i = 0; i < n; ++i) children[0].sample(rng, out);
        return;
      }
    }
  }
};

Node random_node(std::mt19937& rng, int depth) {
  Node n{};
  const unsigned pick = depth <= 0 ? rng() % 3 : rng() % 6;
  if (pick == 0) {
    n.kind = Node::kLiteral;
    const unsigned len = rng() % 4;
    for (unsigned i = 0; i < len; ++i) n.literal.push_back(kUnits[rng() % kUnits.size()]);
  } else if (pick == 1) {
    n.kind = Node::kClass;
    n.negated = rng() % 3 == 0;
    const unsigned ranges = 1 + rng() % 2;
    for (unsigned i = 0; i < ranges; ++i) {
      const int lo = std::string(" -0abcx")[rng() % 7];
      n.ascii.push_back({lo, lo + static_cast<int>(rng() % 3)});
    }
    n.e_acute = rng() % 3 == 0;
    n.n_tilde = rng() % 4 == 0;
  } else if (pick == 2) {
    n.kind = rng() % 4 == 0 ? Node::kDot : Node::kLiteral;
    if (n.kind == Node::kLiteral) n.literal.push_back(kUnits[rng() % kUnits.size()]);
  } else if (pick == 3) {
    n.kind = Node::kAlt;
    const unsigned k = 2 + rng() % 2;
    for (unsigned i = 0; i < k; ++i) n.children.push_back(random_node(rng, depth - 1));
  } else if (pick == 4) {
    n.kind = Node::kSeq;
    const unsigned k = 2 + rng() % 2;
    for (unsigned i = 0; i < k; ++i) n.children.push_back(random_node(rng, depth - 1));
  } else {
    n.kind = Node::kRepeat;
    n.children.push_back(random_node(rng, depth - 1));
    const int forms[][2] = {{0, -1}, {1, -1}, {0, 1}, {2, 3}, {0, 2}, {2, 2}, {1, 3}, {2, -1}};
    const auto& f = forms[rng() % 8];
    n.min = f[0];
    n.max = f[1];
    // x* with a nullable x is left recursion in GBNF (the parser refuses it): bound it.
    if (n.max == -1 && n.children[0].nullable()) n.max = n.min + 2;
  }
  return n;
}

std::string mutate(std::mt19937& rng, std::string s) {
  const unsigned what = rng() % 5;
  const size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
  if (what == 0) {
    s.insert(at, kUnits[rng() % kUnits.size()]);
  } else if (what == 1 && !s.empty()) {
    s.erase(at == s.size() ? at - 1 : at, 1);
  } else if (what == 2) {
    s.insert(at, kInvalid[rng() % kInvalid.size()]);
  } else if (what == 3) {
    s.resize(at);
  } else if (!s.empty()) {
    s[rng() % s.size()] = kUnits[rng() % 7][0];
  }
  return s;
}

// The code point `bytes` encodes if it is exactly one shortest-form UTF-8 scalar value.
std::optional<uint32_t> decode_one(const std::string& bytes) {
  if (bytes.empty()) return std::nullopt;
  const auto b0 = static_cast<unsigned char>(bytes[0]);
  const size_t len = b0 < 0x80 ? 1 : (b0 >> 5) == 6 ? 2 : (b0 >> 4) == 14 ? 3 : (b0 >> 3) == 30 ? 4 : 0;
  if (len == 0 || bytes.size() != len) return std::nullopt;
  uint32_t cp = len == 1 ? b0 : b0 & (0x7Fu >> len);
  for (size_t i = 1; i < len; ++i) {
    const auto b = static_cast<unsigned char>(bytes[i]);
    if ((b & 0xC0) != 0x80) return std::nullopt;
    cp = (cp << 6) | (b & 0x3F);
  }
  const uint32_t min_for_len[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < min_for_len[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return std::nullopt;
  return cp;
}

std::string u_escape(uint32_t cp) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "\\U%08X", cp);
  return buf;
}

}  // namespace

TEST_CASE("random regular grammars match std::regex", "[grammar]") {
  std::mt19937 rng(20240601);
  int grammars = 0, matches = 0, checks = 0;
  for (int round = 0; round < 300; ++round) {
    const Node ast = random_node(rng, 3);
    const std::string gbnf = "root ::= " + ast.gbnf();
    const std::regex re(ast.regex(), std::regex::ECMAScript);
    INFO("gbnf: " << gbnf);
    INFO("regex: " << ast.regex());
    const auto g = Grammar::parse(gbnf);
    ++grammars;
    for (int i = 0; i < 60; ++i) {
      std::string s;
      if (i % 3 != 2) ast.sample(rng, s);
      if (i % 3 != 0) s = mutate(rng, s);
      if (i % 10 == 9) {
        s.clear();
        for (unsigned k = rng() % 6; k > 0; --k) s += kUnits[rng() % kUnits.size()];
      }
      INFO("input: '" << s << "'");
      Matcher m(g);
      const bool ours = m.accept(s) && m.can_end();
      const bool expected = std::regex_match(s, re);
      REQUIRE(ours == expected);
      ++checks;
      if (expected) {
        ++matches;
        Matcher step(g);
        for (size_t k = 0; k < s.size(); ++k) REQUIRE(step.accept(s.substr(k, 1)));
        REQUIRE(step.can_end());
      }
    }
  }
  CHECK(grammars == 300);
  CHECK(matches > checks / 5);  // the inputs do exercise matches, not only refusals
}

TEST_CASE("UTF-8 classes accept exactly their code points", "[grammar]") {
  std::mt19937 rng(99);
  const std::vector<uint32_t> boundaries = {0,       0x7F,     0x80,     0x7FF,  0x800,   0xFFF,   0x1000,
                                            0xD7FF,  0xE000,   0xFFFD,   0xFFFF, 0x10000, 0x3FFFF, 0x40000,
                                            0xFFFFF, 0x100000, 0x10FFFF, 0x20,   0x3B1,   0x20AC,  0x1F600};
  auto random_cp = [&]() -> uint32_t {  // (one rng() per statement: operand order is unspecified)
    const bool near_boundary = rng() % 2;
    const uint32_t pick = rng();
    const uint32_t offset = rng() % 3;
    if (near_boundary) return boundaries[pick % boundaries.size()] + offset - 1;
    const uint32_t limits[] = {0x80, 0x800, 0x10000, 0x110000};
    return rng() % limits[pick % 4];
  };
  auto valid = [](uint32_t cp) { return cp <= 0x10FFFF && !(cp >= 0xD800 && cp <= 0xDFFF); };
  for (int round = 0; round < 150; ++round) {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;
    std::string gbnf = "root ::= [";
    const bool negated = rng() % 2;
    if (negated) gbnf += "^";
    for (unsigned k = 1 + rng() % 3; k > 0; --k) {
      uint32_t lo = random_cp(), hi = random_cp();
      while (!valid(lo)) lo = random_cp();
      while (!valid(hi)) hi = random_cp();
      if (lo > hi) std::swap(lo, hi);
      ranges.push_back({lo, hi});
      gbnf += u_escape(lo) + "-" + u_escape(hi);
    }
    gbnf += "]";
    INFO(gbnf);
    const auto g = Grammar::parse(gbnf);
    auto in_class = [&](uint32_t cp) {
      bool in = false;
      for (const auto& [lo, hi] : ranges) in = in || (cp >= lo && cp <= hi);
      return in != negated;
    };
    auto encode = [](uint32_t cp) {
      std::string bytes;
      slab::append_utf8(bytes, cp);
      return bytes;
    };
    auto check = [&](const std::string& bytes) {
      Matcher m(g);
      const bool ours = m.accept(bytes) && m.can_end();
      const auto cp = decode_one(bytes);
      INFO("bytes of size " << bytes.size() << " first " << (bytes.empty() ? 0 : static_cast<unsigned char>(bytes[0])));
      REQUIRE(ours == (cp.has_value() && in_class(*cp)));
    };
    for (int i = 0; i < 200; ++i) {
      const uint32_t cp = random_cp();
      if (valid(cp)) check(encode(cp));
    }
    for (const auto& [lo, hi] : ranges) {
      for (const uint32_t cp : {lo - 1, lo, hi, hi + 1}) {
        if (valid(cp)) check(encode(cp));
      }
    }
    // Overlongs, surrogates, above 10FFFF, truncations, stray continuation bytes, random bytes.
    for (const char* bad : {"\xC0\x80", "\xC1\xBF", "\xE0\x80\x80", "\xE0\x9F\xBF", "\xF0\x80\x80\x80",
                            "\xF0\x8F\xBF\xBF", "\xED\xA0\x80", "\xED\xBF\xBF", "\xF4\x90\x80\x80", "\xF5\x80\x80\x80",
                            "\xC3", "\xE2\x82", "\xF0\x9F\x98", "\x80", "\xBF"}) {
      check(bad);
    }
    for (int i = 0; i < 300; ++i) {
      std::string bytes;
      const unsigned len = 1 + rng() % 4;
      const unsigned char lead[] = {0x41, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEE, 0xF0, 0xF3, 0xF4, 0x80, 0xFF};
      bytes += static_cast<char>(rng() % 2 ? lead[rng() % 12] : rng() % 256);
      for (unsigned k = 1; k < len; ++k) bytes += static_cast<char>(rng() % 3 ? 0x80 + rng() % 64 : rng() % 256);
      check(bytes);
    }
  }
}
