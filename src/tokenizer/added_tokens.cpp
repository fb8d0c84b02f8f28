#include "tokenizer/added_tokens.h"

#include <cctype>

namespace slab::tok {
namespace {

bool is_space_byte(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

// ASCII letters, digits and '_', plus any non-ASCII byte (letters of other scripts).
bool is_word_byte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || std::isalnum(u) != 0 || c == '_';
}

}  // namespace

AddedTokenMatcher::AddedTokenMatcher(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  nodes_.emplace_back();
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const std::string& content = tokens_[i].content;
    if (content.empty()) continue;
    first_byte_[static_cast<unsigned char>(content[0])] = true;
    int32_t node = 0;
    for (const char c : content) {
      const auto byte = static_cast<uint8_t>(c);
      int32_t child = -1;
      for (const auto& [edge, target] : nodes_[static_cast<size_t>(node)].children) {
        if (edge == byte) child = target;
      }
      if (child < 0) {
        child = static_cast<int32_t>(nodes_.size());
        nodes_[static_cast<size_t>(node)].children.emplace_back(byte, child);
        nodes_.emplace_back();
      }
      node = child;
    }
    // Two entries with the same text: the first one listed wins.
    if (nodes_[static_cast<size_t>(node)].token < 0) nodes_[static_cast<size_t>(node)].token = static_cast<int32_t>(i);
  }
}

std::pair<int32_t, size_t> AddedTokenMatcher::longest_at(std::string_view text, size_t pos) const {
  std::pair<int32_t, size_t> best{-1, 0};
  int32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto byte = static_cast<uint8_t>(text[i]);
    int32_t next = -1;
    for (const auto& [edge, target] : nodes_[static_cast<size_t>(node)].children) {
      if (edge == byte) {
        next = target;
        break;
      }
    }
    if (next < 0) break;
    node = next;
    if (nodes_[static_cast<size_t>(node)].token >= 0) best = {nodes_[static_cast<size_t>(node)].token, i + 1 - pos};
  }
  return best;
}

std::vector<TextSegment> AddedTokenMatcher::split(std::string_view text) const {
  std::vector<TextSegment> segments;
  size_t plain_begin = 0;  // start of the plain text not yet emitted
  size_t pos = 0;
  while (pos < text.size()) {
    if (!first_byte_[static_cast<unsigned char>(text[pos])]) {
      ++pos;
      continue;
    }
    const auto [index, length] = longest_at(text, pos);
    if (index < 0) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[static_cast<size_t>(index)];
    size_t begin = pos, end = pos + length;
    if (tok.single_word &&
        ((begin > 0 && is_word_byte(text[begin - 1])) || (end < text.size() && is_word_byte(text[end])))) {
      ++pos;
      continue;
    }
    if (tok.lstrip) {
      while (begin > plain_begin && is_space_byte(text[begin - 1])) --begin;
    }
    if (tok.rstrip) {
      while (end < text.size() && is_space_byte(text[end])) ++end;
    }
    if (begin > plain_begin) segments.push_back({plain_begin, begin, -1});
    segments.push_back({begin, end, index});
    plain_begin = pos = end;
  }
  if (plain_begin < text.size()) segments.push_back({plain_begin, text.size(), -1});
  return segments;
}

}  // namespace slab::tok
