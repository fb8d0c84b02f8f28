// Speculative decoding in the engine: greedy output token-for-token as without it (alone, batched
// with sequences that do not speculate, across preemption and prefix-cache hits), and the KV
// rollback of rejected drafts leaving the cache as if they had never been there.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "engine_requests.h"
#include "engine_runs.h"
#include "kv/contiguous_kv_cache.h"
#include "kv/kv_cache_manager.h"
#include "model/model_runner.h"
#include "test_paths.h"

using namespace slab;
using test::copying_prompt;
using test::run_all;
using test::run_one;
using test::settled;
using test::speculating_sequence;

TEST_CASE("rolling back rejected drafts leaves free blocks, table and prefix cache as if they never existed",
          "[speculative][kv]") {
  const int bs = 16;
  std::vector<int32_t> tokens(60);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int32_t>(100 + i);
  // Verified: 30 tokens computed before the step, then 1 + 20 draft positions; 5 drafts accepted.
  const int before = 30;
  const int verified = before + 1 + 5;
  KvCacheManager spec(16, bs, true), plain(16, bs, true);
  REQUIRE(spec.allocate(1, tokens, before));
  REQUIRE(plain.allocate(1, tokens, before));
  REQUIRE(spec.allocate(1, tokens, before + 1, {}, 20));  // blocks for 51 positions: 4
  CHECK(spec.block_table(1).size() == 4);
  // No hash for a block holding unverified drafts: only the first (full within 31) is cached.
  CHECK(spec.pool().num_cached() == 1);
  spec.truncate(1, std::span<const int32_t>(tokens).first(static_cast<size_t>(verified + 1)), verified);
  // Without speculation the same tokens were computed one step at a time.
  for (int n = before + 1; n <= verified; ++n) REQUIRE(plain.allocate(1, tokens, n));
  CHECK(spec.num_free_blocks() == plain.num_free_blocks());
  CHECK(std::vector<int32_t>(spec.block_table(1).begin(), spec.block_table(1).end()) ==
        std::vector<int32_t>(plain.block_table(1).begin(), plain.block_table(1).end()));
  CHECK(spec.pool().num_cached() == plain.pool().num_cached());
  CHECK(spec.pool().num_cached() == 2);  // 36 verified positions: two full blocks
  const std::span<const int32_t> query = std::span<const int32_t>(tokens).first(40);
  CHECK(spec.find_cached_prefix(query).blocks == plain.find_cached_prefix(query).blocks);
  // The pool's free list is in the same order: the next blocks handed out are the same.
  REQUIRE(spec.allocate(2, tokens, 60));
  REQUIRE(plain.allocate(2, tokens, 60));
  CHECK(std::vector<int32_t>(spec.block_table(2).begin(), spec.block_table(2).end()) ==
        std::vector<int32_t>(plain.block_table(2).begin(), plain.block_table(2).end()));
}

TEST_CASE("the runner returns each sequence's last num_logits rows, as all_logits has them", "[speculative][model]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  const ModelConfig& c = model.config;
  for (KernelChoice kernels : {KernelChoice::reference, KernelChoice::automatic}) {
    RunnerOptions options;
    options.kernels = kernels;
    options.n_threads = 2;
    ModelRunner runner(model, options);
    KvGeometry g{c.num_layers, c.num_kv_heads, c.head_dim, 16};
    const std::vector<int> a = {5, 9, 14, 3, 77, 12}, b = {8, 8, 40};
    // Both sequences' positions through the cache first (one prefill each), then a step that
    // runs a: 3 tokens with 2 logits rows (a decode and its 1-token draft, say), b: 2 tokens.
    ContiguousKvCache all_cache(g, 2, 64, runner.kv_dtype()), rows_cache(g, 2, 64, runner.kv_dtype());
    ForwardBatch prefill{{a[0], a[1], a[2], b[0]}, {{0, 0, 3, {}}, {1, 0, 1, {}}}, false};
    for (ContiguousKvCache* cache : {&all_cache, &rows_cache}) {
      prefill.sequences[0].block_table = cache->block_table(0);
      prefill.sequences[1].block_table = cache->block_table(1);
      (void)runner.forward(prefill, *cache);
    }
    const ForwardBatch all{{a[3], a[4], a[5], b[1], b[2]},
                           {{0, 3, 3, all_cache.block_table(0)}, {1, 1, 2, all_cache.block_table(1)}},
                           true};
    const ForwardBatch rows{{a[3], a[4], a[5], b[1], b[2]},
                            {{0, 3, 3, rows_cache.block_table(0), 0, 2}, {1, 1, 2, rows_cache.block_table(1)}},
                            false};
    const std::vector<float> every = runner.forward(all, all_cache);
    const std::vector<float> some = runner.forward(rows, rows_cache);
    const size_t v = static_cast<size_t>(c.vocab_size);
    REQUIRE(some.size() == 3 * v);
    // a's tokens 2 and 3 of the step (rows 1, 2 of `every`), b's last (row 4).
    CHECK(std::equal(some.begin(), some.begin() + 2 * v, every.begin() + v));
    CHECK(std::equal(some.begin() + 2 * v, some.end(), every.begin() + 4 * v));
    // More rows than tokens is refused.
    ForwardBatch bad = rows;
    bad.sequences[1].num_logits = 3;
    CHECK_THROWS_AS(runner.forward(bad, rows_cache), std::invalid_argument);
  }
}


