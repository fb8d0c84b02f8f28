// TokenMasker: per-context token tables computed lazily and cached (XGrammar's adaptive token
// mask cache). A context is a stack's terminal position plus its nearest return frames; what
// lies below is unknown. Walking the byte-sorted vocabulary from a context (sharing the work of
// common prefixes) sorts each token into
//   accepted:  some path consumes all its bytes within the known frames (or returns into the
//              unknown part exactly at its last byte), so whatever lies below, it is allowed;
//   rejected:  every path dies within the known frames;
//   uncertain: a path returns into the unknown part with bytes left, so the full stack decides.
// Knowing more frames never takes a verdict back, it only settles uncertain tokens. So contexts
// are layered: the table of a position with d frames walks only the tokens its d-1 table left
// uncertain. The layers near the top are shared by every place a rule is used from (the inside
// of a JSON string, whichever property it belongs to), and a new call site of a known rule costs
// a walk over a few hundred tokens instead of the whole vocabulary.
// A step ORs the accepted tables of the state's stacks and checks only the uncertain tokens
// against their full stacks.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <unordered_map>

#include "grammar/grammar_stack.h"

namespace slab::grammar {
namespace {

// Return frames kept in the deepest layer of a context. More frames: fewer uncertain tokens
// (tokens that close several rules at once) at run time, more layers to compute once.
constexpr size_t kContextFrames = 6;
// Bytes of cached tables per masker before the cache is dropped and refilled. A table holds a
// bitset of the vocabulary (~19 KB at 151k tokens) only where many tokens are accepted (inside
// strings); most contexts accept a few hundred tokens at most and keep a list of ids.
constexpr size_t kMaxCacheBytes = size_t{32} << 20;

enum class Verdict : uint8_t { kRejected, kAccepted, kUncertain };

bool has_escaped(const std::vector<Stack>& stacks) {
  return std::any_of(stacks.begin(), stacks.end(), [](const Stack& s) { return s.top == kEscaped; });
}

// The stack sets reachable from one start by bytes, numbered as they are met, with memoized
// transitions (a lazily built DFA over this walk). Frames are interned, so equal stack sets
// are found by pointer identity: inside a JSON string, every plain character leads back to the
// same state, and a walk over the vocabulary costs one table lookup per byte.
class StateGraph {
 public:
  static constexpr uint32_t kDead = 0;
  static constexpr uint32_t kStart = 1;

  StateGraph(const CompiledGrammar& g, std::vector<Stack> start) : g_(g) {
    add({});
    add(std::move(start));
  }

  uint32_t next(uint32_t state, uint8_t b) {
    uint32_t& slot = transitions_[size_t{state} * 256 + b];
    if (slot != kUnknown) return slot;
    std::vector<Stack> out;
    advance(g_, states_[state], b, out, &interner_);
    const uint32_t id = out.empty() ? kDead : add(std::move(out));
    transitions_[size_t{state} * 256 + b] = id;  // (add() may have moved the table)
    return id;
  }

  bool escaped(uint32_t state) const { return escaped_[state]; }

 private:
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;
  using Key = std::vector<std::pair<uint32_t, const Frame*>>;
  struct KeyHash {
    size_t operator()(const Key& k) const {
      size_t h = k.size();
      for (const auto& [top, frame] : k) {
        h = (h ^ top) * 0x100000001b3ull;
        h = (h ^ reinterpret_cast<uintptr_t>(frame)) * 0x100000001b3ull;
      }
      return h;
    }
  };

  uint32_t add(std::vector<Stack> stacks) {
    Key key;
    for (const Stack& s : stacks) key.push_back({s.top, s.parent.get()});
    std::sort(key.begin(), key.end());
    const auto [it, inserted] = ids_.try_emplace(std::move(key), static_cast<uint32_t>(states_.size()));
    if (inserted) {
      escaped_.push_back(has_escaped(stacks));
      states_.push_back(std::move(stacks));
      transitions_.resize(states_.size() * 256, kUnknown);
    }
    return it->second;
  }

