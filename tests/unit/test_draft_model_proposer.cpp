// Speculative decoding with a draft model: the proposer's own KV cache (drafts equal to the draft
// model's own greedy continuation, rolled back to the verified tokens, caught up in budgeted
// chunks, freed with its sequence), greedy output token-for-token as without speculation (a
// draft equal to the target, a truncated one and a random one; alone, batched, preempted, from
// the prefix cache), sampled output keeping the target's distribution, and the refusals.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "engine_requests.h"
#include "engine_runs.h"
#include "kv/contiguous_kv_cache.h"
#include "model/model_runner.h"
#include "test_paths.h"
#include "tokenizer/same_vocabulary.h"

using namespace slab;
using test::copying_prompt;
using test::greedy_request;
using test::run_all;
using test::run_one;
using test::settled;

namespace {

RunnerOptions runner_options(KernelChoice kernels = KernelChoice::automatic) {
  RunnerOptions o;
  o.kernels = kernels;
  o.n_threads = 2;
  return o;
}

// The first `layers` layers of the model, its embedding and head: a weaker draft of its vocabulary.
Model truncated(Model m, int layers) {
  m.config.num_layers = layers;
  m.weights.layers.resize(static_cast<size_t>(layers));
  return m;
}

// The same shapes with random weights: a draft that is nearly always wrong.
Model randomized(Model m, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, 0.5f);
  const auto fill = [&](std::vector<float>& v) {
    for (float& x : v) x = noise(rng);
  };
  fill(m.weights.token_embedding);
  fill(m.weights.lm_head);
  for (LayerWeights& l : m.weights.layers) {
    for (std::vector<float>* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) fill(*w);
  }
  return m;
}

double acceptance(const EngineStats& s) {
  return s.spec_num_draft_tokens == 0 ? 0.0 : static_cast<double>(s.spec_num_accepted_tokens) / s.spec_num_draft_tokens;
}

}  // namespace

TEST_CASE("the draft proposer drafts its model's greedy continuation and rolls its cache back to the verified tokens",
          "[speculative][draft]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  const Model draft_model = truncated(model, 1);
  // FP32 reference kernels: a chunk and one token at a time give the same logits.
  ModelRunner draft(draft_model, runner_options(KernelChoice::reference));
  ModelRunner oracle(draft_model, runner_options(KernelChoice::reference));
  std::mt19937 rng(3);
  const std::vector<int32_t> prompt = copying_prompt(rng);  // 54 tokens
  // The oracle: the draft model decoding greedily, one token per step, without speculation.
  const auto greedy_of = [&](const std::vector<int32_t>& context, int n) {
    Engine plain(oracle, nullptr, test::speculative_config(1, 64, 0));
    return run_one(plain, greedy_request(context, n));
  };
  const int total_blocks = 32;
  DraftModelProposer proposer(draft, model.config.vocab_size, total_blocks, 16, 2048);
  auto seq = test::speculating_sequence(1, prompt);
  std::vector<DraftSlot> slots = {{seq.get(), 4, {}}};
  proposer.propose(slots);
  CHECK(slots[0].draft == greedy_of(prompt, 4));
  CHECK(proposer.cached_tokens(1) == static_cast<int>(prompt.size()) + 3);  // the 4th draft is never run

  // Verification accepted two drafts and emitted a different third token.
  const std::vector<int32_t> d = slots[0].draft;
  seq->tokens.insert(seq->tokens.end(), {d[0], d[1], d[2] == 7 ? 8 : 7});
  proposer.verified(*seq);
  CHECK(proposer.cached_tokens(1) == static_cast<int>(prompt.size()) + 2);
  slots = {{seq.get(), 3, {}}};
  proposer.propose(slots);
  CHECK(slots[0].draft == greedy_of(seq->tokens, 3));

  // All three accepted and one more: the cache lacks the last draft and the new token.
  const std::vector<int32_t> d2 = slots[0].draft;
  seq->tokens.insert(seq->tokens.end(), d2.begin(), d2.end());
  seq->tokens.push_back(11);
  proposer.verified(*seq);
  CHECK(proposer.cached_tokens(1) == static_cast<int>(seq->tokens.size()) - 2);
  slots = {{seq.get(), 2, {}}};
  proposer.propose(slots);
  CHECK(slots[0].draft == greedy_of(seq->tokens, 2));

  // Finished, preempted or aborted: its blocks go back.
  proposer.forget(1);
  CHECK(proposer.cached_tokens(1) == 0);
  CHECK(proposer.num_free_blocks() == total_blocks);

  SECTION("a context longer than the catch-up budget is computed over several steps before it drafts") {
    DraftModelProposer budgeted(draft, model.config.vocab_size, total_blocks, 16, 20);
    auto fresh = test::speculating_sequence(2, prompt);
    std::vector<DraftSlot> one = {{fresh.get(), 4, {}}};
    budgeted.propose(one);
    CHECK(one[0].draft.empty());
    CHECK(budgeted.cached_tokens(2) == 20);
    budgeted.propose(one);
    CHECK(one[0].draft.empty());
    CHECK(budgeted.cached_tokens(2) == 40);
    budgeted.propose(one);  // the last 14 fit
    CHECK(one[0].draft == greedy_of(prompt, 4));
  }
  SECTION("short of blocks, the caches of sequences not drafting this step make room") {
    DraftModelProposer small(draft, model.config.vocab_size, 5, 16, 2048);  // 80 positions: one at a time
    auto a = test::speculating_sequence(3, prompt), b = test::speculating_sequence(4, prompt);
    std::vector<DraftSlot> for_a = {{a.get(), 4, {}}}, for_b = {{b.get(), 4, {}}};
    small.propose(for_a);
    small.propose(for_b);
    CHECK(small.cached_tokens(3) == 0);
    CHECK(small.cached_tokens(4) == static_cast<int>(prompt.size()) + 3);
    CHECK(for_b[0].draft == greedy_of(prompt, 4));
  }
}

