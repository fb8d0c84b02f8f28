#pragma once
// Constrained decoding: a context-free grammar (GBNF text, llama.cpp's notation) compiled once,
// a per-sequence Matcher that advances byte by byte, and a TokenMasker that turns a Matcher's
// state into the set of vocabulary tokens that may come next. Plain C++: no engine, tokenizer or
// tensor types; a vocabulary is a list of byte strings.
//
// The interface other modules build on (json_schema.h emits GBNF for this parser; the engine
// holds one Matcher per constrained sequence and asks the TokenMasker for each step's mask).
#include <cstdint>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace slab::grammar {

// A grammar or constraint the request got wrong: the message names the rule, position or
// feature (the server answers 400 with it).
struct GrammarError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct CompiledGrammar;  // rules flattened to byte-range elements (grammar_ir.h)

// A parsed GBNF grammar, immutable and shared by every request that uses it.
//   rule ::= alternatives        `root` is the start rule unless another is named
//   "literal" with \n \r \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes; [a-z] [^"\\] classes; `.`;
//   ( ) grouping, | alternation, * + ? {m} {m,} {m,n} repetition; # comments.
// Matching is over UTF-8 bytes: classes and `.` are compiled to byte sequences that accept
// exactly the UTF-8 encodings of the code points they name. Refused with GrammarError: syntax
// errors, undefined rules, left recursion, rules that can never match.
class Grammar {
 public:
  static std::shared_ptr<const Grammar> parse(std::string_view gbnf, std::string_view root = "root");
  const CompiledGrammar& compiled() const { return *compiled_; }
  ~Grammar();

 private:
  explicit Grammar(std::unique_ptr<CompiledGrammar> compiled);
  std::unique_ptr<CompiledGrammar> compiled_;
};

// Where one sequence stands in a grammar. Copyable (cheap enough to fork per candidate).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const Grammar> grammar);
  // Advances over the bytes if the grammar allows all of them; otherwise returns false and the
  // state is unchanged. Throws GrammarError (state unchanged) where an ambiguous grammar would
  // need more than 10,000 parse stacks; can_accept and TokenMasker::fill_mask may throw it too.
  bool accept(std::string_view bytes);
  bool can_accept(std::string_view bytes) const;
  // The text so far is a complete sentence of the grammar (end of generation is allowed here).
  bool can_end() const;
  // No more bytes can follow (complete, and nothing may extend it).
  bool must_end() const;

  // Internal state, read by TokenMasker.
  struct State;
  const State& state() const { return *state_; }
  const Grammar& grammar() const { return *grammar_; }
  Matcher(const Matcher&);
  Matcher& operator=(const Matcher&);
  Matcher(Matcher&&) noexcept;
  Matcher& operator=(Matcher&&) noexcept;
  ~Matcher();

 private:
  std::shared_ptr<const Grammar> grammar_;
  std::unique_ptr<State> state_;
};

// The tokens allowed after a Matcher's state, as a bitset over the vocabulary (bit t of word
// t / 64). One TokenMasker per (grammar, vocabulary): it caches per-grammar-position tables
// (the tokens a position accepts or rejects whatever surrounds it) so that a step costs a few
// bitset ORs plus a check of the few context-dependent tokens. Thread-safe (fill_mask may be
// called from several threads; each Matcher belongs to one thread at a time). Memory: a sorted
// copy of the vocabulary's bytes (+12 bytes a token) plus cached tables bounded at 32 MiB; the
// first mask at a new grammar position walks the vocabulary (up to milliseconds), later ones
// take microseconds.
class TokenMasker {
 public:
  // token_bytes[t]: the bytes token t adds to the text; empty = never allowed by a grammar
  // (special and control tokens; the caller allows EOS itself where can_end()).
  TokenMasker(std::shared_ptr<const Grammar> grammar, std::shared_ptr<const std::vector<std::string>> token_bytes);
  ~TokenMasker();
  // mask.size() == (vocab + 63) / 64; overwritten.
  void fill_mask(const Matcher& matcher, std::span<uint64_t> mask) const;
  size_t vocab_size() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace slab::grammar
