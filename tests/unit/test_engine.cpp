// The engine end to end on a real (tiny, random) checkpoint: a request's tokens do not depend on
// what it is batched with, how its prompt is chunked, whether it was preempted, or whether its
// prefix came from the cache.
#include <catch2/catch.hpp>

#include <map>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"
#include "runtime/file_io.h"
#include "runtime/topology.h"
#include "engine_requests.h"
#include "test_paths.h"

using namespace slab;

namespace {

const Model& fixture_model() {
  static const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  return model;
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
  std::vector<int32_t> p(static_cast<size_t>(len));
  for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % 250);
  return p;
}

struct Outcome {
  std::vector<int32_t> tokens;
  RequestOutput last;
};

// Submits all requests at once and waits for all of them.
std::vector<Outcome> run_all(Engine& engine, const std::vector<Request>& requests) {
  auto stream = std::make_shared<RequestStream>();
  std::map<int64_t, size_t> index;
  for (const Request& r : requests) index[engine.submit(r, stream)] = index.size();
  std::vector<Outcome> outcomes(requests.size());
  size_t done = 0;
  while (done < requests.size()) {
    std::optional<RequestOutput> out = stream->next(std::chrono::milliseconds(20000));
    REQUIRE(out.has_value());
    Outcome& o = outcomes[index.at(out->request_id)];
    o.tokens.insert(o.tokens.end(), out->tokens.begin(), out->tokens.end());
    if (out->finished) ++done;
    o.last = *out;
  }
  return outcomes;
}

EngineConfig config(int max_num_seqs, int max_batched_tokens, int num_blocks, bool prefix_caching = true) {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.max_num_batched_tokens = max_batched_tokens;
  c.block_size = 16;
  c.num_kv_blocks = num_blocks;
  c.enable_prefix_caching = prefix_caching;
  return c;
}

}  // namespace

TEST_CASE("greedy tokens are the same alone, batched with 15 others, chunked, preempted and from the prefix cache",
          "[engine]") {
  const Model& model = fixture_model();
  std::mt19937 rng(11);
  const std::vector<int32_t> probe_prompt = random_prompt(rng, 37);
  const int probe_tokens = 24;

  std::vector<int32_t> alone;
  {
    Engine engine(model, nullptr, config(1, 2048, 64));
    alone = run_all(engine, {test::greedy_request(probe_prompt, probe_tokens)})[0].tokens;
  }
  REQUIRE(alone.size() == static_cast<size_t>(probe_tokens));

  std::vector<Request> batch;
  for (int i = 0; i < 15; ++i) batch.push_back(test::greedy_request(random_prompt(rng, 5 + 4 * i), 10 + i));
  batch.insert(batch.begin() + 7, test::greedy_request(probe_prompt, probe_tokens));

  SECTION("batched with 15 others of different lengths") {
    Engine engine(model, nullptr, config(16, 2048, 128));
    auto out = run_all(engine, batch);
    CHECK(out[7].tokens == alone);
    CHECK(out[7].last.finish_reason == FinishReason::length);
  }
  SECTION("chunked with a budget of 3 tokens per step") {
    Engine engine(model, nullptr, config(16, 3, 128));
    CHECK(run_all(engine, batch)[7].tokens == alone);
  }
  SECTION("preempted and resumed in a cache too small for the batch") {
    Engine engine(model, nullptr, config(16, 64, 12));
    auto out = run_all(engine, batch);
    CHECK(out[7].tokens == alone);
    CHECK(engine.stats().num_preemptions > 0);
    for (size_t i = 0; i < batch.size(); ++i)
      CHECK(out[i].tokens.size() == static_cast<size_t>(batch[i].stop.max_tokens));
  }
  SECTION("served from the prefix cache") {
    Engine engine(model, nullptr, config(4, 2048, 64));
    auto first = run_all(engine, {test::greedy_request(probe_prompt, probe_tokens)});
    auto second = run_all(engine, {test::greedy_request(probe_prompt, probe_tokens)});
    CHECK(first[0].last.cached_prompt_tokens == 0);
    CHECK(second[0].last.cached_prompt_tokens == 32);  // two full blocks of the 37-token prompt
    CHECK(second[0].tokens == alone);
    CHECK(engine.stats().prefix_hit_tokens == 32);
  }
}

