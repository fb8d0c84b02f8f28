#pragma once
// Requests whose output must follow a grammar (Request::grammar, GBNF text): the compiled
// grammars, shared by every request that sends the same text, and each sequence's place in its
// grammar with the step's mask of allowed tokens.
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "grammar/grammar.h"
#include "tokenizer/tokenizer.h"

namespace slab {

// A grammar compiled against the vocabulary: immutable, shared by sequences (and threads).
struct CompiledConstraint {
  std::shared_ptr<const grammar::Grammar> grammar;
  std::shared_ptr<const grammar::TokenMasker> masker;
  std::shared_ptr<const std::vector<std::string>> vocabulary;  // token id -> the bytes it adds
};

// The most recently used compiled grammars, by their text. An agent sends the same schema with
// every request; compiling it (and the masker's per-position tables, filled as sequences reach
// them) is paid once. Thread-safe: submit() compiles on the caller's thread.
class ConstraintCache {
 public:
  // tokenizer: where the vocabulary's bytes come from (null: constraints are refused).
  explicit ConstraintCache(const Tokenizer* tokenizer, size_t capacity = 64);
  // Throws std::invalid_argument (grammar::GrammarError) naming what is wrong with the grammar.
  CompiledConstraint get(const std::string& gbnf);

 private:
  const Tokenizer* tokenizer_;
  size_t capacity_;
  std::mutex mutex_;
  std::shared_ptr<const std::vector<std::string>> vocabulary_;     // loaded at the first constraint
  std::list<std::pair<std::string, CompiledConstraint>> entries_;  // most recently used first
  std::unordered_map<std::string_view, decltype(entries_)::iterator> index_;
};

// One sequence's place in its grammar.
class ConstrainedOutput {
 public:
  ConstrainedOutput(CompiledConstraint compiled, size_t model_vocab_size);

  // The tokens that may come next, as a bitset over the model's vocabulary: what the grammar
  // allows, and the end tokens (EOS, stop token ids) when the grammar may end here. All zero
  // means the grammar cannot go on with any token of this vocabulary.
  std::span<const uint64_t> next_mask(std::span<const int32_t> end_tokens);
  // Advances over a sampled token that next_mask allowed (end tokens are not text: no-op).
  // False (state unchanged) if the grammar refuses it, which only a masker bug can cause.
  bool advance(int32_t token);
  // The grammar is complete and nothing may extend it: generation ends here.
  bool must_end() const { return matcher_.must_end(); }

 private:
  CompiledConstraint compiled_;
  grammar::Matcher matcher_;
  size_t model_vocab_size_;
  std::vector<uint64_t> mask_;         // over the model's vocabulary
  std::vector<uint64_t> masker_mask_;  // over the tokenizer's
};

}  // namespace slab
