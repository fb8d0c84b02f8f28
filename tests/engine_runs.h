#pragma once
// Running requests through an engine in the engine tests: collect each request's tokens, wait
// for the statistics of the last step, a prompt the models go on copying, and the engine config.
#include <catch2/catch.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "engine/engine.h"

namespace slab::test {

inline std::vector<int32_t> run_one(Engine& engine, const Request& r) {
  auto stream = std::make_shared<RequestStream>();
  engine.submit(r, stream);
  std::vector<int32_t> out;
  while (true) {
    std::optional<RequestOutput> o = stream->next(std::chrono::milliseconds(20000));
    REQUIRE(o.has_value());
    out.insert(out.end(), o->tokens.begin(), o->tokens.end());
    if (o->finished) return out;
  }
}

inline std::vector<std::vector<int32_t>> run_all(Engine& engine, const std::vector<Request>& requests) {
  auto stream = std::make_shared<RequestStream>();
  std::map<int64_t, size_t> index;
  for (const Request& r : requests) index[engine.submit(r, stream)] = index.size();
  std::vector<std::vector<int32_t>> outs(requests.size());
  size_t done = 0;
  while (done < requests.size()) {
    std::optional<RequestOutput> o = stream->next(std::chrono::milliseconds(20000));
    REQUIRE(o.has_value());
    auto& v = outs[index.at(o->request_id)];
    v.insert(v.end(), o->tokens.begin(), o->tokens.end());
    if (o->finished) ++done;
  }
  return outs;
}

// The stats once the loop has published the step that finished the last request (the final
// event reaches the stream before the step's counters are published).
inline EngineStats settled(const Engine& engine) {
  for (int i = 0; i < 5000; ++i) {
    const EngineStats s = engine.stats();
    if (s.steps > 0 && s.num_running == 0 && s.num_waiting == 0) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  FAIL("the engine did not settle");
  return {};
}

// A passage told twice and begun a third time: the model's continuation copies it.
inline std::vector<int32_t> copying_prompt(std::mt19937& rng) {
  std::vector<int32_t> passage(24);
  for (int32_t& t : passage) t = 3 + static_cast<int32_t>(rng() % 250);
  std::vector<int32_t> p;
  for (int i = 0; i < 2; ++i) p.insert(p.end(), passage.begin(), passage.end());
  p.insert(p.end(), passage.begin(), passage.begin() + 6);
  return p;
}

// The engine tests' configuration: 16-token blocks, num_blocks of them, max_num_seqs running,
// k speculative tokens (0: off; prompt lookup over n-grams of 3 down to 1 unless the engine
// gets a draft model), off above disable_by_batch_size running (0: never).
inline EngineConfig speculative_config(int max_num_seqs, int num_blocks, int k, int disable_by_batch_size = 0) {
  EngineConfig c;
  c.scheduler.max_num_seqs = max_num_seqs;
  c.scheduler.max_num_batched_tokens = 2048;
  c.scheduler.speculative = {k, 1, 3, disable_by_batch_size};
  c.block_size = 16;
  c.num_kv_blocks = num_blocks;
  return c;
}

// A sequence outside any engine (no stream, no tokenizer) that may speculate: for scheduler and
// proposer tests that play the engine's part.
inline std::unique_ptr<Sequence> speculating_sequence(int64_t id, std::vector<int32_t> prompt) {
  Request r;
  r.prompt = std::move(prompt);
  r.stop.max_tokens = 100;
  auto seq = std::make_unique<Sequence>(id, std::move(r), nullptr, nullptr, static_cast<uint64_t>(id));
  seq->may_speculate = true;
  seq->context_limit = 4096;
  return seq;
}

}  // namespace slab::test