TEST_CASE("the same seed samples the same tokens whatever the batch", "[engine]") {
  const Model& model = fixture_model();
  std::mt19937 rng(5);
  Request probe = test::greedy_request(random_prompt(rng, 20), 30);
  probe.sampling.temperature = 1.0f;
  probe.sampling.top_p = 0.9f;
  probe.sampling.seed = 777;

  Engine engine(model, nullptr, config(8, 2048, 64));
  auto alone = run_all(engine, {probe});
  std::vector<Request> batch = {probe};
  for (int i = 0; i < 5; ++i) {
    Request other = test::greedy_request(random_prompt(rng, 10 + i), 20);
    other.sampling.temperature = 1.0f;
    other.sampling.seed = static_cast<uint64_t>(i);
    batch.push_back(other);
  }
  auto together = run_all(engine, batch);
  CHECK(together[0].tokens == alone[0].tokens);
  probe.sampling.seed = 778;
  CHECK(run_all(engine, {probe})[0].tokens != alone[0].tokens);

  // The batch's rows are sampled on the pool: 1 or 3 threads give every request the same tokens.
  for (const int threads : {1, 3}) {
    INFO("threads " << threads);
    RunnerOptions options;
    options.pin_threads = false;
    options.n_threads = threads;
    ModelRunner runner(model, options);
    Engine other(runner, nullptr, config(8, 2048, 64));
    const auto got = run_all(other, batch);
    for (size_t i = 0; i < batch.size(); ++i) CHECK(got[i].tokens == together[i].tokens);
    // The engine's time accounting: steps ran, partly inside the pool's parallel regions.
    const EngineStats st = other.stats();
    CHECK(st.step_seconds > 0.0);
    if (!runner.uses_reference()) {
      CHECK(st.parallel_seconds > 0.0);
      CHECK(st.parallel_seconds <= st.step_seconds * 1.01 + 1e-3);
    }
  }
}

TEST_CASE("stop tokens, min_tokens and max_tokens end requests with the right reason", "[engine]") {
  const Model& model = fixture_model();
  std::mt19937 rng(9);
  Engine engine(model, nullptr, config(4, 2048, 64));
  Request r = test::greedy_request(random_prompt(rng, 12), 20);
  const std::vector<int32_t> free_run = run_all(engine, {r})[0].tokens;

  Request stop = r;
  stop.stop.stop_token_ids = {free_run[5]};
  auto stopped = run_all(engine, {stop})[0];
  const auto first_hit = std::find(free_run.begin(), free_run.end(), free_run[5]) - free_run.begin();
  CHECK(stopped.tokens.size() == static_cast<size_t>(first_hit + 1));  // the stop token is the last
  CHECK(stopped.last.finish_reason == FinishReason::stop);

  Request min_tokens = stop;
  min_tokens.stop.min_tokens = 10;
  auto held = run_all(engine, {min_tokens})[0];
  CHECK(held.tokens.size() >= 10);
  for (size_t i = 0; i + 1 < std::min<size_t>(held.tokens.size(), 10); ++i) CHECK(held.tokens[i] != free_run[5]);
}