  const CompiledGrammar& g_;
  FrameInterner interner_;
  std::vector<std::vector<Stack>> states_;
  std::vector<uint8_t> escaped_;
  std::vector<uint32_t> transitions_;  // state * 256 + byte -> state
  std::unordered_map<Key, uint32_t, KeyHash> ids_;
};

// The vocabulary's non-empty tokens sorted by their bytes and stored back to back, so that a
// walk reads memory in order (walking ids into the tokenizer's own strings missed the cache on
// nearly every token). Tokens are named by rank in this order.
struct SortedVocabulary {
  std::string bytes;              // the tokens, concatenated in sorted order
  std::vector<uint32_t> offsets;  // rank r: bytes[offsets[r], offsets[r + 1])
  std::vector<uint32_t> ids;      // rank -> token id
  std::vector<uint32_t> ranks;    // 0, 1, ..., size - 1: every token, as a walk's input

  explicit SortedVocabulary(const std::vector<std::string>& tokens) {
    for (uint32_t t = 0; t < tokens.size(); ++t) {
      if (!tokens[t].empty()) ids.push_back(t);
    }
    std::sort(ids.begin(), ids.end(), [&](uint32_t a, uint32_t b) { return tokens[a] < tokens[b]; });
    offsets.reserve(ids.size() + 1);
    for (const uint32_t id : ids) {
      offsets.push_back(static_cast<uint32_t>(bytes.size()));
      bytes += tokens[id];
    }
    offsets.push_back(static_cast<uint32_t>(bytes.size()));
    ranks.resize(ids.size());
    for (uint32_t r = 0; r < ranks.size(); ++r) ranks[r] = r;
  }
  std::string_view token(uint32_t rank) const {
    return std::string_view(bytes).substr(offsets[rank], offsets[rank + 1] - offsets[rank]);
  }
};

// Calls verdict(rank, Verdict) for each of `ranks` (ascending) whose token is accepted or
// uncertain when matched from `start` (rejected ones are skipped silently); a prefix shared
// with the previous token reuses that token's states, and a prefix that dies settles every
// following token that shares it (found by binary search where they are all rejected: at a
// literal most of the vocabulary dies at its first byte).
template <class OnVerdict>
void walk_tokens(const CompiledGrammar& g, const SortedVocabulary& vocab, std::span<const uint32_t> ranks,
                 std::vector<Stack> start, OnVerdict&& verdict) {
  StateGraph graph(g, std::move(start));
  std::vector<uint32_t> states(1, StateGraph::kStart);
  std::vector<uint8_t> escaped(1, graph.escaped(StateGraph::kStart));  // on the path, up to here
  size_t valid = 0;  // states[0..valid] hold the previous token's prefixes
  std::string_view previous;
  size_t i = 0;
  while (i < ranks.size()) {
    const std::string_view token = vocab.token(ranks[i]);
    size_t shared = 0;
    const size_t limit = std::min({previous.size(), token.size(), valid});
    while (shared < limit && previous[shared] == token[shared]) ++shared;
    if (states.size() < token.size() + 1) {
      states.resize(token.size() + 1);
      escaped.resize(token.size() + 1);
    }
    size_t k = shared;
    bool dead = states[k] == StateGraph::kDead;
    while (!dead && k < token.size()) {
      states[k + 1] = graph.next(states[k], static_cast<uint8_t>(token[k]));
      ++k;
      escaped[k] = escaped[k - 1] || graph.escaped(states[k]);
      dead = states[k] == StateGraph::kDead;
    }
    valid = k;
    previous = token;
    if (!dead) {
      verdict(ranks[i++], Verdict::kAccepted);
      continue;
    }
    // Dead after k bytes: so is every following token with the same first k bytes.
    const std::string_view dead_prefix = token.substr(0, k);
    const auto shares_prefix = [&](uint32_t rank) { return vocab.token(rank).starts_with(dead_prefix); };
    if (!escaped[k - 1]) {
      i = static_cast<size_t>(
          std::partition_point(ranks.begin() + static_cast<std::ptrdiff_t>(i) + 1, ranks.end(), shares_prefix) -
          ranks.begin());
      continue;
    }
    verdict(ranks[i++], Verdict::kUncertain);
    while (i < ranks.size() && shares_prefix(ranks[i])) verdict(ranks[i++], Verdict::kUncertain);
  }
}

struct ContextKey {
  std::vector<uint32_t> positions;  // top, then return frames nearest first, then 1 if truncated
  bool operator==(const ContextKey&) const = default;
};

struct ContextKeyHash {
  size_t operator()(const ContextKey& k) const {
    uint64_t h = 0xcbf29ce484222325ull;
    for (const uint32_t p : k.positions) h = (h ^ p) * 0x100000001b3ull;
    return static_cast<size_t>(h);
  }
};

// A context's verdicts beyond those of the same position with one frame fewer (`coarser`):
// the tokens accepted here are coarser's (and its coarser's...) plus accepted_*.
struct ContextTable {
  std::shared_ptr<const ContextTable> coarser;
  std::vector<uint64_t> accepted_bits;  // bitset over the vocabulary, or empty: see accepted_ids
  std::vector<uint32_t> accepted_ids;   // where fewer than one token in 32 is accepted
  std::vector<uint32_t> uncertain;      // ranks in the SortedVocabulary, ascending
  size_t bytes() const {
    return sizeof(*this) + accepted_bits.size() * 8 + (accepted_ids.size() + uncertain.size()) * 4;
  }
};

// The context of a stack with at most `frames` return frames. Equal for every depth past the
// stack's own (then nothing is unknown).
ContextKey context_of(const Stack& s, size_t frames) {
  ContextKey key;
  key.positions.push_back(s.top);
  const Frame* f = s.parent.get();
  for (size_t n = 0; f && n < frames; ++n, f = f->parent.get()) key.positions.push_back(f->pos);
  key.positions.push_back(f ? 1 : 0);
  return key;
}

// The stack a context stands for, with an escape frame in place of the unknown rest.
Stack context_stack(const ContextKey& key) {
  FramePtr base = key.positions.back() ? make_frame(kEscapePos, nullptr) : nullptr;
  for (size_t i = key.positions.size() - 2; i >= 1; --i) base = make_frame(key.positions[i], base);
  return {key.positions[0], base};
}

}  // namespace

struct TokenMasker::Impl {
  std::shared_ptr<const Grammar> grammar;
  size_t vocab_size = 0;
  size_t words = 0;
  std::unique_ptr<const SortedVocabulary> sorted;
  mutable std::shared_mutex mutex;
  mutable std::unordered_map<ContextKey, std::shared_ptr<const ContextTable>, ContextKeyHash> cache;
  mutable size_t cache_bytes = 0;