TEST_CASE("greedy output with n-gram speculation is token-for-token that without it", "[speculative][engine]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  std::mt19937 rng(5);
  const std::vector<int32_t> probe = copying_prompt(rng);
  const int probe_tokens = 40;
  std::vector<int32_t> reference;
  {
    Engine engine(model, nullptr, test::speculative_config(1, 64, 0));
    reference = run_one(engine, test::greedy_request(probe, probe_tokens));
  }
  REQUIRE(reference.size() == static_cast<size_t>(probe_tokens));
  std::vector<Request> batch;
  for (int i = 0; i < 9; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(5 + 3 * i));
    for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % 250);
    batch.push_back(test::greedy_request(p, 12 + 2 * i));
  }
  batch.insert(batch.begin() + 4, test::greedy_request(probe, probe_tokens));

  SECTION("alone, for every k") {
    for (int k : {1, 3, 5}) {
      Engine engine(model, nullptr, test::speculative_config(1, 64, k));
      CHECK(run_one(engine, test::greedy_request(probe, probe_tokens)) == reference);
      const EngineStats s = settled(engine);
      CHECK(s.spec_num_accepted_tokens > 0);
      CHECK(s.spec_num_emitted_tokens == s.spec_num_accepted_tokens + s.spec_num_drafts);
      CHECK(s.generation_tokens == probe_tokens);
      CHECK(s.steps < probe_tokens + 1);  // fewer forward passes than tokens: drafts were accepted
    }
  }
  SECTION("batched with requests that do not speculate (switched off above 4 running) and that do") {
    for (int disable : {0, 4}) {
      Engine engine(model, nullptr, test::speculative_config(16, 128, 4, disable));
      auto outs = run_all(engine, batch);
      CHECK(outs[4] == reference);
      for (size_t i = 0; i < batch.size(); ++i) {
        Engine plain(model, nullptr, test::speculative_config(1, 64, 0));
        CHECK(outs[i] == run_one(plain, batch[i]));
      }
      CHECK(settled(engine).spec_num_accepted_tokens > 0);
    }
  }
  SECTION("preempted in a cache too small for the batch") {
    Engine engine(model, nullptr, test::speculative_config(16, 12, 4));
    auto outs = run_all(engine, batch);
    CHECK(outs[4] == reference);
    CHECK(settled(engine).num_preemptions > 0);
    CHECK(settled(engine).spec_num_accepted_tokens > 0);
  }
  SECTION("prefix-cache hits of a speculating request") {
    Engine engine(model, nullptr, test::speculative_config(4, 64, 4));
    CHECK(run_one(engine, test::greedy_request(probe, probe_tokens)) == reference);
    // The second run takes its prompt's full blocks from the cache; its output must not change,
    // nor must a request whose prompt runs through the first one's (verified) output.
    CHECK(run_one(engine, test::greedy_request(probe, probe_tokens)) == reference);
    std::vector<int32_t> extended = probe;
    extended.insert(extended.end(), reference.begin(), reference.begin() + 30);
    Engine plain(model, nullptr, test::speculative_config(1, 64, 0));
    const std::vector<int32_t> expected = run_one(plain, test::greedy_request(extended, 10));
    CHECK(run_one(engine, test::greedy_request(extended, 10)) == expected);
    CHECK(settled(engine).prefix_hit_tokens >= 64 + 64);
  }
}

