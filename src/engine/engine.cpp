#include "engine/engine.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <chrono>
#include <future>
#include <stdexcept>

#include "runtime/thread_pool.h"

namespace slab {
namespace {

int blocks_for_budget(const KvGeometry& g, KvDtype dtype, size_t bytes) {
  const size_t block_bytes = g.bytes_per_token(dtype) * static_cast<size_t>(g.block_size);
  if (block_bytes == 0) return 1;  // a bad block size: the KvCache constructor says so
  return static_cast<int>(std::max<size_t>(1, bytes / block_bytes));
}

bool contains(const std::vector<int32_t>& ids, int32_t id) {
  return std::find(ids.begin(), ids.end(), id) != ids.end();
}

// The tokens that end generation: stop token ids, and EOS unless ignored.
std::vector<int32_t> end_tokens(const StopConditions& stop) {
  std::vector<int32_t> ids = stop.stop_token_ids;
  if (!stop.ignore_eos) ids.insert(ids.end(), stop.eos_token_ids.begin(), stop.eos_token_ids.end());
  return ids;
}

// longrope models (Phi-3 128k, Phi-3.5, Phi-4-mini): keys rotated with the short factors must
// not serve a sequence past original_max_position_embeddings, nor the long ones a shorter one.
// Cached prefixes do not record which set rotated them, so prefix caching is off for these
// models, and a sequence that grows past the length is recomputed (SchedulerConfig).
bool longrope(const ModelConfig& c) { return c.rope_scaling.type == RopeScalingType::longrope; }

SchedulerConfig scheduler_config(SchedulerConfig s, const ModelConfig& c) {
  if (longrope(c)) s.recompute_past_length = c.rope_scaling.original_max_position_embeddings;
  return s;
}

// What a draft model must share with its target (the tokenizers are compared by the loader).
// Embedding tables may differ in padding rows past the tokenizer's tokens (Qwen2.5-0.5B has
// 151936 rows, 7B 152064, one tokenizer of 151665): a draft of either size covers every token
// the tokenizer writes, and it proposes only ids both tables have (DraftModelProposer).
void check_draft_model(const ModelConfig& target, const ModelConfig& draft, const Tokenizer* tokenizer,
                       int max_model_len, int k) {
  if (k <= 0) throw std::invalid_argument("a draft model needs num_speculative_tokens > 0");
  if (draft.vocab_size != target.vocab_size) {
    const int tokens = tokenizer != nullptr ? tokenizer->vocab_size() : 0;
    if (tokens == 0 || tokens > std::min(draft.vocab_size, target.vocab_size)) {
      throw std::invalid_argument(
          "the draft model's vocabulary has " + std::to_string(draft.vocab_size) + " tokens, the target's " +
          std::to_string(target.vocab_size) + ": a draft must share the target's vocabulary" +
          (tokens == 0
               ? std::string(" (without a tokenizer, the same size)")
               : " (sizes may differ only in padding past the tokenizer's " + std::to_string(tokens) + " tokens)"));
    }
  }
  // Refused rather than clamped: a sequence past the draft's positions would need another
  // proposer, and a silently shorter context would surprise more than an error at start.
  if (draft.max_position_embeddings < max_model_len) {
    throw std::invalid_argument("the draft model reaches " + std::to_string(draft.max_position_embeddings) +
                                " positions, fewer than the target's context of " + std::to_string(max_model_len) +
                                " tokens: lower --max-model-len to at most " +
                                std::to_string(draft.max_position_embeddings));
  }
  if (longrope(draft)) {
    throw std::invalid_argument(
        "a longrope model (Phi-3 128k) cannot be a draft model: its RoPE factors follow the "
        "length of the whole step");
  }
}

}  // namespace

Engine::Engine(const Model& model, const Tokenizer* tokenizer, const EngineConfig& config)
    : Engine(std::make_unique<ModelRunner>(model), nullptr, tokenizer, config, nullptr) {}

Engine::Engine(ModelRunner& runner, const Tokenizer* tokenizer, const EngineConfig& config, ModelRunner* draft_runner)
    : Engine(nullptr, &runner, tokenizer, config, draft_runner) {}

Engine::Engine(std::unique_ptr<ModelRunner> owned, ModelRunner* runner, const Tokenizer* tokenizer,
               const EngineConfig& config, ModelRunner* draft_runner)
    : owned_runner_(std::move(owned)), runner_(runner ? *runner : *owned_runner_), model_config_(runner_.config()),
      tokenizer_(tokenizer), config_(config),
      max_model_len_(config.max_model_len > 0 ? std::min(config.max_model_len, model_config_.max_position_embeddings)
                                              : model_config_.max_position_embeddings),
      kv_memory_({model_config_.num_layers, model_config_.num_kv_heads, model_config_.head_dim, config.block_size},
                 config.num_kv_blocks > 0 ? config.num_kv_blocks
                                          : blocks_for_budget({model_config_.num_layers, model_config_.num_kv_heads,
                                                               model_config_.head_dim, config.block_size},
                                                              runner_.kv_dtype(), config.kv_cache_bytes),
                 runner_.kv_dtype(), runner_.numa_node()),
      draft_runner_(draft_runner),
      draft_proposer_(draft_runner ? std::make_unique<DraftModelProposer>(*draft_runner, model_config_.vocab_size,
                                                                          kv_memory_.num_blocks(), config.block_size,
                                                                          config.scheduler.max_num_batched_tokens)
                                   : nullptr),
      scheduler_(scheduler_config(config.scheduler, model_config_), kv_memory_.num_blocks(), config.block_size,
                 config.enable_prefix_caching && !longrope(model_config_), draft_proposer_.get()),
      constraints_(tokenizer) {
  if (longrope(model_config_) && config.enable_prefix_caching) {
    spdlog::warn(
        "prefix caching is off for this model: its longrope RoPE rotates keys by the sequence's length "
        "(short factors up to {} tokens, long beyond), which cached blocks do not record",
        model_config_.rope_scaling.original_max_position_embeddings);
  }
  stats_.spec_accepted_per_position.assign(
      static_cast<size_t>(std::max(0, config.scheduler.speculative.num_speculative_tokens)), 0);
  if (config.block_size <= 0 || config.block_size % 16 != 0) {
    throw std::invalid_argument("block size must be a positive multiple of 16, got " +
                                std::to_string(config.block_size));
  }
  // One sequence can use the whole cache but no more: a context the cache cannot hold would be
  // advertised and then cut short with "length". An explicit --max-model-len above it is an
  // error; the model's own length is clamped, with a warning, as vLLM refuses or clamps.
  const int cache_tokens = kv_memory_.num_blocks() * config.block_size;
  if (max_model_len_ > cache_tokens) {
    if (config.max_model_len > 0) {
      throw std::invalid_argument("--max-model-len " + std::to_string(config.max_model_len) +
                                  " is more than the KV cache holds (" + std::to_string(cache_tokens) +
                                  " tokens); give the cache more memory (--kv-cache-memory) "
                                  "or lower --max-model-len");
    }
    spdlog::warn(
        "the KV cache holds {} tokens, fewer than the model's context of {}: serving a context of {} tokens "
        "(give the cache more memory with --kv-cache-memory for the full context)",
        cache_tokens, max_model_len_, cache_tokens);
    max_model_len_ = cache_tokens;
  }
  if (draft_runner_) {
    check_draft_model(model_config_, draft_runner_->config(), tokenizer_, max_model_len_,
                      config.scheduler.speculative.num_speculative_tokens);
  }
  // The runner's thread pool starts on the loop thread (which it pins as worker 0) before the
  // constructor returns, so callers can report its bindings without racing the first step.
  std::promise<void> pool_started;
  std::future<void> pool_ready = pool_started.get_future();
  // The thread owns the promise: set_value may still be running when the constructor returns.
  thread_ = std::thread([this, started = std::move(pool_started)]() mutable {
    try {
      if (!runner_.uses_reference()) (void)runner_.thread_pool();
      if (draft_runner_) draft_runner_->share_thread_pool(runner_);
    } catch (...) {
      started.set_exception(std::current_exception());
      return;
    }
    // The pool's regions before the first step (loading, other engines on the same runner)
    // are not this engine's.
    if (!runner_.uses_reference()) pool_seconds_ = runner_.thread_pool().stats().parallel_seconds;
    started.set_value();
    loop();
  });
  try {
    pool_ready.get();
  } catch (...) {
    thread_.join();
    throw;
  }
}

Engine::~Engine() {
  {
    std::lock_guard lock(inbox_mutex_);
    stopping_ = true;
  }
  inbox_ready_.notify_all();
  thread_.join();
}

int64_t Engine::submit(Request request, std::shared_ptr<RequestStream> stream) {
  const int prompt_len = static_cast<int>(request.prompt.size());
  if (prompt_len == 0) throw std::invalid_argument("the prompt has no tokens");
  for (int32_t t : request.prompt) {
    if (t < 0 || t >= model_config_.vocab_size) {
      throw std::invalid_argument("token id " + std::to_string(t) + " is outside the vocabulary (size " +
                                  std::to_string(model_config_.vocab_size) + ")");
    }
  }
  for (int32_t t : request.stop.stop_token_ids) {
    if (t < 0 || t >= model_config_.vocab_size) {
      throw std::invalid_argument("stop_token_ids names token id " + std::to_string(t) +
                                  ", outside the vocabulary (size " + std::to_string(model_config_.vocab_size) + ")");
    }
  }
  for (const auto& [t, bias] : request.sampling.logit_bias) {
    if (t < 0 || t >= model_config_.vocab_size) {
      throw std::invalid_argument("logit_bias names token id " + std::to_string(t) + ", outside the vocabulary (size " +
                                  std::to_string(model_config_.vocab_size) + ")");
    }
  }
  if (prompt_len + 1 > max_model_len_) {
    throw std::invalid_argument("the prompt has " + std::to_string(prompt_len) + " tokens; the context is " +
                                std::to_string(max_model_len_) + " tokens, prompt and output together");
  }
  // Compiled here, on the caller's thread: a grammar error is the caller's to report.
  std::optional<CompiledConstraint> constraint;
  if (!request.grammar.empty()) constraint = constraints_.get(request.grammar);
  int64_t id;
  {
    std::lock_guard lock(inbox_mutex_);
    id = next_id_++;
    auto seq =
        std::make_unique<Sequence>(id, std::move(request), std::move(stream), tokenizer_, static_cast<uint64_t>(id));
    if (constraint) seq->constraint.emplace(std::move(*constraint), static_cast<size_t>(model_config_.vocab_size));
    // A grammar's mask for each draft position would need its matcher advanced through the
    // draft and back: such requests do not speculate (docs/ARCHITECTURE.md). Nor do sequences of
    // longrope models: a step's furthest position picks the RoPE factor set of the whole step,
    // so drafts crossing original_max_position_embeddings would rotate the verified tokens with
    // other factors than decoding them one by one does.
    seq->may_speculate = !seq->constraint && !longrope(model_config_);
    seq->context_limit = max_model_len_;
    new_sequences_.push_back(std::move(seq));
  }
  inbox_ready_.notify_one();
  return id;
}

void Engine::abort(int64_t request_id) {
  {
    std::lock_guard lock(inbox_mutex_);
    aborted_.push_back(request_id);
  }
  inbox_ready_.notify_one();
}

void Engine::abort_all() {
  {
    std::lock_guard lock(inbox_mutex_);
    abort_all_ = true;
  }
  inbox_ready_.notify_one();
}

EngineStats Engine::stats() const {
  std::lock_guard lock(stats_mutex_);
  return stats_;
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock lock(inbox_mutex_);
      inbox_ready_.wait(lock, [this] {
        return stopping_ || abort_all_ || !new_sequences_.empty() || !aborted_.empty() || !sequences_.empty();
      });
      if (stopping_) break;
    }
    take_inbox();
    const auto t0 = std::chrono::steady_clock::now();
    run_step();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double in_pool = runner_.uses_reference() ? 0.0 : runner_.thread_pool().stats().parallel_seconds;
    {
      std::lock_guard lock(stats_mutex_);
      stats_.step_seconds += seconds;
      stats_.parallel_seconds += in_pool - pool_seconds_;
      stats_.forward_phase_seconds = runner_.phase_seconds();
      stats_.forward_work = runner_.forward_work();
    }
    pool_seconds_ = in_pool;
    publish_stats();
  }
  // Shutting down: everything still in flight ends as aborted.
  take_inbox();
  std::vector<Sequence*> left;
  for (auto& [id, seq] : sequences_) left.push_back(seq.get());
  for (Sequence* seq : left) finish(*seq, FinishReason::abort);
  publish_stats();
}