TEST_CASE("greedy output with a draft model is token-for-token that without it", "[speculative][draft]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  std::mt19937 rng(5);
  const std::vector<int32_t> probe = copying_prompt(rng);
  const int probe_tokens = 40;
  ModelRunner target(model, runner_options());
  std::vector<int32_t> reference;
  {
    Engine engine(target, nullptr, test::speculative_config(1, 64, 0));
    reference = run_one(engine, greedy_request(probe, probe_tokens));
  }
  REQUIRE(reference.size() == static_cast<size_t>(probe_tokens));
  std::vector<Request> batch;
  for (int i = 0; i < 9; ++i) {
    std::vector<int32_t> p(static_cast<size_t>(5 + 3 * i));
    for (int32_t& t : p) t = 3 + static_cast<int32_t>(rng() % 250);
    batch.push_back(greedy_request(p, 12 + 2 * i));
  }
  batch.insert(batch.begin() + 4, greedy_request(probe, probe_tokens));
  std::vector<std::vector<int32_t>> batch_reference;
  for (const Request& r : batch) {
    Engine plain(target, nullptr, test::speculative_config(1, 64, 0));
    batch_reference.push_back(run_one(plain, r));
  }

  const Model truncated_model = truncated(model, 1);
  const Model random_model = randomized(model, 17);
  struct Draft {
    const char* name;
    const Model* model;
  };
  for (const Draft& d : {Draft{"the target itself", &model}, Draft{"its first layer", &truncated_model},
                         Draft{"random weights", &random_model}}) {
    INFO("draft: " << d.name);
    ModelRunner draft(*d.model, runner_options());
    const bool same = d.model == &model;
    for (int k : {1, 4}) {
      Engine engine(target, nullptr, test::speculative_config(1, 64, k), &draft);
      CHECK(run_one(engine, greedy_request(probe, probe_tokens)) == reference);
      const EngineStats s = settled(engine);
      CHECK(s.spec_num_draft_tokens > 0);
      CHECK(s.generation_tokens == probe_tokens);
      // Drafting for itself, every draft is the target's own greedy token: only a wrong draft KV
      // (a stale or missing position) would be rejected.
      if (same) CHECK(acceptance(s) > 0.9);
    }
    for (int disable : {0, 4}) {  // batched with sequences that speculate, and above 4 running with none that do
      Engine engine(target, nullptr, test::speculative_config(16, 128, 4, disable), &draft);
      CHECK(run_all(engine, batch) == batch_reference);
      if (same) CHECK(acceptance(settled(engine)) > 0.9);
    }
    {  // preempted in a cache too small for the batch
      Engine engine(target, nullptr, test::speculative_config(16, 12, 4), &draft);
      CHECK(run_all(engine, batch) == batch_reference);
      CHECK(settled(engine).num_preemptions > 0);
      if (same) CHECK(acceptance(settled(engine)) > 0.9);
    }
    {  // a prompt served from the prefix cache: the draft computes its own KV for it
      Engine engine(target, nullptr, test::speculative_config(4, 64, 4), &draft);
      CHECK(run_one(engine, greedy_request(probe, probe_tokens)) == reference);
      CHECK(run_one(engine, greedy_request(probe, probe_tokens)) == reference);
      std::vector<int32_t> extended = probe;
      extended.insert(extended.end(), reference.begin(), reference.begin() + 30);
      Engine plain(target, nullptr, test::speculative_config(1, 64, 0));
      CHECK(run_one(engine, greedy_request(extended, 10)) == run_one(plain, greedy_request(extended, 10)));
      const EngineStats s = settled(engine);
      CHECK(s.prefix_hit_tokens >= 64 + 64);
      if (same) CHECK(acceptance(s) > 0.9);
    }
  }
}