  // The table of stack s's context with kContextFrames frames, built layer by layer.
  std::shared_ptr<const ContextTable> table_for(const Stack& s) const { return layer(s, kContextFrames); }

  std::shared_ptr<const ContextTable> layer(const Stack& s, size_t frames) const {
    ContextKey key = context_of(s, frames);
    {
      std::shared_lock lock(mutex);
      if (const auto it = cache.find(key); it != cache.end()) return it->second;
    }
    std::shared_ptr<const ContextTable> coarser;
    if (frames > 0) {
      coarser = layer(s, frames - 1);
      // Nothing left to settle (as when the whole stack is known): the coarser table is this one.
      if (coarser->uncertain.empty()) return remember(std::move(key), coarser, /*alias=*/true);
    }
    // Computed outside the lock: two threads may both compute a new context; one result is kept.
    auto table = std::make_shared<ContextTable>();
    table->coarser = coarser;
    const std::span<const uint32_t> candidates = coarser ? coarser->uncertain : sorted->ranks;
    walk_tokens(grammar->compiled(), *sorted, candidates, {context_stack(key)}, [&](uint32_t rank, Verdict v) {
      if (v == Verdict::kAccepted) {
        table->accepted_ids.push_back(sorted->ids[rank]);
      } else {
        table->uncertain.push_back(rank);
      }
    });
    if (table->accepted_ids.size() * 32 >= words * 64) {
      table->accepted_bits.assign(words, 0);
      for (const uint32_t id : table->accepted_ids) table->accepted_bits[id >> 6] |= uint64_t{1} << (id & 63);
      table->accepted_ids = {};
    }
    table->accepted_ids.shrink_to_fit();
    table->uncertain.shrink_to_fit();
    return remember(std::move(key), std::move(table), /*alias=*/false);
  }