void Engine::take_inbox() {
  std::vector<std::unique_ptr<Sequence>> arrived;
  std::vector<int64_t> aborted;
  bool abort_everything = false;
  {
    std::lock_guard lock(inbox_mutex_);
    arrived.swap(new_sequences_);
    aborted.swap(aborted_);
    std::swap(abort_everything, abort_all_);
  }
  for (auto& seq : arrived) {
    Sequence* raw = seq.get();
    sequences_.emplace(raw->id, std::move(seq));
    scheduler_.add(raw);
  }
  if (abort_everything) {
    for (auto& [id, seq] : sequences_) aborted.push_back(id);
  }
  for (int64_t id : aborted) {
    auto it = sequences_.find(id);
    if (it != sequences_.end()) finish(*it->second, FinishReason::abort);
  }
}

void Engine::run_step() {
  SchedulerStep step = scheduler_.schedule();
  for (Sequence* seq : step.out_of_cache) finish(*seq, FinishReason::length);
  if (step.empty()) return;

  ForwardBatch batch;
  const auto now = std::chrono::steady_clock::now();
  std::vector<size_t> first_row;  // per chunk: its first row of logits
  size_t rows = 0;
  for (const ScheduledChunk& chunk : step.chunks) {
    Sequence& seq = *chunk.seq;
    if (!seq.first_scheduled_at) seq.first_scheduled_at = now;
    batch.tokens.insert(batch.tokens.end(), seq.tokens.begin() + seq.num_computed,
                        seq.tokens.begin() + seq.num_computed + chunk.num_tokens);
    batch.tokens.insert(batch.tokens.end(), chunk.draft.begin(), chunk.draft.end());
    const int num_draft = static_cast<int>(chunk.draft.size());
    batch.sequences.push_back({seq.id, seq.num_computed, chunk.num_tokens + num_draft, chunk.block_ids,
                               static_cast<int>(seq.tokens.size()), 1 + num_draft});
    first_row.push_back(rows);
    rows += static_cast<size_t>(1 + num_draft);
  }
  std::vector<float> logits;
  try {
    logits = runner_.forward(batch, kv_memory_);
  } catch (const std::exception& e) {
    spdlog::error("forward pass failed: {}", e.what());
    for (const ScheduledChunk& chunk : step.chunks) finish(*chunk.seq, FinishReason::error, e.what());
    return;
  }

  const size_t vocab = static_cast<size_t>(model_config_.vocab_size);
  std::vector<size_t> ready;  // chunks whose sequence samples a token this step
  for (size_t i = 0; i < step.chunks.size(); ++i) {
    Sequence& seq = *step.chunks[i].seq;
    seq.num_computed += step.chunks[i].num_tokens;
    if (seq.num_uncomputed() == 0) ready.push_back(i);  // else a prefill chunk that did not reach the end
  }
  const std::vector<ConstraintMask> masks = constraint_masks(step, ready);

  // Sampling runs on the pool: each sequence's sampler (its RNG included) is its own, so the
  // tokens do not depend on the thread, and at 64 sequences of a 128k vocabulary top-p sampling
  // was ~5 ms per step on one thread (bench_sampler), serial work that more cores did not
  // shorten. Drafts are verified and every token is emitted here, in order.
  std::vector<SampledToken> sampled(ready.size());
  std::vector<size_t> to_sample;  // indices into ready
  for (size_t r = 0; r < ready.size(); ++r) {
    if (masks[r].error.empty() && step.chunks[ready[r]].draft.empty()) to_sample.push_back(r);
  }
  const auto sample_row = [&](int task, int) {
    const size_t r = to_sample[static_cast<size_t>(task)];
    const size_t i = ready[r];
    Sequence& seq = *step.chunks[i].seq;
    std::vector<int32_t> banned;
    if (seq.num_output() < seq.request.stop.min_tokens) banned = end_tokens(seq.request.stop);
    float* row = logits.data() + first_row[i] * vocab;
    sampled[r] = seq.sampler.sample(std::span<float>(row, vocab), seq.prompt(), seq.output(), banned, masks[r].allowed);
  };
  if (to_sample.size() > 1 && !runner_.uses_reference()) {
    // One row at a time from the pool's counter: a row's cost varies (top-p sorts what it keeps).
    runner_.thread_pool().parallel_for_dynamic(static_cast<int>(to_sample.size()), 1, sample_row);
  } else {
    for (size_t task = 0; task < to_sample.size(); ++task) sample_row(static_cast<int>(task), 0);
  }

  int64_t prompt_tokens = 0;
  int64_t generated = 0;
  for (size_t r = 0; r < ready.size(); ++r) {
    const size_t i = ready[r];
    Sequence& seq = *step.chunks[i].seq;
    // Counted as vLLM does: a request's whole prompt, cached or not, when its first token comes.
    if (seq.num_output() == 0) prompt_tokens += seq.prompt_len;
    if (!masks[r].error.empty()) {
      finish(seq, FinishReason::error, masks[r].error);
      continue;
    }
    if (!step.chunks[i].draft.empty()) {
      generated += verify_draft(seq, step.chunks[i].draft, logits.data() + first_row[i] * vocab);
      continue;
    }
    ++generated;
    emit_token(seq, sampled[r]);  // may finish and destroy `seq`
  }

  runner_.recycle_logits(std::move(logits));  // the next step's logits fill this memory
  std::lock_guard lock(stats_mutex_);
  stats_.prompt_tokens += prompt_tokens;
  stats_.generation_tokens += generated;
  ++stats_.steps;
}

