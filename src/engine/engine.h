#pragma once
// The engine: one loop thread that, every step, asks the scheduler what runs, does one forward
// pass over all of it, samples one token per sequence that reached its end, and sends each
// request its output. submit() and abort() are thread-safe and return at once; they reach the
// loop through a queue, never through a lock held across a step.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "engine/draft_model_proposer.h"
#include "engine/output_constraint.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "kv/kv_cache.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace slab {

struct EngineConfig {
  SchedulerConfig scheduler;
  int block_size = 32;
  int num_kv_blocks = 0;  // 0: derive from kv_cache_bytes
  size_t kv_cache_bytes = size_t{1} << 30;
  bool enable_prefix_caching = true;
  int max_model_len = 0;  // 0: the model's max_position_embeddings
};

// Counters and gauges for /metrics, read from any thread.
struct EngineStats {
  int num_running = 0;
  int num_waiting = 0;
  double kv_cache_usage = 0.0;  // 0..1
  int64_t num_preemptions = 0;
  int64_t prefix_query_tokens = 0;
  int64_t prefix_hit_tokens = 0;
  int64_t prompt_tokens = 0;  // whole prompts of requests that got their first token
  int64_t generation_tokens = 0;
  int64_t steps = 0;
  // Wall time of the engine loop's steps, and of the parallel regions of the thread pool in them
  // (ThreadPoolStats): step_seconds − parallel_seconds is the serial part, which more cores do
  // not shorten (scheduling, batch assembly, emitting tokens, dispatch).
  double step_seconds = 0;
  double parallel_seconds = 0;
  // The target model's forward passes by phase (ModelRunner::phase_seconds; zeros on the
  // reference path): where the parallel time goes, e.g. attention against the linears.
  ForwardPhaseSeconds forward_phase_seconds;
  // What those passes had to do at the least, by rows (ModelRunner::forward_work): with the
  // machine's peaks, the least time they could have taken (model/forward_work.h).
  ForwardWorkByRows forward_work;
  // Speculative decoding, as vLLM counts it: sequences that went into a step with a draft, the
  // draft tokens, those the verification accepted (in all, and by their position in the draft),
  // and the tokens those steps emitted (accepted + the one each verification samples itself,
  // fewer where a stop ended the sequence first).
  int64_t spec_num_drafts = 0;
  int64_t spec_num_draft_tokens = 0;
  int64_t spec_num_accepted_tokens = 0;
  int64_t spec_num_emitted_tokens = 0;
  std::vector<int64_t> spec_accepted_per_position;  // num_speculative_tokens entries
};

class Engine {
 public:
  // The runner and tokenizer must outlive the engine. A null tokenizer means token-only output
  // (no text, no stop strings). The runner's forward() runs on the engine's loop thread only:
  // the constructor starts the runner's thread pool there (pinning that thread as worker 0)
  // before it returns. The KV cache memory is bound to the runner's NUMA node, if it has one.
  // With `draft_runner` (and config.scheduler.speculative.num_speculative_tokens > 0) a draft
  // model proposes the speculative tokens (engine/draft_model_proposer.h) instead of prompt
  // lookup; it must outlive the engine, share the target's vocabulary size (or, with a tokenizer,
  // differ only in padding past the tokenizer's tokens) and reach at least max_model_len
  // positions (else std::invalid_argument, naming both). Its KV cache holds as
  // many tokens as the target's, and it runs on the target runner's thread pool.
  Engine(ModelRunner& runner, const Tokenizer* tokenizer, const EngineConfig& config,
         ModelRunner* draft_runner = nullptr);
  // The context (max_model_len) is at most what the KV cache holds: the model's own length is
  // clamped to it with a warning; an explicit config.max_model_len above it throws
  // std::invalid_argument.
  // Builds and owns a runner over the loaded model (which must outlive the engine), with the
  // kernels cpu_features() picks.
  Engine(const Model& model, const Tokenizer* tokenizer, const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Queues a request; its events arrive on the returned stream. Throws std::invalid_argument
  // when the request can never run (empty prompt, prompt + 1 over the context, token ids of the
  // prompt, stop_token_ids or logit_bias outside the vocabulary, a grammar that does not compile).
  int64_t submit(Request request, std::shared_ptr<RequestStream> stream);
  // The request ends with FinishReason::abort within one step; its blocks are freed.
  void abort(int64_t request_id);
  // Every request in flight ends with FinishReason::abort (shutdown after its grace period).
  void abort_all();

  EngineStats stats() const;
  int max_model_len() const { return max_model_len_; }
  int num_kv_blocks() const { return kv_memory_.num_blocks(); }
  int block_size() const { return kv_memory_.geometry().block_size; }
  size_t kv_cache_bytes() const { return kv_memory_.bytes(); }
  KvDtype kv_dtype() const { return kv_memory_.dtype(); }
  // The draft model's KV cache (0 without a draft model).
  size_t draft_kv_cache_bytes() const { return draft_proposer_ ? draft_proposer_->kv_cache_bytes() : 0; }

 private:
  // Runs `runner`, or the owned one when runner is null.
  Engine(std::unique_ptr<ModelRunner> owned, ModelRunner* runner, const Tokenizer* tokenizer,
         const EngineConfig& config, ModelRunner* draft_runner);
  void loop();
  void take_inbox();
  void run_step();
  // The step's masks of allowed tokens for the ready chunks (indices into step.chunks) whose
  // sequence has an output constraint; allowed empty: unconstrained; error: finish the request.
  struct ConstraintMask {
    std::span<const uint64_t> allowed;
    std::string error;
  };
  std::vector<ConstraintMask> constraint_masks(const SchedulerStep& step, const std::vector<size_t>& ready);
  void publish_stats();
  // Verifies a speculative decode's draft against its 1 + draft.size() rows of logits, emitting
  // the accepted drafts and the token after them. Returns how many tokens it emitted.
  int verify_draft(Sequence& seq, const std::vector<int32_t>& draft, float* rows);
  // Sends the sequence's last token out and decides whether it is finished. True: finished,
  // and `seq` is destroyed. in_draft: the token ends a verified run of a speculative step,
  // whose blocks are settled (rejected ones back, verified ones hashed) before a finish frees them.
  bool emit_token(Sequence& seq, const SampledToken& sampled, bool in_draft = false);
  void finish(Sequence& seq, FinishReason reason, const std::string& error = {});

  std::unique_ptr<ModelRunner> owned_runner_;
  ModelRunner& runner_;
  const ModelConfig& model_config_;
  const Tokenizer* tokenizer_;
  EngineConfig config_;
  int max_model_len_;
  KvCache kv_memory_;  // geometry + dtype + pool; which blocks a sequence holds is the scheduler's
  ModelRunner* draft_runner_;
  std::unique_ptr<DraftModelProposer> draft_proposer_;  // with a draft model: its runner's cache and passes
  Scheduler scheduler_;                                 // owns the KV bookkeeping (KvCacheManager)
  std::unordered_map<int64_t, std::unique_ptr<Sequence>> sequences_;  // loop thread only
  ConstraintCache constraints_;                                       // any thread

  // Inbox from other threads.
  std::mutex inbox_mutex_;
  std::condition_variable inbox_ready_;
  std::vector<std::unique_ptr<Sequence>> new_sequences_;
  std::vector<int64_t> aborted_;
  bool abort_all_ = false;
  bool stopping_ = false;
  int64_t next_id_ = 1;

  mutable std::mutex stats_mutex_;
  EngineStats stats_;
  double pool_seconds_ = 0;  // the pool's parallel_seconds after the last step (loop thread only)

  std::thread thread_;
};

}  // namespace slab
