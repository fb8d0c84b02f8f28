#pragma once
// One request's life inside the engine: its tokens (prompt, then output), how many of them are
// in the KV cache, and the per-request state that turns tokens into output events.
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "engine/output_constraint.h"
#include "engine/request.h"
#include "engine/sampler.h"
#include "engine/stop_strings.h"
#include "tokenizer/tokenizer.h"

namespace slab {

enum class SequenceStatus { waiting, running, finished };

struct Sequence {
  Sequence(int64_t id, Request request, std::shared_ptr<RequestStream> stream, const Tokenizer* tokenizer,
           uint64_t arrival);

  int64_t id;
  Request request;
  std::shared_ptr<RequestStream> stream;
  uint64_t arrival;  // submission order

  std::vector<int32_t> tokens;  // prompt then generated tokens
  int prompt_len;
  // Tokens whose K/V are in the cache. The sequence needs a forward pass over
  // tokens[num_computed ..]; when that reaches the end, a new token is sampled.
  int num_computed = 0;
  // Tokens the sequence held when the first chunk of its current cache ran (the scheduler's
  // recompute_past_length compares it).
  int cache_rope_length = 0;
  int cached_prompt_tokens = 0;  // from the prefix cache at (first) admission
  SequenceStatus status = SequenceStatus::waiting;
  int num_preemptions = 0;
  // Speculative decoding may propose drafts for it (engine.cpp decides: not under a grammar).
  bool may_speculate = false;
  int context_limit = 0;  // the engine's max_model_len: tokens.size() never exceeds it

  Sampler sampler;
  std::optional<IncrementalDetokenizer> detokenizer;  // absent without a tokenizer (token-only use)
  StopStringMatcher stop_matcher;
  std::optional<ConstrainedOutput> constraint;  // with Request::grammar

  std::chrono::steady_clock::time_point submitted_at;
  std::optional<std::chrono::steady_clock::time_point> first_scheduled_at;
  std::optional<std::chrono::steady_clock::time_point> first_token_at;

  double seconds_since_submit(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double>(t - submitted_at).count();
  }
  double queue_seconds() const {
    const auto until = first_scheduled_at.value_or(std::chrono::steady_clock::now());
    return std::chrono::duration<double>(until - submitted_at).count();
  }

  int num_output() const { return static_cast<int>(tokens.size()) - prompt_len; }
  int num_uncomputed() const { return static_cast<int>(tokens.size()) - num_computed; }
  std::span<const int32_t> prompt() const { return {tokens.data(), static_cast<size_t>(prompt_len)}; }
  std::span<const int32_t> output() const { return {tokens.data() + prompt_len, static_cast<size_t>(num_output())}; }
};

}  // namespace slab