TEST_CASE("sampled output with a draft model keeps the target's distribution", "[speculative][draft]") {
  // The second token of each request is the first one verified against a draft. Its marginal
  // over many requests must be the target's, computed here by the scalar reference forward:
  // sum over t1 of p(t1) p(t2 | t1), with temperature 1 and top-k 3 as the requests ask.
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  std::mt19937 rng(8);
  const std::vector<int32_t> prompt = copying_prompt(rng);
  const ModelConfig& c = model.config;
  const auto top3 = [&](const std::vector<int32_t>& context) {
    ContiguousKvCache cache({c.num_layers, c.num_kv_heads, c.head_dim, 16}, 1, 128, KvDtype::f32);
    const ForwardBatch batch{
        {context.begin(), context.end()}, {{0, 0, static_cast<int>(context.size()), cache.block_table(0)}}, false};
    const std::vector<float> logits = forward(model, batch, cache);
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    std::partial_sort(ids.begin(), ids.begin() + 3, ids.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)];
    });
    std::map<int32_t, double> p;
    double total = 0.0;
    for (int i = 0; i < 3; ++i)
      total += p[ids[static_cast<size_t>(i)]] =
          std::exp(logits[static_cast<size_t>(ids[static_cast<size_t>(i)])] - logits[static_cast<size_t>(ids[0])]);
    for (auto& [t, q] : p) q /= total;
    return p;
  };
  std::map<int32_t, double> expected;
  for (const auto& [t1, p1] : top3(prompt)) {
    std::vector<int32_t> context = prompt;
    context.push_back(t1);
    for (const auto& [t2, p2] : top3(context)) expected[t2] += p1 * p2;
  }

  ModelRunner target(model, runner_options(KernelChoice::reference));
  const Model draft_model = truncated(model, 1);
  ModelRunner draft(draft_model, runner_options(KernelChoice::reference));
  Engine engine(target, nullptr, test::speculative_config(256, 2048, 2), &draft);
  const int n = 4000;
  Request r = greedy_request(prompt, 3);
  r.sampling.temperature = 1.0f;
  r.sampling.top_k = 3;
  std::vector<Request> requests(n, r);
  for (int i = 0; i < n; ++i) requests[static_cast<size_t>(i)].sampling.seed = static_cast<uint64_t>(1000 + i);
  const std::vector<std::vector<int32_t>> outs = run_all(engine, requests);
  std::map<int32_t, int> counts;
  for (const auto& out : outs) {
    REQUIRE(out.size() == 3);
    ++counts[out[1]];
  }
  double tv = 0.0;
  for (const auto& [t, p] : expected) tv += std::abs(p - counts[t] / static_cast<double>(n));
  for (const auto& [t, k] : counts) {
    if (!expected.contains(t)) tv += k / static_cast<double>(n);
  }
  tv /= 2;
  // At most 9 outcomes from 4000 draws: the sampling TV is ~0.02; accepting every draft, or
  // resampling a rejection from p itself, would move it by more than 0.1 with a third of the
  // second tokens drafted by this model.
  CHECK(tv < 0.045);
  const EngineStats s = settled(engine);
  CHECK(s.spec_num_drafts >= n / 4);  // decodes that found budget left after the step's prefill chunks
  CHECK(s.spec_num_accepted_tokens > 0);
  CHECK(s.spec_num_accepted_tokens < s.spec_num_draft_tokens);
}

