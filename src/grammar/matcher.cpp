// Matcher: the stack-set state advanced byte by byte. Expansion is eager (every stack's top is a
// byte element or the end), tail calls reuse the caller's frame (so right recursion such as
// x* ::= x x* | "" keeps stacks shallow), and each step's stacks are deduplicated.
#include <algorithm>
#include <unordered_set>

#include "grammar/grammar_stack.h"

namespace slab::grammar {

FramePtr make_frame(uint32_t pos, FramePtr parent) {
  uint64_t h = parent ? parent->hash : 0x9E3779B97F4A7C15ull;
  h = (h ^ pos) * 0x100000001B3ull;
  h ^= h >> 29;
  const uint32_t depth = parent ? parent->depth + 1 : 1;
  return std::make_shared<const Frame>(Frame{pos, depth, h, std::move(parent)});
}

FramePtr FrameInterner::get(uint32_t pos, const FramePtr& parent) {
  const auto [it, inserted] = frames_.try_emplace(Key{pos, parent.get()});
  if (inserted) it->second = make_frame(pos, parent);
  return it->second;
}

namespace {

bool same_frames(const Frame* a, const Frame* b) {
  while (a != b) {
    if (!a || !b || a->hash != b->hash || a->pos != b->pos || a->depth != b->depth) return false;
    a = a->parent.get();
    b = b->parent.get();
  }
  return true;
}

// Bounds the recursion of expand() through nullable rules returning into deep stacks.
constexpr int kMaxExpansionDepth = 2000;

void expand_at(const CompiledGrammar& g, uint32_t pos, FramePtr parent, std::vector<Stack>& out, int depth,
               FrameInterner* interner) {
  if (depth > kMaxExpansionDepth) throw GrammarError("grammar: nesting too deep to expand");
  while (true) {
    const Element& e = g.elements[pos];
    if (e.kind == ElementKind::kBytes) {
      out.push_back({pos, std::move(parent)});
      break;
    }
    if (e.kind == ElementKind::kEnd) {
      if (!parent) {
        out.push_back({kComplete, nullptr});
        break;
      }
      if (parent->pos == kEscapePos) {
        out.push_back({kEscaped, nullptr});
        break;
      }
      pos = parent->pos;
      parent = parent->parent;
      continue;
    }
    // A rule: its continuation becomes a frame unless nothing follows (a tail call).
    const FramePtr frame = g.elements[pos + 1].kind == ElementKind::kEnd ? std::move(parent)
                           : interner                                    ? interner->get(pos + 1, parent)
                                                                         : make_frame(pos + 1, std::move(parent));
    for (const uint32_t alt : g.rules[e.arg].alternatives) expand_at(g, alt, frame, out, depth + 1, interner);
    break;
  }
  if (out.size() > kMaxStacks * 4) {
    throw GrammarError("grammar is too ambiguous: more than " + std::to_string(kMaxStacks) + " parse stacks");
  }
}

}  // namespace

bool same_stack(const Stack& a, const Stack& b) {
  return a.top == b.top && same_frames(a.parent.get(), b.parent.get());
}

uint64_t stack_hash(const Stack& s) {
  const uint64_t h = s.parent ? s.parent->hash : 0;
  return (h ^ (uint64_t{s.top} * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
}

void expand(const CompiledGrammar& g, uint32_t pos, const FramePtr& parent, std::vector<Stack>& out,
            FrameInterner* interner) {
  expand_at(g, pos, parent, out, 0, interner);
}

void deduplicate(std::vector<Stack>& stacks) {
  if (stacks.size() < 2) return;
  if (stacks.size() <= 24) {
    size_t kept = 0;
    for (size_t i = 0; i < stacks.size(); ++i) {
      bool seen = false;
      for (size_t j = 0; j < kept && !seen; ++j) seen = same_stack(stacks[j], stacks[i]);
      if (!seen) {
        if (kept != i) stacks[kept] = std::move(stacks[i]);
        ++kept;
      }
    }
    stacks.resize(kept);
  } else {
    struct Hash {
      size_t operator()(const Stack* s) const { return stack_hash(*s); }
    };
    struct Eq {
      bool operator()(const Stack* a, const Stack* b) const { return same_stack(*a, *b); }
    };
    std::unordered_set<const Stack*, Hash, Eq> seen;
    std::vector<Stack> kept;
    kept.reserve(stacks.size());
    for (const Stack& s : stacks) {
      if (seen.insert(&s).second) kept.push_back(s);
    }
    stacks = std::move(kept);
  }
  if (stacks.size() > kMaxStacks) {
    throw GrammarError("grammar is too ambiguous: more than " + std::to_string(kMaxStacks) + " parse stacks");
  }
}

std::vector<Stack> initial_stacks(const CompiledGrammar& g) {
  std::vector<Stack> out;
  for (const uint32_t alt : g.rules[g.root].alternatives) expand(g, alt, nullptr, out);
  deduplicate(out);
  return out;
}

void advance(const CompiledGrammar& g, const std::vector<Stack>& in, uint8_t b, std::vector<Stack>& out,
             FrameInterner* interner) {
  out.clear();
  for (const Stack& s : in) {
    if (s.terminal() && g.bytes_at(s.top).test(b)) expand(g, s.top + 1, s.parent, out, interner);
  }
  deduplicate(out);
}

Matcher::Matcher(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)), state_(std::make_unique<State>()) {
  state_->stacks = initial_stacks(grammar_->compiled());
}

Matcher::Matcher(const Matcher& other) : grammar_(other.grammar_), state_(std::make_unique<State>(*other.state_)) {}
Matcher& Matcher::operator=(const Matcher& other) {
  if (this != &other) {
    grammar_ = other.grammar_;
    state_ = std::make_unique<State>(*other.state_);
  }
  return *this;
}
Matcher::Matcher(Matcher&&) noexcept = default;
Matcher& Matcher::operator=(Matcher&&) noexcept = default;
Matcher::~Matcher() = default;

bool Matcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  std::vector<Stack> current = state_->stacks, next;
  for (const char c : bytes) {
    advance(grammar_->compiled(), current, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    std::swap(current, next);
  }
  state_->stacks = std::move(current);
  return true;
}

bool Matcher::can_accept(std::string_view bytes) const {
  if (bytes.empty()) return true;
  std::vector<Stack> current, next;
  const std::vector<Stack>* from = &state_->stacks;
  for (const char c : bytes) {
    advance(grammar_->compiled(), *from, static_cast<uint8_t>(c), next);
    if (next.empty()) return false;
    std::swap(current, next);
    from = &current;
  }
  return true;
}

bool Matcher::can_end() const {
  return std::any_of(state_->stacks.begin(), state_->stacks.end(), [](const Stack& s) { return s.top == kComplete; });
}

bool Matcher::must_end() const {
  return !state_->stacks.empty() &&
         std::all_of(state_->stacks.begin(), state_->stacks.end(), [](const Stack& s) { return s.top == kComplete; });
}

}  // namespace slab::grammar
