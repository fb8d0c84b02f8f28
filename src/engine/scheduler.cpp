#include "engine/scheduler.h"

#include <algorithm>
#include <unordered_map>

#include "engine/proposer.h"

namespace slab {

Scheduler::Scheduler(const SchedulerConfig& config, int num_kv_blocks, int block_size, bool enable_prefix_caching,
                     Proposer* proposer)
    : config_(config), kv_(num_kv_blocks, block_size, enable_prefix_caching), proposer_(proposer) {
  if (!proposer_ && config.speculative.num_speculative_tokens > 0) {
    own_proposer_ = std::make_unique<NgramProposer>(config.speculative.ngram_min, config.speculative.ngram_max);
    proposer_ = own_proposer_.get();
  }
}

void Scheduler::add(Sequence* seq) {
  seq->status = SequenceStatus::waiting;
  // Arrival order, priority as the tiebreak among equal arrivals; in practice arrival is unique
  // so this is a push_back, but it keeps the queue sorted if callers batch-submit.
  auto pos = std::find_if(waiting_.begin(), waiting_.end(), [&](const Sequence* w) {
    return w->num_preemptions == 0 &&
           (w->arrival > seq->arrival || (w->arrival == seq->arrival && w->request.priority > seq->request.priority));
  });
  waiting_.insert(pos, seq);
}

void Scheduler::remove(Sequence* seq) {
  std::erase(running_, seq);
  std::erase(waiting_, seq);
  kv_.free(seq->id, seq->num_computed);
  if (proposer_) proposer_->forget(seq->id);
  seq->status = SequenceStatus::finished;
}

void Scheduler::drop_rejected_drafts(Sequence* seq) {
  kv_.truncate(seq->id, seq->tokens, seq->num_computed);
  if (proposer_) proposer_->verified(*seq);
}

int Scheduler::draft_room(const Sequence& seq, int budget) const {
  if (!seq.may_speculate) return 0;
  // Emitting the accepted drafts and one more token must stay within max_tokens and the context.
  const int len = static_cast<int>(seq.tokens.size());
  return std::max(0, std::min({budget, config_.speculative.num_speculative_tokens,
                               seq.request.stop.max_tokens - seq.num_output() - 1, seq.context_limit - len - 1}));
}

void Scheduler::propose_drafts(SchedulerStep& step, int& budget) {
  // Rooms are taken from the budget in decode order before the proposer runs (all slots in one
  // call, one batch for a model); what a shorter draft leaves is given back afterwards.
  std::vector<DraftSlot> slots;
  std::vector<ScheduledChunk*> chunks;
  int reserved = 0;
  for (ScheduledChunk& chunk : step.chunks) {
    if (budget - reserved <= 0) break;
    if (chunk.num_tokens != 1 || chunk.seq->num_uncomputed() != 1) continue;  // not a decode
    const int room = draft_room(*chunk.seq, budget - reserved);
    if (room <= 0) continue;
    slots.push_back({chunk.seq, room, {}});
    chunks.push_back(&chunk);
    reserved += room;
  }
  if (slots.empty()) return;
  proposer_->propose(slots);
  for (size_t i = 0; i < slots.size(); ++i) {
    Sequence* seq = chunks[i]->seq;
    std::vector<int32_t>& draft = slots[i].draft;
    if (static_cast<int>(draft.size()) > slots[i].max_tokens) draft.resize(static_cast<size_t>(slots[i].max_tokens));
    // No preemption for a draft: it is cut to the positions the free blocks hold.
    const int bs = kv_.block_size();
    const int held = static_cast<int>(kv_.block_table(seq->id).size());
    const int fits = (held + kv_.num_free_blocks()) * bs - (seq->num_computed + 1);
    if (fits < static_cast<int>(draft.size())) draft.resize(static_cast<size_t>(std::max(fits, 0)));
    if (draft.empty() ||
        !kv_.allocate(seq->id, seq->tokens, seq->num_computed + 1, {}, static_cast<int>(draft.size()))) {
      continue;
    }
    chunks[i]->draft = std::move(draft);
    budget -= static_cast<int>(chunks[i]->draft.size());
  }
}

void Scheduler::preempt(Sequence* victim, SchedulerStep& step, bool for_memory) {
  std::erase(running_, victim);
  std::erase_if(step.chunks, [&](const ScheduledChunk& c) { return c.seq == victim; });
  kv_.free(victim->id, victim->num_computed);
  if (proposer_) proposer_->forget(victim->id);
  victim->num_computed = 0;
  victim->status = SequenceStatus::waiting;
  ++victim->num_preemptions;
  waiting_.push_front(victim);
  if (for_memory) ++step.num_preempted;
  ++num_preemptions_;
}

bool Scheduler::reserve_or_preempt(Sequence* seq, int num_tokens, SchedulerStep& step) {
  const int target = seq->num_computed + num_tokens;
  while (!kv_.allocate(seq->id, seq->tokens, target)) {
    if (kv_.blocks_needed(seq->id, target) > kv_.num_blocks()) {
      step.out_of_cache.push_back(seq);
      return false;
    }
    Sequence* victim = running_.back();
    if (victim == seq && running_.size() == 1) {
      // Alone and still short: the free blocks are held by nobody, so this cannot happen unless
      // the cache is smaller than the sequence.
      step.out_of_cache.push_back(seq);
      return false;
    }
    preempt(victim, step);
    if (victim == seq) return false;
  }
  return true;
}

uint64_t Scheduler::fairness_key(const Sequence& seq) {
  // Sequences outside any group are calls of their own; their ids cannot collide with group
  // numbers in practice (both count up from 1, groups from a separate counter), and a collision
  // would only make two calls share a turn.
  return seq.request.fairness_group != 0 ? seq.request.fairness_group
                                         : (uint64_t{1} << 63) | static_cast<uint64_t>(seq.id);
}

size_t Scheduler::next_to_admit(const std::unordered_map<uint64_t, int>& running_per_call,
                                const std::vector<size_t>& passed) const {
  size_t best = waiting_.size();
  int best_running = 0;
  for (size_t w = 0; w < waiting_.size(); ++w) {
    if (std::find(passed.begin(), passed.end(), w) != passed.end()) continue;
    auto it = running_per_call.find(fairness_key(*waiting_[w]));
    const int running = it == running_per_call.end() ? 0 : it->second;
    if (best == waiting_.size() || running < best_running) {
      best = w;
      best_running = running;
      if (running == 0) break;  // queue order among the calls with none running
    }
  }
  return best;
}

void Scheduler::make_room_for_a_new_call(std::unordered_map<uint64_t, int>& running_per_call, SchedulerStep& step) {
  // All slots taken while a call with nothing running waits: take the most recently admitted
  // sequence of the call holding the most slots (if it holds more than one) back to waiting, so
  // the new call starts within a step instead of after that call's sequences finish. One per
  // step keeps the churn (recomputing the victim's context, mostly from the prefix cache) small.
  if (static_cast<int>(running_.size()) < config_.max_num_seqs) return;
  const bool call_starving = std::any_of(waiting_.begin(), waiting_.end(), [&](const Sequence* w) {
    return !running_per_call.contains(fairness_key(*w));
  });
  if (!call_starving) return;
  uint64_t largest = 0;
  int most = 1;
  for (const auto& [call, count] : running_per_call) {
    if (count > most) {
      largest = call;
      most = count;
    }
  }
  if (most <= 1) return;
  for (auto it = running_.rbegin(); it != running_.rend(); ++it) {
    if (fairness_key(**it) == largest) {
      Sequence* victim = *it;
      preempt(victim, step, /*for_memory=*/false);  // a turn given away: admission goes on this step
      --running_per_call[largest];
      return;
    }
  }
}

bool Scheduler::sibling_prefilling(const Sequence& seq) const {
  if (seq.request.prefix_group == 0 || !kv_.prefix_caching()) return false;
  return std::any_of(running_.begin(), running_.end(), [&](const Sequence* r) {
    return r->request.prefix_group == seq.request.prefix_group && r->num_computed < r->prompt_len;
  });
}

SchedulerStep Scheduler::schedule() {
  SchedulerStep step;
  int budget = config_.max_num_batched_tokens;
  std::unordered_map<uint64_t, int> running_per_call;
  for (const Sequence* r : running_) ++running_per_call[fairness_key(*r)];
  make_room_for_a_new_call(running_per_call, step);

  // 1. Running decodes, 2. running sequences still in (chunked) prefill, in admission order.
  for (bool decodes : {true, false}) {
    for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
      Sequence* seq = running_[i];
      const int switch_at = config_.recompute_past_length;
      if (switch_at > 0 && seq->num_computed > 0 && seq->cache_rope_length <= switch_at &&
          static_cast<int>(seq->tokens.size()) > switch_at) {
        preempt(seq, step, /*for_memory=*/false);  // recomputed from the waiting queue's front
        --i;
        continue;
      }
      const int need = seq->num_uncomputed();
      if ((need == 1) != decodes || need == 0) continue;
      const int n = std::min(need, budget);
      const size_t before = running_.size();
      if (!reserve_or_preempt(seq, n, step)) {
        if (running_.size() < before) --i;  // the list shrank under us; `seq` may be gone
        continue;
      }
      step.chunks.push_back({seq, n, {}, {}});
      budget -= n;
    }
  }
  // Drafts for the decodes, from what the running sequences left of the budget and the free
  // blocks; taking nothing from anyone, they come after every reservation that may preempt.
  const SpeculativeConfig& spec = config_.speculative;
  if (spec.num_speculative_tokens > 0 &&
      (spec.disable_by_batch_size == 0 || static_cast<int>(running_.size()) <= spec.disable_by_batch_size)) {
    propose_drafts(step, budget);
  }