TEST_CASE("a draft model of another vocabulary, too short a context or no draft length is refused",
          "[speculative][draft]") {
  const Model model = load_model(test::fixtures_dir() / "models" / "llama_gqa");
  ModelRunner target(model, runner_options(KernelChoice::reference));
  Model other = model;
  other.config.vocab_size = 128;
  other.weights.token_embedding.resize(static_cast<size_t>(128 * other.config.hidden_size));
  other.weights.lm_head.resize(static_cast<size_t>(128 * other.config.hidden_size));
  ModelRunner other_runner(other, runner_options(KernelChoice::reference));
  CHECK_THROWS_WITH(Engine(target, nullptr, test::speculative_config(1, 64, 4), &other_runner),
                    "the draft model's vocabulary has 128 tokens, the target's 256: a draft must share the target's "
                    "vocabulary (without a tokenizer, the same size)");
  Model short_context = model;
  short_context.config.max_position_embeddings = 64;
  ModelRunner short_runner(short_context, runner_options(KernelChoice::reference));
  CHECK_THROWS_WITH(Engine(target, nullptr, test::speculative_config(1, 64, 4), &short_runner),
                    Catch::Contains("reaches 64 positions, fewer than the target's context of 128 tokens"));
  EngineConfig shorter = test::speculative_config(1, 64, 4);
  shorter.max_model_len = 64;
  CHECK_NOTHROW(Engine(target, nullptr, shorter, &short_runner));
  CHECK_THROWS_WITH(Engine(target, nullptr, test::speculative_config(1, 64, 0), &short_runner),
                    "a draft model needs num_speculative_tokens > 0");
}

TEST_CASE("the real stories260K drafting for itself accepts nearly every draft, and a truncated draft changes nothing",
          "[speculative][draft]") {
  const std::string dir = test::stories260k_or_skip();
  if (dir.empty()) return;
  const Model model = load_model(dir);
  const auto tokenizer = load_tokenizer(dir);
  const std::vector<int32_t> prompt = tokenizer->encode("Once upon a time, there was a little girl named", true);
  ModelRunner target(model, runner_options());
  Engine plain(target, tokenizer.get(), test::speculative_config(1, 64, 0));
  const std::vector<int32_t> reference = run_one(plain, greedy_request(prompt, 60));
  std::vector<Request> batch(3, greedy_request(prompt, 60));
  batch[1].prompt = tokenizer->encode("The dog ran to the park", true);
  batch[2].prompt = tokenizer->encode("Tim had a red ball", true);
  std::vector<std::vector<int32_t>> batch_reference;
  for (const Request& r : batch) batch_reference.push_back(run_one(plain, r));

  ModelRunner itself(model, runner_options());
  Engine engine(target, tokenizer.get(), test::speculative_config(4, 64, 4), &itself);
  CHECK(run_one(engine, greedy_request(prompt, 60)) == reference);
  CHECK(run_all(engine, batch) == batch_reference);
  const EngineStats s = settled(engine);
  CHECK(acceptance(s) > 0.9);
  CHECK(s.steps < 60 + 60);  // two 60-token runs took far fewer passes than tokens

  const Model weak = truncated(model, 2);
  ModelRunner weak_runner(weak, runner_options());
  Engine weak_engine(target, tokenizer.get(), test::speculative_config(4, 64, 4), &weak_runner);
  CHECK(run_all(weak_engine, batch) == batch_reference);
  CHECK(acceptance(settled(weak_engine)) < acceptance(s));
}