std::vector<Engine::ConstraintMask> Engine::constraint_masks(const SchedulerStep& step,
                                                             const std::vector<size_t>& ready) {
  std::vector<ConstraintMask> masks(ready.size());
  std::vector<size_t> constrained;  // indices into ready
  for (size_t r = 0; r < ready.size(); ++r) {
    if (step.chunks[ready[r]].seq->constraint) constrained.push_back(r);
  }
  const auto fill = [&](int task, int) {
    const size_t r = constrained[static_cast<size_t>(task)];
    Sequence& seq = *step.chunks[ready[r]].seq;
    try {
      masks[r].allowed = seq.constraint->next_mask(end_tokens(seq.request.stop));
      if (std::all_of(masks[r].allowed.begin(), masks[r].allowed.end(), [](uint64_t w) { return w == 0; })) {
        masks[r].error = "the output constraint allows no token of this vocabulary here";
      }
    } catch (const std::exception& e) {  // a grammar too ambiguous to follow: this request fails
      masks[r].error = std::string("output constraint: ") + e.what();
    }
  };
  // On the pool, whose threads wait between forward passes: a grammar's first visit to a
  // position walks the vocabulary (milliseconds), and sequences visit theirs in parallel.
  if (constrained.size() > 1 && !runner_.uses_reference()) {
    runner_.thread_pool().parallel_for_dynamic(static_cast<int>(constrained.size()), 1, fill);
  } else {
    for (size_t task = 0; task < constrained.size(); ++task) fill(static_cast<int>(task), 0);
  }
  return masks;
}

