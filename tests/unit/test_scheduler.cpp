// The scheduler and KV cache under randomised workloads, with the forward pass simulated: every
// step's invariants hold and every request finishes without leaking a block.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include "engine/scheduler.h"

using namespace slab;

namespace {

struct Workload {
  int num_blocks;
  int block_size;
  SchedulerConfig config;
  bool prefix_caching;
  int num_requests;
  uint32_t seed;
};

// Checks that each block's reference count equals the number of live tables holding it.
void check_reference_counts(const KvCacheManager& kv, const std::vector<std::unique_ptr<Sequence>>& seqs) {
  std::map<int32_t, int> holders;
  for (const auto& s : seqs) {
    if (s->status == SequenceStatus::finished || !kv.has(s->id)) continue;
    std::set<int32_t> distinct;
    for (int32_t b : kv.block_table(s->id)) {
      REQUIRE(distinct.insert(b).second);  // never twice in one table
      ++holders[b];
    }
  }
  int used = 0;
  for (int32_t b = 0; b < kv.num_blocks(); ++b) {
    REQUIRE(kv.pool().ref_count(b) == holders[b]);
    used += holders[b] > 0;
  }
  REQUIRE(used == kv.num_blocks() - kv.num_free_blocks());
}

void run_workload(const Workload& w) {
  std::mt19937 rng(w.seed);
  Scheduler scheduler(w.config, w.num_blocks, w.block_size, w.prefix_caching);
  const KvCacheManager& kv = scheduler.kv();
  std::vector<std::unique_ptr<Sequence>> seqs;
  std::vector<int32_t> kv_content(static_cast<size_t>(w.num_blocks) * w.block_size, -1);  // token id per cache slot
  const std::vector<int32_t> shared_prefix = [&] {
    std::vector<int32_t> p(40);
    for (int32_t& t : p) t = static_cast<int32_t>(rng() % 100);
    return p;
  }();

  int submitted = 0;
  int finished = 0;
  int steps = 0;
  while (finished < w.num_requests) {
    REQUIRE(++steps < 100000);
    // New arrivals at random times.
    while (submitted < w.num_requests && rng() % 3 == 0) {
      Request r;
      const int len = 1 + static_cast<int>(rng() % 90);
      if (rng() % 2 == 0) r.prompt.assign(shared_prefix.begin(), shared_prefix.begin() + std::min(len, 40));
      while (static_cast<int>(r.prompt.size()) < len) r.prompt.push_back(static_cast<int32_t>(rng() % 100));
      r.stop.max_tokens = 1 + static_cast<int>(rng() % 40);
      seqs.push_back(std::make_unique<Sequence>(submitted, std::move(r), nullptr, nullptr, submitted));
      scheduler.add(seqs.back().get());
      ++submitted;
    }
    SchedulerStep step = scheduler.schedule();
    for (Sequence* s : step.out_of_cache) {
      FAIL("sequence " << s->id << " reported out of cache although every request fits");
    }
    int tokens = 0;
    std::set<Sequence*> in_step;
    for (const ScheduledChunk& c : step.chunks) {
      REQUIRE(in_step.insert(c.seq).second);
      REQUIRE(c.num_tokens > 0);
      REQUIRE(c.num_tokens <= c.seq->num_uncomputed());
      const auto table = kv.block_table(c.seq->id);
      REQUIRE(std::equal(c.block_ids.begin(), c.block_ids.end(), table.begin(), table.end()));
      REQUIRE(static_cast<int>(c.block_ids.size()) * w.block_size >= c.seq->num_computed + c.num_tokens);
      tokens += c.num_tokens;
    }
    REQUIRE(tokens <= w.config.max_num_batched_tokens);
    REQUIRE(static_cast<int>(scheduler.num_running()) <= w.config.max_num_seqs);
    if (submitted > finished) REQUIRE_FALSE(step.empty());
    check_reference_counts(kv, seqs);

    // Simulated forward pass: every chunk writes its tokens' "K/V" (the token ids) through its
    // block ids, then every chunk reads its whole context back, as attention does after the
    // layer's writes. A block handed out from the prefix cache that nobody computed shows here.
    for (const ScheduledChunk& c : step.chunks) {
      for (int p = c.seq->num_computed; p < c.seq->num_computed + c.num_tokens; ++p) {
        kv_content[static_cast<size_t>(c.block_ids[static_cast<size_t>(p / w.block_size)]) * w.block_size +
                   p % w.block_size] = c.seq->tokens[static_cast<size_t>(p)];
      }
    }
    for (const ScheduledChunk& c : step.chunks) {
      for (int p = 0; p < c.seq->num_computed + c.num_tokens; ++p) {
        REQUIRE(kv_content[static_cast<size_t>(c.block_ids[static_cast<size_t>(p / w.block_size)]) * w.block_size +
                           p % w.block_size] == c.seq->tokens[static_cast<size_t>(p)]);
      }
    }
    // Sampling.
    for (const ScheduledChunk& c : step.chunks) {
      Sequence& s = *c.seq;
      s.num_computed += c.num_tokens;
      if (s.num_uncomputed() > 0) continue;
      s.tokens.push_back(static_cast<int32_t>(s.tokens.size() % 100));
      if (s.num_output() >= s.request.stop.max_tokens) {
        scheduler.remove(&s);
        ++finished;
      }
    }
  }
  check_reference_counts(kv, seqs);
  REQUIRE(kv.num_free_blocks() == w.num_blocks);
  REQUIRE(scheduler.num_running() == 0);
  REQUIRE(scheduler.num_waiting() == 0);
  for (const auto& s : seqs) REQUIRE(s->num_output() == s->request.stop.max_tokens);
}

}  // namespace