namespace {

// The model with its (tied) embedding table padded to `vocab` rows of N(0, sigma) values, as
// checkpoints pad their tables past the tokenizer's tokens.
Model padded(Model m, int vocab, float sigma, uint32_t seed) {
  REQUIRE(m.weights.lm_head.empty());
  std::mt19937 rng(seed);
  std::normal_distribution<float> noise(0.0f, sigma);
  const size_t hidden = static_cast<size_t>(m.config.hidden_size);
  m.weights.token_embedding.resize(static_cast<size_t>(vocab) * hidden);
  for (size_t i = static_cast<size_t>(m.config.vocab_size) * hidden; i < m.weights.token_embedding.size(); ++i) {
    m.weights.token_embedding[i] = sigma == 0.0f ? 0.0f : noise(rng);
  }
  m.config.vocab_size = vocab;
  return m;
}

}  // namespace

TEST_CASE("a draft whose table is padded past the tokenizer's tokens drafts only the target's ids, output unchanged",
          "[speculative][draft]") {
  const std::string dir = test::stories260k_or_skip();
  if (dir.empty()) return;
  const Model model = load_model(dir);  // 512 rows, the tokenizer's 512 tokens
  const auto tokenizer = load_tokenizer(dir);
  REQUIRE(tokenizer->vocab_size() == 512);
  const std::vector<int32_t> prompt = tokenizer->encode("Once upon a time, there was a little girl named", true);
  ModelRunner target(model, runner_options());
  std::vector<int32_t> reference;
  {
    Engine plain(target, tokenizer.get(), test::speculative_config(1, 64, 0));
    reference = run_one(plain, greedy_request(prompt, 48));
  }

  // Padding rows far larger than the real ones: the draft's own argmax is mostly padding.
  const Model loud = padded(model, 640, 4.0f, 7);
  ModelRunner loud_runner(loud, runner_options());
  {
    DraftModelProposer unrestricted(loud_runner, 640, 16, 16, 2048);
    auto seq = test::speculating_sequence(1, prompt);
    std::vector<DraftSlot> slots = {{seq.get(), 4, {}}};
    unrestricted.propose(slots);
    REQUIRE(slots[0].draft.size() == 4);
    CHECK(std::any_of(slots[0].draft.begin(), slots[0].draft.end(), [](int32_t t) { return t >= 512; }));
  }
  {
    DraftModelProposer for_target(loud_runner, 512, 16, 16, 2048);
    auto seq = test::speculating_sequence(1, prompt);
    std::vector<DraftSlot> slots = {{seq.get(), 4, {}}};
    for_target.propose(slots);
    REQUIRE(slots[0].draft.size() == 4);
    CHECK(std::all_of(slots[0].draft.begin(), slots[0].draft.end(), [](int32_t t) { return t < 512; }));
  }
  {
    Engine engine(target, tokenizer.get(), test::speculative_config(4, 64, 4), &loud_runner);
    CHECK(run_one(engine, greedy_request(prompt, 48)) == reference);
    CHECK(acceptance(settled(engine)) > 0.9);  // the real rows are the target's own
  }

  // The target padded (zero rows, as unused rows often are) and the unpadded model drafting.
  const Model padded_target = padded(model, 576, 0.0f, 0);
  ModelRunner padded_runner(padded_target, runner_options());
  std::vector<int32_t> padded_reference;
  {
    Engine plain(padded_runner, tokenizer.get(), test::speculative_config(1, 64, 0));
    padded_reference = run_one(plain, greedy_request(prompt, 48));
  }
  ModelRunner small_draft(model, runner_options());
  {
    Engine engine(padded_runner, tokenizer.get(), test::speculative_config(4, 64, 4), &small_draft);
    CHECK(run_one(engine, greedy_request(prompt, 48)) == padded_reference);
    CHECK(settled(engine).spec_num_accepted_tokens > 0);
  }

  // Without a tokenizer nothing says which rows are padding; a table shorter than the tokenizer
  // misses real tokens.
  CHECK_THROWS_WITH(Engine(target, nullptr, test::speculative_config(1, 64, 4), &loud_runner),
                    "the draft model's vocabulary has 640 tokens, the target's 512: a draft must share the target's "
                    "vocabulary (without a tokenizer, the same size)");
  Model cut = model;
  cut.config.vocab_size = 500;
  cut.weights.token_embedding.resize(static_cast<size_t>(500 * cut.config.hidden_size));
  ModelRunner cut_runner(cut, runner_options());
  CHECK_THROWS_WITH(Engine(target, tokenizer.get(), test::speculative_config(1, 64, 4), &cut_runner),
                    "the draft model's vocabulary has 500 tokens, the target's 512: a draft must share the target's "
                    "vocabulary (sizes may differ only in padding past the tokenizer's 512 tokens)");
}