void Engine::publish_stats() {
  std::lock_guard lock(stats_mutex_);
  stats_.num_running = static_cast<int>(scheduler_.num_running());
  stats_.num_waiting = static_cast<int>(scheduler_.num_waiting());
  const KvCacheManager& kv = scheduler_.kv();
  stats_.kv_cache_usage = kv.usage();
  stats_.num_preemptions = scheduler_.num_preemptions();
  stats_.prefix_query_tokens = kv.prefix_query_tokens();
  stats_.prefix_hit_tokens = kv.prefix_hit_tokens();
}

int Engine::verify_draft(Sequence& seq, const std::vector<int32_t>& draft, float* rows) {
  const size_t vocab = static_cast<size_t>(model_config_.vocab_size);
  const size_t k = draft.size();
  int accepted = 0;
  int emitted = 0;
  std::vector<int64_t> accepted_at(k, 0);
  bool finished = false;
  // Row j holds the logits after draft[0 .. j): while every draft so far was accepted, it is
  // exactly the row normal decoding would sample the next token from, and seq.output() (for
  // penalties) and min_tokens see the same tokens normal decoding would have emitted.
  for (size_t j = 0; j <= k && !finished; ++j) {
    std::vector<int32_t> banned;
    if (seq.num_output() < seq.request.stop.min_tokens) banned = end_tokens(seq.request.stop);
    const std::span<float> row(rows + j * vocab, vocab);
    bool ok = false;
    const SampledToken sampled = j < k ? seq.sampler.verify(row, seq.prompt(), seq.output(), banned, {}, draft[j], ok)
                                       : seq.sampler.sample(row, seq.prompt(), seq.output(), banned);
    if (ok) {
      ++accepted;
      ++accepted_at[j];
      ++seq.num_computed;  // the draft's K/V were written this step, at the position it now holds
    }
    ++emitted;
    finished = emit_token(seq, sampled, true);  // may finish and destroy `seq`
    if (j < k && !ok) break;
  }
  if (!finished) scheduler_.drop_rejected_drafts(&seq);
  std::lock_guard lock(stats_mutex_);
  ++stats_.spec_num_drafts;
  stats_.spec_num_draft_tokens += static_cast<int64_t>(k);
  stats_.spec_num_accepted_tokens += accepted;
  stats_.spec_num_emitted_tokens += emitted;
  for (size_t j = 0; j < k && j < stats_.spec_accepted_per_position.size(); ++j) {
    stats_.spec_accepted_per_position[j] += accepted_at[j];
  }
  return emitted;
}