TEST_CASE("randomised workloads: budget and sequence limits hold, blocks are never leaked or doubly owned",
          "[engine][scheduler]") {
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    INFO("seed " << seed);
    // Roomy cache, chunked prefill.
    run_workload({64, 16, {8, 48, 0, {}}, true, 40, seed});
    // Tight cache: 10 blocks for up to 130-token sequences forces preemption.
    run_workload({10, 16, {6, 64, 0, {}}, seed % 2 == 0, 30, seed + 100});
    // One token per step at most.
    run_workload({32, 16, {4, 1, 0, {}}, true, 10, seed + 200});
  }
}

TEST_CASE("a full cache preempts the most recently admitted sequence and requeues it first", "[engine][scheduler]") {
  Scheduler scheduler({4, 256, 0, {}}, 4, 16, false);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 2; ++i) {
    Request r;
    r.prompt.assign(31, 5);
    r.stop.max_tokens = 10;
    seqs.push_back(std::make_unique<Sequence>(i, r, nullptr, nullptr, i));
    scheduler.add(seqs.back().get());
  }
  SchedulerStep first = scheduler.schedule();
  REQUIRE(first.chunks.size() == 2);  // 2 blocks each
  for (auto& s : seqs) {
    s->num_computed = 31;
    s->tokens.push_back(1);  // 32 tokens: the next decode fits in the 2 blocks
  }
  REQUIRE(scheduler.schedule().chunks.size() == 2);
  for (auto& s : seqs) {
    s->num_computed = 32;
    s->tokens.push_back(1);  // position 32 needs a third block each; only one pair exists
  }
  SchedulerStep step = scheduler.schedule();
  REQUIRE(step.num_preempted == 1);
  REQUIRE(step.chunks.size() == 1);
  REQUIRE(step.chunks[0].seq == seqs[0].get());
  REQUIRE(seqs[1]->status == SequenceStatus::waiting);
  REQUIRE(seqs[1]->num_computed == 0);
  REQUIRE(scheduler.num_preemptions() == 1);
}

namespace {

std::unique_ptr<Sequence> call_sequence(int64_t id, uint64_t call, int prompt_len) {
  Request r;
  r.prompt.assign(static_cast<size_t>(prompt_len), 7);
  r.stop.max_tokens = 100;
  r.fairness_group = call;
  return std::make_unique<Sequence>(id, std::move(r), nullptr, nullptr, static_cast<uint64_t>(id));
}

bool scheduled(const SchedulerStep& step, const Sequence* seq) {
  return std::any_of(step.chunks.begin(), step.chunks.end(), [&](const ScheduledChunk& c) { return c.seq == seq; });
}

}  // namespace