  // 3. Waiting sequences, unless this step already had to preempt (no room to grow), fairly
  // across client calls: the next admitted is the first waiting sequence of the call with the
  // fewest running, so a call of many prompts x n takes turns with later calls instead of
  // filling every slot before they get one. A sequence whose sibling (same prefix group: the n
  // choices of one prompt) is still prefilling waits for it, so that it then takes the prompt's
  // blocks from the prefix cache instead of computing them again.
  std::vector<size_t> passed;  // waiting indices skipped this step (sibling prefilling)
  while (budget > 0 && step.num_preempted == 0 && static_cast<int>(running_.size()) < config_.max_num_seqs) {
    const size_t w = next_to_admit(running_per_call, passed);
    if (w == waiting_.size()) break;
    Sequence* seq = waiting_[w];
    if (sibling_prefilling(*seq)) {
      passed.push_back(w);
      continue;
    }
    // A waiting sequence holds no blocks: query the prefix cache, then commit the hit and the
    // chunk's blocks together or not at all.
    const PrefixHit hit = kv_.find_cached_prefix(seq->tokens);
    const int cached = hit.num_tokens(kv_.block_size());
    const int n = std::min(static_cast<int>(seq->tokens.size()) - cached, budget);
    if (kv_.blocks_needed(seq->id, cached + n) > kv_.num_blocks()) {
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
      step.out_of_cache.push_back(seq);
      passed.clear();  // indices moved
      continue;
    }
    if (!kv_.allocate(seq->id, seq->tokens, cached + n, hit)) break;  // no room: admission stops this step
    seq->num_computed = cached;
    if (cached == 0) seq->cache_rope_length = static_cast<int>(seq->tokens.size());
    if (seq->num_preemptions == 0) seq->cached_prompt_tokens = cached;
    waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(w));
    passed.clear();
    seq->status = SequenceStatus::running;
    running_.push_back(seq);
    ++running_per_call[fairness_key(*seq)];
    step.chunks.push_back({seq, n, {}, {}});
    budget -= n;
  }
  // Tables are final once no more preemption can happen: each chunk carries its own.
  for (ScheduledChunk& chunk : step.chunks) {
    const std::span<const int32_t> table = kv_.block_table(chunk.seq->id);
    chunk.block_ids.assign(table.begin(), table.end());
  }
  return step;
}

}  // namespace slab
