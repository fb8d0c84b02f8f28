#include "engine/draft_model_proposer.h"

#include <spdlog/spdlog.h>
#include <algorithm>
#include <stdexcept>

namespace slab {
namespace {

KvGeometry draft_geometry(const ModelConfig& c, int block_size) {
  return {c.num_layers, c.num_kv_heads, c.head_dim, block_size};
}

// Lowest id among the largest logits: the draft's greedy choice.
int32_t argmax(const float* row, size_t vocab) {
  return static_cast<int32_t>(std::max_element(row, row + vocab) - row);
}

// One sequence's part of a draft pass: its tokens and where they go.
struct PassEntry {
  size_t slot;
  std::vector<int32_t> tokens;
  int start_pos;
};

}  // namespace

DraftModelProposer::DraftModelProposer(ModelRunner& runner, int target_vocab_size, int num_blocks, int block_size,
                                       int catch_up_budget)
    : runner_(runner),
      proposal_vocab_(static_cast<size_t>(std::max(0, std::min(runner.config().vocab_size, target_vocab_size)))),
      memory_(draft_geometry(runner.config(), block_size), num_blocks, runner.kv_dtype(), runner.numa_node()),
      blocks_(num_blocks, block_size, /*enable_prefix_caching=*/false), catch_up_budget_(catch_up_budget) {}

int DraftModelProposer::cached_tokens(int64_t seq_id) const {
  auto it = states_.find(seq_id);
  return it == states_.end() ? 0 : static_cast<int>(it->second.tokens.size());
}

void DraftModelProposer::roll_back(int64_t seq_id, DraftState& state, std::span<const int32_t> tokens) {
  const size_t n = std::min(state.tokens.size(), tokens.size());
  const size_t same = static_cast<size_t>(
      std::mismatch(state.tokens.begin(), state.tokens.begin() + n, tokens.begin()).first - state.tokens.begin());
  if (same == state.tokens.size()) return;
  state.tokens.resize(same);
  if (blocks_.has(seq_id)) blocks_.truncate(seq_id, state.tokens, static_cast<int>(same));
}

void DraftModelProposer::verified(const Sequence& seq) {
  auto it = states_.find(seq.id);
  if (it != states_.end()) roll_back(seq.id, it->second, seq.tokens);
}

void DraftModelProposer::forget(int64_t seq_id) {
  blocks_.free(seq_id, 0);
  states_.erase(seq_id);
}

bool DraftModelProposer::reserve(int64_t seq_id, const DraftState& state, int positions,
                                 std::span<const DraftSlot> keep) {
  const int held = static_cast<int>(state.tokens.size());
  const auto grow = [&] { return blocks_.allocate(seq_id, state.tokens, held, {}, std::max(0, positions - held)); };
  if (grow()) return true;
  // Short of blocks: the draft caches of sequences that are not drafting this step go first
  // (they catch up again when they next speculate).
  std::vector<int64_t> idle;
  for (const auto& [id, s] : states_) {
    if (std::none_of(keep.begin(), keep.end(), [&](const DraftSlot& k) { return k.seq->id == id; })) idle.push_back(id);
  }
  for (int64_t id : idle) forget(id);
  return grow();
}

void DraftModelProposer::propose(std::span<DraftSlot> slots) {
  const size_t vocab = static_cast<size_t>(runner_.config().vocab_size);  // the logits' row stride
  // Pass 1: every slot's catch-up chunk (the tokens its draft cache lacks), whose last row gives
  // the first draft token; a sequence further behind than the budget allows computes a chunk and
  // drafts in a later step.
  std::vector<PassEntry> pass;
  std::vector<bool> drafting(slots.size(), false);
  int budget = catch_up_budget_;
  for (size_t i = 0; i < slots.size(); ++i) {
    DraftSlot& slot = slots[i];
    slot.draft.clear();
    const Sequence& seq = *slot.seq;
    DraftState& state = states_[seq.id];
    roll_back(seq.id, state, seq.tokens);
    const int len = static_cast<int>(seq.tokens.size());
    // The last token's row is needed: its K/V are recomputed should the cache hold them already.
    if (static_cast<int>(state.tokens.size()) >= len) roll_back(seq.id, state, std::span(seq.tokens).first(len - 1));
    const int from = static_cast<int>(state.tokens.size());
    const int behind = len - from;
    const int count = std::min(behind, budget);
    if (count <= 0 || slot.max_tokens <= 0) continue;
    const bool drafts = count == behind;
    if (!reserve(seq.id, state, from + count + (drafts ? slot.max_tokens - 1 : 0), slots)) continue;
    budget -= count;
    drafting[i] = drafts;
    pass.push_back({i, {seq.tokens.begin() + from, seq.tokens.begin() + from + count}, from});
  }

  try {
    while (!pass.empty()) {
      ForwardBatch batch;
      std::vector<std::vector<int32_t>> tables;  // copies: the batch's spans point into them
      tables.reserve(pass.size());
      for (const PassEntry& e : pass) {
        const int64_t id = slots[e.slot].seq->id;
        const std::span<const int32_t> table = blocks_.block_table(id);
        tables.emplace_back(table.begin(), table.end());
        batch.tokens.insert(batch.tokens.end(), e.tokens.begin(), e.tokens.end());
        batch.sequences.push_back({id, e.start_pos, static_cast<int>(e.tokens.size()), tables.back()});
      }
      const std::vector<float> logits = runner_.forward(batch, memory_);
      // Next pass: each drafting sequence's newest draft token, until it has max_tokens of them.
      std::vector<PassEntry> next;
      for (size_t r = 0; r < pass.size(); ++r) {
        const PassEntry& e = pass[r];
        DraftSlot& slot = slots[e.slot];
        DraftState& state = states_[slot.seq->id];
        state.tokens.insert(state.tokens.end(), e.tokens.begin(), e.tokens.end());
        if (!drafting[e.slot]) continue;
        slot.draft.push_back(argmax(logits.data() + r * vocab, proposal_vocab_));
        if (static_cast<int>(slot.draft.size()) < slot.max_tokens) {
          next.push_back({e.slot, {slot.draft.back()}, static_cast<int>(state.tokens.size())});
        }
      }
      pass = std::move(next);
    }
  } catch (const std::exception& e) {
    // A failed draft pass costs this step its drafts, never a request: the caches start over.
    spdlog::error("draft model pass failed, no drafts this step: {}", e.what());
    for (DraftSlot& slot : slots) {
      slot.draft.clear();
      forget(slot.seq->id);
    }
  }
}

}  // namespace slab
