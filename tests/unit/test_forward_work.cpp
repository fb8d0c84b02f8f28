// The least work a forward pass had to do (model/forward_work.h): counted by the runner from the
// batch's shape, checked here against the fixtures' shapes worked out by hand; and the time bound
// it gives with a machine's peaks.
#include <catch2/catch.hpp>

#include <vector>

#include "kv/contiguous_kv_cache.h"
#include "model/forward_work.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "runtime/cpu_features.h"
#include "test_paths.h"

using namespace slab;

namespace {

// Null, with a message, where no BF16 kernel set runs (the reference path counts no work).
std::unique_ptr<ModelRunner> fast_runner(const char* fixture) {
  if (!cpu_features().has_avx2_kernels() && !cpu_features().has_avx512_bf16_kernels()) {
    WARN("skipped: no BF16 kernel set runs on this CPU (the reference path counts no work)");
    return nullptr;
  }
  RunnerOptions o;
  o.pin_threads = false;
  o.n_threads = 2;
  return load_model_runner(test::fixtures_dir() / "models" / fixture, o);
}

ContiguousKvCache make_cache(const ModelConfig& c, int slots, int max_tokens) {
  KvGeometry g;
  g.num_layers = c.num_layers;
  g.num_kv_heads = c.num_kv_heads;
  g.head_dim = c.head_dim;
  g.block_size = 16;
  return ContiguousKvCache(g, slots, max_tokens, KvDtype::bf16);
}

std::vector<int> tokens(int n, int vocab) {
  std::vector<int> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + 11) % vocab);
  return t;
}

// The work of one pass: the runner's counts before and after it.
ForwardWork pass_work(ModelRunner& runner, const ForwardBatch& batch, ContiguousKvCache& cache, int* bucket) {
  const ForwardWorkByRows before = runner.forward_work();
  (void)runner.forward(batch, cache);
  const ForwardWorkByRows d = runner.forward_work() - before;
  REQUIRE(d.total_passes() == 1);
  *bucket = ForwardWorkByRows::bucket(static_cast<int>(batch.tokens.size()));
  CHECK(d.passes[static_cast<size_t>(*bucket)] == 1);
  return d.work[static_cast<size_t>(*bucket)];
}

// Both fixtures' attention: hidden 32, 4 query heads and 2 KV heads of 8, 2 layers; the figures
// below are worked out from these.
void require_attention_shape(const ModelConfig& c) {
  REQUIRE(c.hidden_size == 32);
  REQUIRE(c.num_heads == 4);
  REQUIRE(c.num_kv_heads == 2);
  REQUIRE(c.head_dim == 8);
  REQUIRE(c.num_layers == 2);
}

}  // namespace

TEST_CASE("forward work: passes land in the bucket of their rows' power of two", "[model][forward_work]") {
  CHECK(ForwardWorkByRows::bucket(0) == 0);
  CHECK(ForwardWorkByRows::bucket(1) == 0);
  CHECK(ForwardWorkByRows::bucket(2) == 1);
  CHECK(ForwardWorkByRows::bucket(3) == 1);
  CHECK(ForwardWorkByRows::bucket(64) == 6);
  CHECK(ForwardWorkByRows::bucket(127) == 6);
  CHECK(ForwardWorkByRows::bucket(32768) == 15);
  CHECK(ForwardWorkByRows::bucket(1 << 20) == 15);
}

TEST_CASE("forward time bound: each bucket's larger term, summed", "[model][forward_work]") {
  ForwardWorkByRows w;
  // A decode-like bucket: 1 GFLOP of linears, 2 GB of weights, 0.5 GB of K/V.
  w.add(1, {1e9, 0, 2e9, 0.5e9});
  // A prefill-like bucket: 400 GFLOP of linears, 100 GFLOP of attention, 2 GB of weights.
  w.add(512, {400e9, 100e9, 2e9, 0});
  ForwardPeaks p;
  p.linear_flops_per_s = 1000e9;
  p.attention_flops_per_s = 500e9;
  p.read_bytes_per_s = 50e9;
  const ForwardBound b = forward_time_bound(w, p);
  // decode: max(0.001, 2.5 / 50 = 0.05); prefill: max(0.4 + 0.2, 0.04).
  CHECK(b.seconds == Approx(0.05 + 0.6));
  CHECK(b.compute_seconds == Approx(0.001 + 0.6));
  CHECK(b.memory_seconds == Approx(0.05 + 0.04));
  // Summing the two passes before bounding would have hidden one of the terms.
  ForwardWorkByRows together;
  together.add(1, {401e9, 100e9, 4e9, 0.5e9});
  CHECK(forward_time_bound(together, p).seconds < b.seconds);
  // No bandwidth measured: the compute terms alone.
  p.read_bytes_per_s = 0;
  CHECK(forward_time_bound(w, p).seconds == Approx(0.601));
  CHECK(forward_time_bound(ForwardWorkByRows{}, p).seconds == 0);
}