TEST_CASE("speculation honours max_tokens and stop tokens inside an accepted run", "[speculative][engine]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  std::mt19937 rng(5);
  const std::vector<int32_t> probe = copying_prompt(rng);
  Engine plain(model, nullptr, test::speculative_config(1, 64, 0));
  const std::vector<int32_t> reference = run_one(plain, test::greedy_request(probe, 30));
  Engine engine(model, nullptr, test::speculative_config(1, 64, 5));
  for (int max_tokens : {1, 2, 7, 13}) {
    CHECK(run_one(engine, test::greedy_request(probe, max_tokens)) ==
          std::vector<int32_t>(reference.begin(), reference.begin() + max_tokens));
  }
  // A stop token that the greedy output reaches mid-run: the output ends with it, nothing after.
  Request r = test::greedy_request(probe, 30);
  r.stop.stop_token_ids = {reference[17]};
  const auto first = std::find(reference.begin(), reference.end(), reference[17]);
  CHECK(run_one(engine, r) == std::vector<int32_t>(reference.begin(), first + 1));
}

TEST_CASE("the real stories260K copies a repeated passage with speculation, unchanged", "[speculative][engine]") {
  const std::string dir = test::stories260k_or_skip();
  if (dir.empty()) return;
  const Model model = load_model(dir);
  const auto tokenizer = load_tokenizer(dir);
  const std::string passage = "Once upon a time, there was a little girl named Lily. She liked to play in the park. ";
  const std::vector<int32_t> probe = tokenizer->encode(passage + passage + "Once upon a time", true);
  // Tokens and text of each request, several at once on one engine.
  const auto run = [&](Engine& engine, const std::vector<Request>& requests) {
    auto stream = std::make_shared<RequestStream>();
    std::map<int64_t, size_t> index;
    for (const Request& r : requests) index[engine.submit(r, stream)] = index.size();
    std::vector<std::pair<std::vector<int32_t>, std::string>> outs(requests.size());
    size_t done = 0;
    while (done < requests.size()) {
      std::optional<RequestOutput> o = stream->next(std::chrono::milliseconds(20000));
      REQUIRE(o.has_value());
      auto& [tokens, text] = outs[index.at(o->request_id)];
      tokens.insert(tokens.end(), o->tokens.begin(), o->tokens.end());
      text += o->text;
      if (o->finished) ++done;
    }
    return outs;
  };
  Engine plain(model, tokenizer.get(), test::speculative_config(1, 64, 0));
  const auto reference = run(plain, {test::greedy_request(probe, 48)})[0];
  REQUIRE(reference.second.size() > 40);

  SECTION("alone") {
    Engine engine(model, tokenizer.get(), test::speculative_config(1, 64, 4));
    CHECK(run(engine, {test::greedy_request(probe, 48)})[0] == reference);
    CHECK(settled(engine).spec_num_accepted_tokens > 0);
  }
  SECTION("a stop string inside an accepted run ends the text where it does without speculation") {
    Request stopped = test::greedy_request(probe, 48);
    stopped.stop.stop_strings = {reference.second.substr(20, 5)};
    const auto expected = run(plain, {stopped})[0];
    REQUIRE(expected.second.size() < 25);
    Engine engine(model, tokenizer.get(), test::speculative_config(1, 64, 4));
    CHECK(run(engine, {stopped})[0] == expected);
  }
  SECTION("batched with a grammar-constrained request, which does not speculate") {
    Request constrained = test::greedy_request(probe, 20);
    constrained.grammar = "root ::= [a-z ]+";
    const auto expected = run(plain, {constrained})[0];
    Engine engine(model, tokenizer.get(), test::speculative_config(4, 64, 4));
    const auto outs = run(engine, {test::greedy_request(probe, 48), constrained});
    CHECK(outs[0] == reference);
    CHECK(outs[1] == expected);
    CHECK(settled(engine).spec_num_accepted_tokens > 0);
  }
}

namespace {

// The forward pass simulated: chunks computed, a decode's next token is `next`, drafts rejected.
void simulate(Scheduler& scheduler, const SchedulerStep& step, int32_t next) {
  for (const ScheduledChunk& c : step.chunks) {
    c.seq->num_computed += c.num_tokens;
    if (c.seq->num_uncomputed() == 0) c.seq->tokens.push_back(next);
    if (!c.draft.empty()) scheduler.drop_rejected_drafts(c.seq);
  }
}

const ScheduledChunk& chunk_of(const SchedulerStep& step, const Sequence* seq) {
  for (const ScheduledChunk& c : step.chunks) {
    if (c.seq == seq) return c;
  }
  FAIL("not scheduled");
  return step.chunks.front();
}

}  // namespace

