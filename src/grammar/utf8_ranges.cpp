#include "grammar/utf8_ranges.h"

#include <algorithm>
#include <map>

namespace slab::grammar {

std::vector<ByteRangeSequence> utf8_sequences(uint32_t lo, uint32_t hi) {
  std::vector<ByteRangeSequence> out;
  std::vector<CodePointRange> todo{{lo, std::min(hi, kMaxCodePoint)}};
  while (!todo.empty()) {
    auto [a, b] = todo.back();
    todo.pop_back();
    if (a > b) continue;
    if (a < 0xE000 && b > 0xD7FF) {  // cut the surrogates out
      if (a < 0xD800) todo.push_back({a, 0xD7FF});
      if (b > 0xDFFF) todo.push_back({0xE000, b});
      continue;
    }
    bool split = false;
    for (uint32_t max : {0x7Fu, 0x7FFu, 0xFFFFu}) {  // one encoded length per range
      if (a <= max && max < b) {
        todo.push_back({a, max});
        todo.push_back({max + 1, b});
        split = true;
        break;
      }
    }
    if (split) continue;
    if (b <= 0x7F) {
      out.push_back({{static_cast<uint8_t>(a), static_cast<uint8_t>(b)}});
      continue;
    }
    // Each continuation position must span either a full 80-BF or share all higher bits.
    for (int i = 1; i < 4 && !split; ++i) {
      const uint32_t m = (1u << (6 * i)) - 1;
      if ((a & ~m) != (b & ~m)) {
        if ((a & m) != 0) {
          todo.push_back({a, a | m});
          todo.push_back({(a | m) + 1, b});
          split = true;
        } else if ((b & m) != m) {
          todo.push_back({a, (b & ~m) - 1});
          todo.push_back({b & ~m, b});
          split = true;
        }
      }
    }
    if (split) continue;
    std::string ea, eb;
    append_utf8(ea, a);
    append_utf8(eb, b);
    ByteRangeSequence seq;
    for (size_t i = 0; i < ea.size(); ++i) seq.push_back({static_cast<uint8_t>(ea[i]), static_cast<uint8_t>(eb[i])});
    out.push_back(std::move(seq));
  }
  return out;
}

std::vector<CodePointRange> normalize_ranges(std::vector<CodePointRange> ranges, bool negate) {
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodePointRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (!negate) return merged;
  std::vector<CodePointRange> complement;
  uint32_t next = 0;
  for (const auto& r : merged) {
    if (r.first > next) complement.push_back({next, r.first - 1});
    next = r.second + 1;
  }
  if (next <= kMaxCodePoint) complement.push_back({next, kMaxCodePoint});
  return complement;
}

std::vector<std::vector<ByteSet>> class_alternatives(const std::vector<CodePointRange>& normalized) {
  ByteSet single;
  // (length, continuation ranges) -> union of first bytes
  std::map<ByteRangeSequence, ByteSet> by_tail;
  for (const auto& [lo, hi] : normalized) {
    for (const auto& seq : utf8_sequences(lo, hi)) {
      if (seq.size() == 1) {
        single.set_range(seq[0].first, seq[0].second);
        continue;
      }
      ByteRangeSequence tail(seq.begin() + 1, seq.end());
      by_tail[tail].set_range(seq[0].first, seq[0].second);
    }
  }
  std::vector<std::vector<ByteSet>> out;
  if (!single.empty()) out.push_back({single});
  for (const auto& [tail, first] : by_tail) {
    std::vector<ByteSet> alt{first};
    for (const auto& [lo, hi] : tail) {
      ByteSet s;
      s.set_range(lo, hi);
      alt.push_back(s);
    }
    out.push_back(std::move(alt));
  }
  return out;
}

}  // namespace slab::grammar
