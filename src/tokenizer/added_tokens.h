#pragma once
// Added tokens (special tokens like "<|im_start|>" and extra pieces like "<think>"): found in the
// text before normalisation and BPE, leftmost-longest, as Hugging Face does.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slab::tok {

struct AddedToken {
  std::string content;
  int32_t id = -1;
  bool special = false;
  bool lstrip = false;       // swallows whitespace on its left
  bool rstrip = false;       // swallows whitespace on its right
  bool single_word = false;  // only matches where it is not part of a longer word
  bool normalized = false;   // matched in normalised text rather than the raw input
};

// A run of text: either a matched added token (token >= 0, its index in the matcher) or plain
// text [begin, end) to be tokenised normally.
struct TextSegment {
  size_t begin;
  size_t end;
  int32_t token;
};

// Finds a fixed set of added tokens in text with a byte trie.
class AddedTokenMatcher {
 public:
  explicit AddedTokenMatcher(std::vector<AddedToken> tokens);

  bool empty() const { return tokens_.empty(); }
  const AddedToken& token(int32_t index) const { return tokens_[static_cast<size_t>(index)]; }

  // Cuts `text` into plain-text and token segments covering it in order (stripped whitespace
  // of lstrip/rstrip tokens belongs to the token segment). Plain segments are never empty.
  std::vector<TextSegment> split(std::string_view text) const;

 private:
  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;
    int32_t token = -1;
  };
  // Index of the longest token starting at text[pos] and its length, or -1.
  std::pair<int32_t, size_t> longest_at(std::string_view text, size_t pos) const;

  std::vector<AddedToken> tokens_;
  std::vector<Node> nodes_;
  std::array<bool, 256> first_byte_{};
};

}  // namespace slab::tok
