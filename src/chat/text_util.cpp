#include "chat/text_util.h"

namespace slab::chat {

std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  std::size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    int extra = b < 0x80 ? 0 : (b >> 5) == 6 ? 1 : (b >> 4) == 14 ? 2 : (b >> 3) == 30 ? 3 : -1;
    if (extra < 0 || i + static_cast<std::size_t>(extra) >= s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t c = extra == 0 ? b : (b & (0x3F >> extra));
    bool ok = true;
    for (int k = 1; k <= extra; ++k) {
      auto cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) {
        ok = false;
        break;
      }
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += extra + 1;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) utf8_append(out, c);
  return out;
}

std::int64_t utf8_length(std::string_view s) {
  std::int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

bool py_isspace(char32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || (c >= 0x1C && c <= 0x1F) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
char32_t ascii_upper(char32_t c) { return (c >= 'a' && c <= 'z') ? c - 32 : c; }
char32_t ascii_lower(char32_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }
bool py_isalpha(char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0xC0; }
bool py_isdigit(char32_t c) { return c >= '0' && c <= '9'; }

std::string py_strip(std::string_view s, const std::string* chars, bool left, bool right) {
  std::u32string cps = utf8_decode(s);
  std::u32string set = chars ? utf8_decode(*chars) : std::u32string();
  auto strip_it = [&](char32_t c) { return chars ? set.find(c) != std::u32string::npos : py_isspace(c); };
  std::size_t b = 0, e = cps.size();
  if (left)
    while (b < e && strip_it(cps[b])) ++b;
  if (right)
    while (e > b && strip_it(cps[e - 1])) --e;
  return utf8_encode(std::u32string_view(cps).substr(b, e - b));
}

std::vector<std::string> py_split(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    std::size_t pos = 0;
    while (maxsplit < 0 || static_cast<std::int64_t>(out.size()) < maxsplit) {
      std::size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  std::u32string cps = utf8_decode(s);
  std::size_t i = 0;
  while (true) {
    while (i < cps.size() && py_isspace(cps[i])) ++i;
    if (i >= cps.size()) break;
    if (maxsplit >= 0 && static_cast<std::int64_t>(out.size()) >= maxsplit) {
      std::size_t e = cps.size();
      while (e > i && py_isspace(cps[e - 1])) --e;
      out.push_back(utf8_encode(std::u32string_view(cps).substr(i, e - i)));
      break;
    }
    std::size_t j = i;
    while (j < cps.size() && !py_isspace(cps[j])) ++j;
    out.push_back(utf8_encode(std::u32string_view(cps).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> py_rsplit(std::string_view s, const std::string* sep, std::int64_t maxsplit) {
  if (maxsplit < 0) return py_split(s, sep, maxsplit);
  std::vector<std::string> rev;
  if (sep) {
    std::size_t end = s.size();
    while (static_cast<std::int64_t>(rev.size()) < maxsplit) {
      if (end < sep->size()) break;
      std::size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      rev.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    rev.emplace_back(s.substr(0, end));
  } else {
    std::u32string cps = utf8_decode(s);
    std::size_t e = cps.size();
    while (true) {
      while (e > 0 && py_isspace(cps[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<std::int64_t>(rev.size()) >= maxsplit) {
        std::size_t b = 0;
        while (b < e && py_isspace(cps[b])) ++b;
        rev.push_back(utf8_encode(std::u32string_view(cps).substr(b, e - b)));
        break;
      }
      std::size_t b = e;
      while (b > 0 && !py_isspace(cps[b - 1])) --b;
      rev.push_back(utf8_encode(std::u32string_view(cps).substr(b, e - b)));
      e = b;
    }
  }
  return {rev.rbegin(), rev.rend()};
}

std::string py_replace(std::string_view s, std::string_view old, std::string_view with, std::int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts `with` between code points and at both ends
    std::u32string cps = utf8_decode(s);
    std::int64_t done = 0;
    for (char32_t c : cps) {
      if (count < 0 || done < count) {
        out += with;
        ++done;
      }
      utf8_append(out, c);
    }
    if (count < 0 || done < count) out += with;
    return out;
  }
  std::size_t pos = 0;
  std::int64_t done = 0;
  while (count < 0 || done < count) {
    std::size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out += s.substr(pos, at - pos);
    out += with;
    pos = at + old.size();
    ++done;
  }
  out += s.substr(pos);
  return out;
}

// Case mapping for ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic: the scripts chat
// templates and their inputs realistically case-convert. Other code points map to themselves.
char32_t unicode_upper(char32_t c) {
  if (c < 0x80) return ascii_upper(c);
  if ((c >= 0xE0 && c <= 0xFE && c != 0xF7)) return c - 0x20;
  if (c == 0xFF) return 0x178;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = (c < 0x138) || (c > 0x148 && c < 0x178);
    if (odd_is_lower ? (c & 1) : !(c & 1)) return c - 1;
    return c;
  }
  if (c >= 0x3B1 && c <= 0x3C9 && c != 0x3C2) return c - 0x20;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 0x20;
  if (c >= 0x450 && c <= 0x45F) return c - 0x50;
  return c;
}

char32_t unicode_lower(char32_t c) {
  if (c < 0x80) return ascii_lower(c);
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 0x20;
  if (c == 0x178) return 0xFF;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    bool odd_is_lower = (c < 0x138) || (c > 0x148 && c < 0x178);
    if (odd_is_lower ? !(c & 1) : (c & 1)) return c + 1;
    return c;
  }
  if (c >= 0x391 && c <= 0x3A9 && c != 0x3A2) return c + 0x20;
  if (c >= 0x410 && c <= 0x42F) return c + 0x20;
  if (c >= 0x400 && c <= 0x40F) return c + 0x50;
  return c;
}

std::string py_upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) {
    if (c == 0xDF)
      out += "SS";  // Python: 'ß'.upper() == 'SS'
    else
      utf8_append(out, unicode_upper(c));
  }
  return out;
}

std::string py_lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : utf8_decode(s)) utf8_append(out, unicode_lower(c));
  return out;
}

std::string py_title(std::string_view s) {
  std::u32string cps = utf8_decode(s);
  bool prev_cased = false;
  for (char32_t& c : cps) {
    bool cased = py_isalpha(c);
    c = prev_cased ? unicode_lower(c) : unicode_upper(c);
    prev_cased = cased;
  }
  return utf8_encode(cps);
}

std::string py_capitalize(std::string_view s) {
  std::u32string cps = utf8_decode(s);
  for (std::size_t i = 0; i < cps.size(); ++i) cps[i] = i == 0 ? unicode_upper(cps[i]) : unicode_lower(cps[i]);
  return utf8_encode(cps);
}

std::vector<std::string> py_splitlines(std::string_view s) {
  std::vector<std::string> lines;
  std::u32string cps = utf8_decode(s);
  std::u32string cur;
  for (std::size_t i = 0; i < cps.size(); ++i) {
    char32_t c = cps[i];
    bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
               c == 0x2028 || c == 0x2029;
    if (!brk) {
      cur.push_back(c);
      continue;
    }
    if (c == '\r' && i + 1 < cps.size() && cps[i + 1] == '\n') ++i;
    lines.push_back(utf8_encode(cur));
    cur.clear();
  }
  if (!cur.empty()) lines.push_back(utf8_encode(cur));
  return lines;
}

std::int64_t py_count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return utf8_length(s) + 1;
  std::int64_t n = 0;
  for (std::size_t pos = s.find(sub); pos != std::string_view::npos; pos = s.find(sub, pos + sub.size())) ++n;
  return n;
}

std::int64_t py_find(std::string_view s, std::string_view sub, bool reverse) {
  std::size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return utf8_length(s.substr(0, at));
}

}  // namespace slab::chat