TEST_CASE("a call holding every slot gives one up the next step to a call with nothing running",
          "[engine][scheduler]") {
  Scheduler scheduler({4, 1024, 0, {}}, 256, 16, false);
  std::vector<std::unique_ptr<Sequence>> seqs;
  for (int i = 0; i < 10; ++i) {
    seqs.push_back(call_sequence(i, 1, 8));
    scheduler.add(seqs.back().get());
  }
  SchedulerStep first = scheduler.schedule();
  REQUIRE(first.chunks.size() == 4);  // the slot limit, all call 1
  for (const ScheduledChunk& c : first.chunks) {
    c.seq->num_computed += c.num_tokens;
    c.seq->tokens.push_back(1);
  }
  seqs.push_back(call_sequence(10, 2, 8));
  Sequence* newcomer = seqs.back().get();
  scheduler.add(newcomer);
  SchedulerStep second = scheduler.schedule();
  CHECK(scheduled(second, newcomer));
  CHECK(second.num_preempted == 0);  // a turn given, not a lack of memory
  CHECK(scheduler.num_running() == 4);
  CHECK(seqs[3]->status == SequenceStatus::waiting);  // call 1's most recently admitted
  CHECK(scheduler.num_preemptions() == 1);
}

TEST_CASE("a freed slot goes to the waiting call with the fewest running sequences", "[engine][scheduler]") {
  Scheduler scheduler({3, 1024, 0, {}}, 256, 16, false);
  std::vector<std::unique_ptr<Sequence>> seqs;
  seqs.push_back(call_sequence(0, 2, 8));  // call 2: one sequence, running
  scheduler.add(seqs.back().get());
  for (int i = 1; i <= 6; ++i) {
    seqs.push_back(call_sequence(i, 1, 8));  // call 1: six sequences
    scheduler.add(seqs.back().get());
  }
  REQUIRE(scheduler.schedule().chunks.size() == 3);  // call 2's and two of call 1's
  seqs.push_back(call_sequence(7, 3, 8));            // call 3 arrives behind call 1's waiting four
  scheduler.add(seqs.back().get());
  scheduler.remove(seqs[0].get());  // call 2 finishes: one slot free
  SchedulerStep step = scheduler.schedule();
  CHECK(scheduled(step, seqs[7].get()));
  for (int i = 3; i <= 6; ++i) CHECK_FALSE(scheduled(step, seqs[static_cast<size_t>(i)].get()));
}

TEST_CASE("a later request's chunk carries the blocks an earlier one cached at allocation", "[engine][scheduler]") {
  Scheduler scheduler({4, 1024, 0, {}}, 16, 16, true);
  Request r;
  for (int i = 0; i < 40; ++i) r.prompt.push_back(i);
  r.stop.max_tokens = 4;
  Sequence first(0, r, nullptr, nullptr, 0), second(1, r, nullptr, nullptr, 1);
  scheduler.add(&first);
  SchedulerStep step1 = scheduler.schedule();
  REQUIRE(step1.chunks.size() == 1);
  REQUIRE(step1.chunks[0].block_ids.size() == 3);
  first.num_computed = 40;  // the forward pass ran
  first.tokens.push_back(99);

  scheduler.add(&second);
  SchedulerStep step2 = scheduler.schedule();
  REQUIRE(step2.chunks.size() == 2);
  const ScheduledChunk& c = step2.chunks[1];
  REQUIRE(c.seq == &second);
  REQUIRE(second.num_computed == 32);  // two full blocks from the prefix cache
  REQUIRE(second.cached_prompt_tokens == 32);
  REQUIRE(c.num_tokens == 8);
  REQUIRE(c.block_ids.size() == 3);
  REQUIRE(c.block_ids[0] == step1.chunks[0].block_ids[0]);
  REQUIRE(c.block_ids[1] == step1.chunks[0].block_ids[1]);
  REQUIRE(c.block_ids[2] != step1.chunks[0].block_ids[2]);
  const auto table = scheduler.kv().block_table(second.id);
  REQUIRE(std::equal(c.block_ids.begin(), c.block_ids.end(), table.begin(), table.end()));
  scheduler.remove(&first);
  scheduler.remove(&second);
  REQUIRE(scheduler.kv().num_free_blocks() == 16);
}
