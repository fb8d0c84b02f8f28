#include "engine/output_constraint.h"

#include <algorithm>
#include <stdexcept>

namespace slab {

ConstraintCache::ConstraintCache(const Tokenizer* tokenizer, size_t capacity)
    : tokenizer_(tokenizer), capacity_(capacity) {}

CompiledConstraint ConstraintCache::get(const std::string& gbnf) {
  if (tokenizer_ == nullptr) {
    throw std::invalid_argument("output constraints need the model's tokenizer, and this engine has none");
  }
  {
    std::lock_guard lock(mutex_);
    if (auto it = index_.find(gbnf); it != index_.end()) {
      entries_.splice(entries_.begin(), entries_, it->second);
      return it->second->second;
    }
    if (!vocabulary_) vocabulary_ = tokenizer_->vocabulary_bytes();
  }
  // Compiled outside the lock: a large grammar must not hold up requests that hit the cache.
  CompiledConstraint compiled;
  compiled.grammar = grammar::Grammar::parse(gbnf);
  compiled.vocabulary = vocabulary_;
  compiled.masker = std::make_shared<const grammar::TokenMasker>(compiled.grammar, vocabulary_);

  std::lock_guard lock(mutex_);
  if (auto it = index_.find(gbnf); it != index_.end()) return it->second->second;  // compiled meanwhile
  entries_.emplace_front(gbnf, compiled);
  index_.emplace(entries_.front().first, entries_.begin());
  while (entries_.size() > capacity_) {
    index_.erase(entries_.back().first);
    entries_.pop_back();
  }
  return compiled;
}

ConstrainedOutput::ConstrainedOutput(CompiledConstraint compiled, size_t model_vocab_size)
    : compiled_(std::move(compiled)), matcher_(compiled_.grammar), model_vocab_size_(model_vocab_size),
      mask_((model_vocab_size + 63) / 64, 0) {}

std::span<const uint64_t> ConstrainedOutput::next_mask(std::span<const int32_t> end_tokens) {
  // The masker covers the tokenizer's vocabulary, which may be shorter (a model's embedding is
  // often padded) or, in a broken checkpoint, longer than the model's: copy what overlaps.
  masker_mask_.resize((compiled_.masker->vocab_size() + 63) / 64);
  compiled_.masker->fill_mask(matcher_, masker_mask_);
  std::fill(mask_.begin(), mask_.end(), 0);
  std::copy_n(masker_mask_.begin(), std::min(masker_mask_.size(), mask_.size()), mask_.begin());
  if (model_vocab_size_ % 64 != 0) mask_.back() &= (uint64_t{1} << (model_vocab_size_ % 64)) - 1;
  if (matcher_.can_end()) {
    for (int32_t t : end_tokens) {
      if (t >= 0 && static_cast<size_t>(t) < model_vocab_size_)
        mask_[static_cast<size_t>(t) / 64] |= uint64_t{1} << (t % 64);
    }
  }
  return mask_;
}

bool ConstrainedOutput::advance(int32_t token) {
  const std::vector<std::string>& vocabulary = *compiled_.vocabulary;
  if (token < 0 || static_cast<size_t>(token) >= vocabulary.size() || vocabulary[static_cast<size_t>(token)].empty())
    return true;  // an end token: not text
  return matcher_.accept(vocabulary[static_cast<size_t>(token)]);
}

}  // namespace slab