TEST_CASE("drafts take only the budget the running sequences leave, and switch off above the batch size",
          "[speculative][scheduler]") {
  for (int disable : {0, 1}) {
    INFO("disable_by_batch_size " << disable);
    Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 40, .speculative = {4, 1, 3, disable}}, 64, 16,
                        true);
    std::vector<int32_t> periodic;
    for (int i = 0; i < 4; ++i) periodic.insert(periodic.end(), {1, 2, 3});
    auto a = speculating_sequence(1, periodic);
    auto b = speculating_sequence(2, std::vector<int32_t>(105, 9));
    scheduler.add(a.get());
    scheduler.add(b.get());
    SchedulerStep s1 = scheduler.schedule();  // a: 12 prompt tokens; b: 28
    CHECK(chunk_of(s1, b.get()).num_tokens == 28);
    simulate(scheduler, s1, 1);
    SchedulerStep s2 = scheduler.schedule();  // a decodes; b's chunk of 39 takes the rest
    CHECK(chunk_of(s2, a.get()).draft.empty());
    CHECK(chunk_of(s2, b.get()).num_tokens == 39);
    simulate(scheduler, s2, 2);
    SchedulerStep s3 = scheduler.schedule();  // b's last 38 tokens leave one for a's draft
    CHECK(chunk_of(s3, b.get()).num_tokens == 38);
    if (disable == 0) {
      CHECK(chunk_of(s3, a.get()).draft == std::vector<int32_t>{3});  // ... 1 2 3 1 2 -> 3
      const ScheduledChunk& c = chunk_of(s3, a.get());
      CHECK(c.block_ids.size() * 16 >= static_cast<size_t>(a->num_computed + 1 + 1));
    } else {
      CHECK(chunk_of(s3, a.get()).draft.empty());  // two running, more than 1
    }
  }
}

TEST_CASE("a draft is cut to the free blocks and never preempts", "[speculative][scheduler]") {
  Scheduler scheduler({.max_num_seqs = 4, .max_num_batched_tokens = 2048, .speculative = {12, 1, 3, 0}}, 3, 16, false);
  std::vector<int32_t> x(20);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<int32_t>(10 + i);
  std::vector<int32_t> prompt = x;
  prompt.insert(prompt.end(), x.begin(), x.begin() + 3);  // 23 tokens: "10 11 12" recurs
  auto a = speculating_sequence(1, prompt);
  auto b = speculating_sequence(2, std::vector<int32_t>(10, 5));
  scheduler.add(a.get());
  scheduler.add(b.get());
  SchedulerStep s1 = scheduler.schedule();  // a: 2 blocks, b: 1 block; nothing free
  REQUIRE(s1.chunks.size() == 2);
  simulate(scheduler, s1, 13);
  SchedulerStep s2 = scheduler.schedule();
  // a holds 32 positions and needs 24: 8 draft positions fit, not the 12 proposed.
  CHECK(chunk_of(s2, a.get()).draft == std::vector<int32_t>{14, 15, 16, 17, 18, 19, 20, 21});
  CHECK(s2.num_preempted == 0);
  CHECK(scheduler.num_preemptions() == 0);
}

TEST_CASE("sampled requests with penalties, logit bias and logprobs speculate and report every token",
          "[speculative][engine]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  std::mt19937 rng(9);
  Request r = test::greedy_request(copying_prompt(rng), 40);
  r.sampling.temperature = 0.7f;
  r.sampling.top_k = 5;
  r.sampling.repetition_penalty = 1.1f;
  r.sampling.frequency_penalty = 0.2f;
  r.sampling.logit_bias = {{r.prompt[7], 2.0f}};
  r.sampling.logprobs = 2;
  r.sampling.seed = 3;
  r.stop.min_tokens = 5;
  Engine engine(model, nullptr, test::speculative_config(1, 64, 4));
  auto stream = std::make_shared<RequestStream>();
  engine.submit(r, stream);
  int tokens = 0;
  while (true) {
    std::optional<RequestOutput> o = stream->next(std::chrono::milliseconds(20000));
    REQUIRE(o.has_value());
    REQUIRE(o->logprobs.size() == o->tokens.size());
    for (size_t i = 0; i < o->tokens.size(); ++i) {
      CHECK(o->logprobs[i].token == o->tokens[i]);
      CHECK(o->logprobs[i].logprob <= 0.0f);
      CHECK(o->logprobs[i].top.size() == 2);
    }
    tokens += static_cast<int>(o->tokens.size());
    if (o->finished) break;
  }
  CHECK(tokens == 40);
  const EngineStats s = settled(engine);
  CHECK(s.spec_num_drafts > 0);
  CHECK(s.spec_num_accepted_tokens <= s.spec_num_draft_tokens);
}