bool Engine::emit_token(Sequence& seq, const SampledToken& sampled, bool in_draft) {
  const int32_t token = sampled.token;
  const StopConditions& stop = seq.request.stop;
  seq.tokens.push_back(token);
  if (!seq.first_token_at) seq.first_token_at = std::chrono::steady_clock::now();

  RequestOutput out;
  out.request_id = seq.id;
  out.tokens = {token};
  if (seq.request.sampling.logprobs >= 0) out.logprobs.push_back({token, sampled.logprob, sampled.top});

  std::optional<FinishReason> finish_reason;
  const bool stop_token =
      contains(stop.stop_token_ids, token) || (!stop.ignore_eos && contains(stop.eos_token_ids, token));
  bool grammar_complete = false;
  if (stop_token) {
    finish_reason = FinishReason::stop;  // the stop token's text is not part of the output
  } else {
    if (seq.constraint) {
      if (seq.constraint->advance(token)) {
        grammar_complete = seq.constraint->must_end();
      } else {  // a masker bug: end this request, not the engine
        spdlog::error("request {}: the grammar refused token {}, which its mask allowed", seq.id, token);
        finish_reason = FinishReason::error;
        out.error = "internal error: the output constraint refused a token it allowed";
      }
    }
    if (seq.detokenizer && !finish_reason) {
      StopStringMatcher::Output piece = seq.stop_matcher.push(seq.detokenizer->push(token));
      out.text = std::move(piece.text);
      if (piece.stopped) finish_reason = FinishReason::stop;
    }
  }
  // The grammar's end is a natural end, like length: the held-back text is released below.
  const bool grammar_end = !finish_reason && grammar_complete;
  if (grammar_end) finish_reason = FinishReason::stop;
  if (!finish_reason &&
      (seq.num_output() >= stop.max_tokens || static_cast<int>(seq.tokens.size()) >= max_model_len_)) {
    finish_reason = FinishReason::length;
  }
  const bool natural_end = grammar_end || (finish_reason && *finish_reason == FinishReason::length);
  if (natural_end && seq.detokenizer) {
    // Natural end: release text held back for a possible stop string or an unfinished character.
    StopStringMatcher::Output tail = seq.stop_matcher.push(seq.detokenizer->flush());
    out.text += tail.text;
    if (!tail.stopped) out.text += seq.stop_matcher.flush();
  }
  out.prompt_tokens = seq.prompt_len;
  out.cached_prompt_tokens = seq.cached_prompt_tokens;
  out.completion_tokens = seq.num_output();
  out.queue_seconds = seq.queue_seconds();
  out.first_token_seconds = seq.first_token_at ? seq.seconds_since_submit(*seq.first_token_at) : 0.0;
  out.elapsed_seconds = seq.seconds_since_submit(std::chrono::steady_clock::now());
  if (!finish_reason) {
    seq.stream->push(std::move(out));
    return false;
  }
  out.finished = true;
  out.finish_reason = *finish_reason;
  seq.stream->push(std::move(out));
  // The prefix cache keeps the blocks the accepted drafts filled, as decoding them one by one would.
  if (in_draft) scheduler_.drop_rejected_drafts(&seq);
  scheduler_.remove(&seq);
  sequences_.erase(seq.id);
  return true;
}

void Engine::finish(Sequence& seq, FinishReason reason, const std::string& error) {
  RequestOutput out;
  out.request_id = seq.id;
  out.finished = true;
  out.finish_reason = reason;
  out.error = error;
  if (reason == FinishReason::length && seq.detokenizer) {
    out.text = seq.stop_matcher.push(seq.detokenizer->flush()).text + seq.stop_matcher.flush();
  }
  out.prompt_tokens = seq.prompt_len;
  out.cached_prompt_tokens = seq.cached_prompt_tokens;
  out.completion_tokens = seq.num_output();
  out.queue_seconds = seq.queue_seconds();
  out.first_token_seconds = seq.first_token_at ? seq.seconds_since_submit(*seq.first_token_at) : 0.0;
  out.elapsed_seconds = seq.seconds_since_submit(std::chrono::steady_clock::now());
  seq.stream->push(std::move(out));
  scheduler_.remove(&seq);
  sequences_.erase(seq.id);
}

}  // namespace slab