namespace {

// A vocabulary of plain pieces: what vocabulary_difference looks at, and nothing else.
class PieceTokenizer : public Tokenizer {
 public:
  PieceTokenizer(std::vector<std::string> pieces, std::vector<int32_t> special, std::optional<int32_t> eos)
      : pieces_(std::move(pieces)), special_(std::move(special)), eos_(eos) {}
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode(std::span<const int32_t>, bool) const override { return {}; }
  int32_t vocab_size() const override { return static_cast<int32_t>(pieces_.size()); }
  std::string id_to_piece(int32_t id) const override { return pieces_.at(static_cast<size_t>(id)); }
  std::optional<int32_t> piece_to_id(std::string_view) const override { return std::nullopt; }
  bool is_special(int32_t id) const override {
    return std::find(special_.begin(), special_.end(), id) != special_.end();
  }
  std::optional<int32_t> bos_id() const override { return 0; }
  std::optional<int32_t> eos_id() const override { return eos_; }
  std::string bos_token() const override { return pieces_[0]; }
  std::string eos_token() const override { return eos_ ? pieces_.at(static_cast<size_t>(*eos_)) : std::string(); }
  std::string token_bytes(int32_t id) const override { return id_to_piece(id); }

 private:
  std::vector<std::string> pieces_;
  std::vector<int32_t> special_;
  std::optional<int32_t> eos_;
};

}  // namespace

TEST_CASE("two tokenizers share a vocabulary only with the same size, pieces, special ids, BOS and EOS",
          "[speculative][draft]") {
  const std::vector<std::string> pieces = {"<s>", "</s>", "a", "b", "\u2581the"};
  const PieceTokenizer target(pieces, {0, 1}, 1);
  CHECK(vocabulary_difference(target, "T", PieceTokenizer(pieces, {0, 1}, 1), "D").empty());
  std::vector<std::string> other = pieces;
  other[4] = "the";
  CHECK(vocabulary_difference(target, "T", PieceTokenizer(other, {0, 1}, 1), "D") ==
        "token 4 is \"\u2581the\" in T, \"the\" in D");
  CHECK(vocabulary_difference(target, "T", PieceTokenizer(pieces, {0, 1, 3}, 1), "D") ==
        "token 3 (\"b\") is special in D only");
  CHECK(vocabulary_difference(target, "T", PieceTokenizer(pieces, {0, 1}, std::nullopt), "D") ==
        "the EOS id is 1 in T, none in D");
  other = pieces;
  other.push_back("c");
  CHECK(vocabulary_difference(target, "T", PieceTokenizer(other, {0, 1}, 1), "D") ==
        "the vocabulary of T has 5 tokens, that of D 6");
}