  // alias: the table is cached under another key too (its bytes are counted there).
  std::shared_ptr<const ContextTable> remember(ContextKey key, std::shared_ptr<const ContextTable> table,
                                               bool alias) const {
    const size_t bytes = sizeof(ContextKey) + key.positions.size() * 4 + (alias ? 0 : table->bytes());
    std::unique_lock lock(mutex);
    if (cache_bytes + bytes > kMaxCacheBytes) {
      cache.clear();  // tables in use stay alive through their holders' pointers
      cache_bytes = 0;
    }
    const auto [it, inserted] = cache.try_emplace(std::move(key), std::move(table));
    if (inserted) cache_bytes += bytes;
    return it->second;
  }
};

TokenMasker::TokenMasker(std::shared_ptr<const Grammar> grammar,
                         std::shared_ptr<const std::vector<std::string>> token_bytes)
    : impl_(std::make_unique<Impl>()) {
  impl_->grammar = std::move(grammar);
  impl_->vocab_size = token_bytes->size();
  impl_->words = (impl_->vocab_size + 63) / 64;
  impl_->sorted = std::make_unique<const SortedVocabulary>(*token_bytes);
}

TokenMasker::~TokenMasker() = default;

size_t TokenMasker::vocab_size() const { return impl_->vocab_size; }

void TokenMasker::fill_mask(const Matcher& matcher, std::span<uint64_t> mask) const {
  if (mask.size() != impl_->words) throw std::invalid_argument("TokenMasker::fill_mask: mask size mismatch");
  if (&matcher.grammar() != impl_->grammar.get()) {
    throw std::invalid_argument("TokenMasker::fill_mask: the matcher runs another grammar");
  }
  std::fill(mask.begin(), mask.end(), 0);
  const CompiledGrammar& g = impl_->grammar->compiled();
  std::vector<const ContextTable*> ored;                  // each layer once
  std::vector<std::shared_ptr<const ContextTable>> held;  // the cache may be dropped meanwhile
  for (const Stack& s : matcher.state().stacks) {
    if (!s.terminal()) continue;
    auto table = impl_->table_for(s);
    for (const ContextTable* t = table.get(); t; t = t->coarser.get()) {
      if (std::find(ored.begin(), ored.end(), t) != ored.end()) break;  // so were its coarser layers
      ored.push_back(t);
      if (!t->accepted_bits.empty()) {
        const uint64_t* src = t->accepted_bits.data();
        uint64_t* dst = mask.data();
        for (size_t w = 0; w < impl_->words; ++w) dst[w] |= src[w];
      }
      for (const uint32_t id : t->accepted_ids) mask[id >> 6] |= uint64_t{1} << (id & 63);
    }
    if (!table->uncertain.empty()) {
      const SortedVocabulary& sorted = *impl_->sorted;
      walk_tokens(g, sorted, table->uncertain, {s}, [&](uint32_t rank, Verdict v) {
        if (v == Verdict::kAccepted) mask[sorted.ids[rank] >> 6] |= uint64_t{1} << (sorted.ids[rank] & 63);
      });
    }
    held.push_back(std::move(table));
  }
}

}  // namespace slab::grammar
