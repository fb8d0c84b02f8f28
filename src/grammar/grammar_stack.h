#pragma once
// The matcher's nondeterministic pushdown state (llama.cpp's design): a set of stacks, each a
// terminal position on top of the return positions of the rules it is inside. Return frames are
// immutable and shared (a persistent linked list), so advancing or copying a state copies only
// the tops and pointers.
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "grammar/grammar_ir.h"

namespace slab::grammar {

struct Frame;
using FramePtr = std::shared_ptr<const Frame>;

// A return position; the chain's hash and depth make structural comparison cheap.
struct Frame {
  uint32_t pos;
  uint32_t depth;
  uint64_t hash;
  FramePtr parent;
};

// Frame positions with special meaning.
constexpr uint32_t kEscapePos = 0xFFFFFFFEu;  // the unknown rest of a stack (TokenMasker's contexts)

// Stack tops that are not grammar positions.
constexpr uint32_t kComplete = 0xFFFFFFFFu;  // the root rule has returned: the text is a sentence
constexpr uint32_t kEscaped = 0xFFFFFFFEu;   // returned into a kEscapePos frame

struct Stack {
  uint32_t top;
  FramePtr parent;  // null at the root
  bool terminal() const { return top < kEscaped; }
};

FramePtr make_frame(uint32_t pos, FramePtr parent);

// Hash-consing of frames within one computation: a frame made twice over the same parent is the
// same object, so equal stacks built in it are pointer-equal (TokenMasker memoizes transitions
// on that). Holds its frames alive.
class FrameInterner {
 public:
  FramePtr get(uint32_t pos, const FramePtr& parent);

 private:
  struct Key {
    uint32_t pos;
    const Frame* parent;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    size_t operator()(const Key& k) const {
      return std::hash<const void*>()(k.parent) ^ (size_t{k.pos} * 0x9E3779B97F4A7C15ull);
    }
  };
  std::unordered_map<Key, FramePtr, KeyHash> frames_;
};
bool same_stack(const Stack& a, const Stack& b);
uint64_t stack_hash(const Stack& s);

// The most stacks a state may hold: an ambiguous grammar that explodes past it is refused with
// GrammarError instead of slowing every step.
constexpr size_t kMaxStacks = 10000;

// Appends the stacks that position `pos` under `parent` expands to (tops are byte elements,
// kComplete or kEscaped). Not deduplicated.
void expand(const CompiledGrammar& g, uint32_t pos, const FramePtr& parent, std::vector<Stack>& out,
            FrameInterner* interner = nullptr);
// The stacks at the start of the root rule, deduplicated.
std::vector<Stack> initial_stacks(const CompiledGrammar& g);
// The stacks after byte `b` (empty: `b` is not allowed), deduplicated.
void advance(const CompiledGrammar& g, const std::vector<Stack>& in, uint8_t b, std::vector<Stack>& out,
             FrameInterner* interner = nullptr);
void deduplicate(std::vector<Stack>& stacks);

}  // namespace slab::grammar

namespace slab::grammar {
struct Matcher::State {
  std::vector<Stack> stacks;
};
}  // namespace slab::grammar