TEST_CASE("forward work of a dense model's pass: its linears, attention and K/V worked out by hand",
          "[model][forward_work]") {
  auto runner = fast_runner("llama_gqa");
  if (!runner) return;
  const ModelConfig& c = runner->config();
  require_attention_shape(c);
  REQUIRE(c.intermediate_size == 64);
  REQUIRE(c.vocab_size == 256);
  REQUIRE(c.sliding_window == 0);
  ContiguousKvCache cache = make_cache(c, 2, 64);
  // Sequence 0 has 5 tokens in the cache, sequence 1 seven.
  (void)runner->forward({tokens(5, 256), {{0, 0, 5, cache.block_table(0)}}}, cache);
  (void)runner->forward({tokens(7, 256), {{1, 0, 7, cache.block_table(1)}}}, cache);
  // Then one pass: sequence 0's token at position 5, sequence 1's tokens at 7, 8 and 9.
  int bucket = -1;
  const ForwardWork w = pass_work(
      *runner, {tokens(4, 256), {{0, 5, 1, cache.block_table(0)}, {1, 7, 3, cache.block_table(1)}}}, cache, &bucket);
  CHECK(bucket == 2);
  // Per token and layer: QKV 32 x (32 + 2 x 16), O 32 x 32, gate+up 32 x 128, down 64 x 32.
  const double per_token_layer = 32.0 * 64 + 32 * 32 + 32 * 128 + 64 * 32;
  // Two rows of logits (each sequence's last token) through the 256 x 32 head.
  CHECK(w.linear_flops == Approx(2 * (4 * 2 * per_token_layer + 2 * 256 * 32)));
  // Keys attended: 6 by sequence 0's token, 8 + 9 + 10 by sequence 1's; 4 heads of 8, 2 layers.
  CHECK(w.attention_flops == Approx(4.0 * 8 * 4 * 2 * (6 + 8 + 9 + 10)));
  // Every key of both sequences (6 and 10) read once a layer: K and V, 2 heads of 8, BF16.
  CHECK(w.kv_bytes == Approx(2 * (6 + 10) * (2 * 2 * 8 * 2)));
  // Every projection and the head, each once: at least their BF16 weights (packing may pad).
  CHECK(w.weight_bytes >= 2.0 * (2 * per_token_layer + 256 * 32));
  CHECK(w.weight_bytes == Approx(static_cast<double>(runner->decode_weight_bytes())));
}

TEST_CASE("forward work with a sliding window and a mixture of experts", "[model][forward_work]") {
  auto runner = fast_runner("mixtral_moe");
  if (!runner) return;
  const ModelConfig& c = runner->config();
  require_attention_shape(c);
  REQUIRE(c.sliding_window == 8);
  REQUIRE(c.num_experts == 4);
  REQUIRE(c.num_experts_per_tok == 2);
  const int inter = c.moe_intermediate_size > 0 ? c.moe_intermediate_size : c.intermediate_size;
  REQUIRE(inter == 48);
  ContiguousKvCache cache = make_cache(c, 1, 64);
  int bucket = -1;
  // A prompt of 10: positions 0..7 see 1..8 keys, 8 and 9 the last 8; all 10 keys are read.
  const ForwardWork prompt =
      pass_work(*runner, {tokens(10, c.vocab_size), {{0, 0, 10, cache.block_table(0)}}}, cache, &bucket);
  CHECK(bucket == 3);
  CHECK(prompt.attention_flops == Approx(4.0 * 8 * 4 * 2 * (36 + 8 + 8)));
  CHECK(prompt.kv_bytes == Approx(2 * 10 * (2 * 2 * 8 * 2)));
  // Positions 10, 11 and 12 see the last 8 keys each; together keys 3..12.
  const ForwardWork w =
      pass_work(*runner, {tokens(3, c.vocab_size), {{0, 10, 3, cache.block_table(0)}}}, cache, &bucket);
  CHECK(bucket == 1);
  CHECK(w.attention_flops == Approx(4.0 * 8 * 4 * 2 * (3 * 8)));
  CHECK(w.kv_bytes == Approx(2 * 10 * (2 * 2 * 8 * 2)));
  // Per token and layer: QKV 32 x 64, O 32 x 32, the router 32 x 4, and two experts' gate+up
  // (32 x 96) and down (48 x 32); one row of logits.
  const double per_token_layer = 32.0 * 64 + 32 * 32 + 32 * 4 + 2 * (32 * 96 + 48 * 32);
  CHECK(w.linear_flops == Approx(2 * (3 * 2 * per_token_layer + c.vocab_size * 32)));
  // The experts' bytes are those the pass ran: between two and all four a layer.
  const ModelRunner::MoeStepBytes moe = runner->last_moe_step();
  CHECK(moe.active_experts >= 2 * 2);
  CHECK(moe.active_experts <= 4 * 2);
  const double attention_and_head = 2.0 * 2 * (32 * 64 + 32 * 32 + 32 * 4) + 2.0 * c.vocab_size * 32;
  CHECK(w.weight_bytes >= attention_and_head + 2.0 * moe.active_experts * (32 * 96 + 48 * 32));
  // decode_weight_bytes counts num_experts_per_tok experts a layer, the pass what it ran.
  const double one_expert = static_cast<double>(moe.expert_bytes) / moe.active_experts;
  CHECK(w.weight_bytes == Approx(static_cast<double>(runner->decode_weight_bytes()) - 2 * 2 * one_expert +
                                 static_cast<double>(moe.expert_bytes)));
}