TEST_CASE("an aborted request ends at once and frees its blocks", "[engine]") {
  const Model& model = fixture_model();
  std::mt19937 rng(3);
  Engine engine(model, nullptr, config(4, 2048, 64));
  // The abort races the generation it stops (a loaded machine can finish 90 tiny steps first), so
  // it is tried a few times; one abort mid-generation is required, and every try frees its blocks.
  int aborted_mid_run = 0;
  for (int attempt = 0; attempt < 5 && aborted_mid_run == 0; ++attempt) {
    auto stream = std::make_shared<RequestStream>();
    const int64_t id = engine.submit(test::greedy_request(random_prompt(rng, 30), 90), stream);
    std::optional<RequestOutput> out = stream->next(std::chrono::milliseconds(20000));
    REQUIRE(out.has_value());
    engine.abort(id);
    while (!out->finished) {
      out = stream->next(std::chrono::milliseconds(20000));
      REQUIRE(out.has_value());
    }
    if (out->finish_reason == FinishReason::abort) {
      CHECK(out->completion_tokens < 90);
      ++aborted_mid_run;
    } else {
      CHECK(out->completion_tokens == 90);
    }
    // The loop publishes stats after the step that finished it.
    for (int i = 0; i < 100 && engine.stats().kv_cache_usage > 0.0; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    CHECK(engine.stats().kv_cache_usage == 0.0);
  }
  CHECK(aborted_mid_run == 1);

  // Aborted while still waiting: ends with no tokens.
  auto stream = std::make_shared<RequestStream>();
  engine.abort(engine.submit(test::greedy_request(random_prompt(rng, 30), 90), stream));
  std::optional<RequestOutput> out = stream->next(std::chrono::milliseconds(20000));
  REQUIRE(out.has_value());
  if (out->finished) {
    CHECK(out->finish_reason == FinishReason::abort);
  }
}

TEST_CASE("requests that can never run are refused at submit", "[engine]") {
  const Model& model = fixture_model();
  Engine engine(model, nullptr, config(4, 2048, 4));
  auto stream = std::make_shared<RequestStream>();
  CHECK_THROWS_WITH(engine.submit(test::greedy_request({}, 4), stream), Catch::Contains("no tokens"));
  CHECK_THROWS_WITH(engine.submit(test::greedy_request({1, 999}, 4), stream), Catch::Contains("outside the vocabulary"));
  CHECK_THROWS_WITH(engine.submit(test::greedy_request(std::vector<int32_t>(128, 5), 4), stream), Catch::Contains("context"));
  // The cache (4 blocks of 16) is smaller than the model's context (128): the context is clamped
  // to what it holds, so a prompt that fills it is refused at once instead of ending early.
  CHECK(engine.max_model_len() == 64);
  CHECK_THROWS_WITH(engine.submit(test::greedy_request(std::vector<int32_t>(64, 5), 4), stream),
                    Catch::Contains("the context is 64"));
  Request bad_stop = test::greedy_request({1, 2}, 4);
  bad_stop.stop.stop_token_ids = {5, 512};
  CHECK_THROWS_WITH(engine.submit(bad_stop, stream), Catch::Contains("stop_token_ids names token id 512"));
}

TEST_CASE("an explicit context longer than the KV cache holds is refused at start", "[engine]") {
  EngineConfig c = config(4, 2048, 4);
  c.max_model_len = 100;
  CHECK_THROWS_WITH(Engine(fixture_model(), nullptr, c), Catch::Contains("more than the KV cache holds (64 tokens)"));
}

TEST_CASE("the n choices of one prompt share its blocks through the prefix cache", "[engine]") {
  const Model& model = fixture_model();
  std::mt19937 rng(21);
  Engine engine(model, nullptr, config(8, 2048, 64));
  const std::vector<int32_t> prompt = random_prompt(rng, 50);  // three full blocks of 16
  std::vector<Request> choices;
  for (int i = 0; i < 4; ++i) {
    Request r = test::greedy_request(prompt, 6);
    r.sampling.temperature = 1.0f;
    r.sampling.seed = static_cast<uint64_t>(i);
    r.prefix_group = 99;
    choices.push_back(r);
  }
  auto out = run_all(engine, choices);
  CHECK(out[0].last.cached_prompt_tokens == 0);
  for (int i = 1; i < 4; ++i) CHECK(out[i].last.cached_prompt_tokens == 48);
  CHECK(engine.stats().prefix_hit_tokens == 3 * 48);
  CHECK(engine.stats().prompt_tokens == 4 * 50);
}

TEST_CASE("the engine starts the runner's thread pool, sized by its cpu list, before the constructor returns",
          "[engine]") {
  // One core of this process's cpuset, whatever the machine; unpinned, as the tests share it.
  const TopologyInfo process = Topology::system().process_info();
  REQUIRE_FALSE(process.cores.empty());
  RunnerOptions options;
  options.pin_threads = false;
  options.cpu_list = format_cpu_list(process.cores.front().os_cpus);
  ModelRunner runner(fixture_model(), options);
  if (runner.uses_reference()) return;  // no pool on the scalar reference path
  CHECK(runner.thread_bindings().empty());
  Engine engine(runner, nullptr, config(1, 64, 8));
  CHECK(runner.thread_bindings().size() == 1);
  CHECK(runner.num_threads() == 1);
  std::mt19937 rng(7);
  CHECK(run_all(engine, {test::greedy_request(random_prompt(rng, 5), 3)})[0].tokens.size() == 3);
}

// Phi-3 longrope (phi3_longrope: original_max_position_embeddings 24). The 20-token prompt runs
// with the short factors; the step that takes a sequence past 24 tokens recomputes it with the
// long ones, as transformers' Phi-3 generate() drops its cache there, so the greedy tokens are
// transformers' (the fixture's), whether the prompt runs whole or in chunks of 8. A prompt
// already past 24 tokens prefilled in chunks uses the long factors in every chunk (the engine
// passes the whole length), as transformers' single forward over it does. Prefix caching is off
// for the model: no prompt is served from blocks rotated with the other set.
TEST_CASE("longrope: greedy tokens equal transformers' across original_max_position_embeddings", "[engine]") {
  const auto dir = test::fixtures_dir() / "models" / "phi3_longrope";
  const Model model = load_model(dir);
  REQUIRE(model.config.rope_scaling.original_max_position_embeddings == 24);
  const auto j = read_json_file(dir / "expected_logits.json");
  const auto prompt = j.at("prompt").get<std::vector<int32_t>>();
  const auto want = j.at("greedy_tokens").get<std::vector<int32_t>>();
  REQUIRE(prompt.size() + want.size() > 24);
  std::vector<int32_t> long_prompt = prompt;  // 25 tokens: past the length from the start
  long_prompt.insert(long_prompt.end(), want.begin(), want.begin() + 5);
  const std::vector<int32_t> long_want(want.begin() + 5, want.end());
  for (int budget : {2048, 8}) {
    INFO("token budget " << budget);
    Engine engine(model, nullptr, config(3, budget, 16));
    auto out = run_all(engine, {test::greedy_request(prompt, 8), test::greedy_request(prompt, 8), test::greedy_request(long_prompt, 3)});
    CHECK(out[0].tokens == want);
    CHECK(out[1].tokens == want);
    CHECK(out[2].tokens == long_want);
    CHECK(out[1].last.cached_prompt_tokens == 0);
    CHECK(engine.stats().num_preemptions >= 2);  // each 20-token prompt's sequence recomputed once
  }
}

// Mixture of experts through the engine, whose paged KV cache and prefix cache know nothing of
// experts: the fixture's greedy tokens alone, with the prompt's first block from the prefix cache
// next to a sibling in the same batch, and with the prompt chunked 8 tokens a step (mixtral_moe's
// window 8 is shorter than the prompt).
TEST_CASE("mixture of experts: greedy tokens equal transformers' alone, batched, chunked and from the prefix cache",
          "[engine][moe]") {
  for (const char* name : {"mixtral_moe", "qwen3_moe"}) {
    const auto dir = test::fixtures_dir() / "models" / name;
    const Model model = load_model(dir);
    const auto j = read_json_file(dir / "expected_logits.json");
    const auto prompt = j.at("prompt").get<std::vector<int32_t>>();
    const auto want = j.at("greedy_tokens").get<std::vector<int32_t>>();
    for (int budget : {2048, 8}) {
      INFO(name << ", token budget " << budget);
      Engine engine(model, nullptr, config(3, budget, 16));
      const auto alone = run_all(engine, {test::greedy_request(prompt, 8)});
      CHECK(alone[0].tokens == want);
      const auto again = run_all(engine, {test::greedy_request(prompt, 8), test::greedy_request(prompt, 8)});
      CHECK(again[0].tokens == want);
      CHECK(again[1].tokens == want);
      CHECK(again[0].last.cached_prompt_tokens == 16);  // the 20-token prompt's full first block
    }
  }
}
