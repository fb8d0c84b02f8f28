// The forward pass against Hugging Face transformers: tiny random checkpoints of every supported
// architecture (tests/fixtures/models/*, made by scripts/make_fixtures.py) and the real trained
// stories260K checkpoint. transformers ran them in FP32 with eager attention after reloading the
// saved folder, so BF16/F16 checkpoints are compared on the same (exactly upcast) weights.
//
// Tolerance for the FP32 reference path: |ours - theirs| <= 1e-4 + 1e-3 * |theirs| for every
// logit. The fixtures store 6 significant digits (relative error <= 5e-7); the rest is FP32
// summation order (seen with the scalar reference forward: at most 5.4e-5 absolute, about 3e-6
// relative, on logits that spread over several units, up to ~20 for llama_tied).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "kv/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/rope_params.h"
#include "runtime/file_io.h"
#include "test_paths.h"

using namespace slab;

namespace {

constexpr float kAtol = 1e-4f;
constexpr float kRtol = 1e-3f;

struct Expected {
  std::vector<int> prompt;
  std::vector<std::vector<float>> logits;  // one row per prompt position
  std::vector<int> greedy;
};

Expected read_expected(const std::filesystem::path& path) {
  const auto j = read_json_file(path);
  Expected e;
  e.prompt = j.at("prompt").get<std::vector<int>>();
  e.logits = j.at("logits").get<std::vector<std::vector<float>>>();
  e.greedy = j.at("greedy_tokens").get<std::vector<int>>();
  REQUIRE(e.logits.size() == e.prompt.size());
  return e;
}

ContiguousKvCache make_cache(const Model& m, int slots, int max_tokens) {
  KvGeometry g;
  g.num_layers = m.config.num_layers;
  g.num_kv_heads = m.config.num_kv_heads;
  g.head_dim = m.config.head_dim;
  g.block_size = 16;
  return ContiguousKvCache(g, slots, max_tokens);
}

// Compares one row of logits; reports the worst element on failure.
void check_row(const float* got, const std::vector<float>& want, const std::string& what) {
  size_t worst = 0;
  float worst_excess = -1.0f, worst_diff = 0.0f;
  for (size_t i = 0; i < want.size(); ++i) {
    const float diff = std::fabs(got[i] - want[i]);
    const float excess = diff - (kAtol + kRtol * std::fabs(want[i]));
    if (excess > worst_excess || !std::isfinite(got[i])) {
      worst_excess = std::isfinite(got[i]) ? excess : INFINITY;
      worst = i;
      worst_diff = diff;
    }
  }
  INFO(what << ": worst logit " << worst << ": got " << got[worst] << ", want " << want[worst] << " (|diff| "
            << worst_diff << ")");
  CHECK(worst_excess <= 0.0f);
}

int argmax_row(const float* row, int n) { return static_cast<int>(std::max_element(row, row + n) - row); }

std::vector<int> slice(const std::vector<int>& v, size_t begin, size_t end) {
  return {v.begin() + static_cast<std::ptrdiff_t>(begin), v.begin() + static_cast<std::ptrdiff_t>(end)};
}

const char* const kFixtureModels[] = {"llama_gqa",     "llama3_rope_scaling",    "llama_tied",
                                      "llama_bias",    "mistral_sliding_window", "qwen2_bias",
                                      "qwen3_qk_norm", "phi3_sliding_window",    "phi3_longrope",
                                      "gemma3_text",   "gemma3_conditional",     "mixtral_moe",
                                      "qwen3_moe"};

}  // namespace

TEST_CASE("forward matches transformers on every fixture architecture", "[model][logits]") {
  for (const char* name : kFixtureModels) {
    DYNAMIC_SECTION(name) {
      const auto dir = slab::test::fixtures_dir() / "models" / name;
      const Model m = load_model(dir);
      const Expected e = read_expected(dir / "expected_logits.json");
      const int vocab = m.config.vocab_size;
      const int n = static_cast<int>(e.prompt.size());

      // (1) The whole prompt in one pass, logits for every position.
      {
        ContiguousKvCache cache = make_cache(m, 1, 64);
        ForwardBatch b{e.prompt, {{0, 0, n, cache.block_table(0)}}, true};
        const auto logits = forward(m, b, cache);
        REQUIRE(logits.size() == static_cast<size_t>(n) * vocab);
        for (int t = 0; t < n; ++t) {
          check_row(&logits[static_cast<size_t>(t) * vocab], e.logits[t], "prefill position " + std::to_string(t));
        }
      }

      // (2) Token by token, then greedy decoding continues the same cache. A longrope model
      // (phi3_longrope: original_max_position_embeddings 24) recomputes the whole sequence on
      // its first step past that length, as transformers' Phi-3 generate() does; the sequence
      // moves to slot 1 of the cache for that.
      {
        ContiguousKvCache cache = make_cache(m, 2, 64);
        std::vector<float> last;
        for (int t = 0; t < n; ++t) {
          ForwardBatch b{{e.prompt[t]}, {{0, t, 1, cache.block_table(0)}}, false};
          last = forward(m, b, cache);
          REQUIRE(last.size() == static_cast<size_t>(vocab));
          check_row(last.data(), e.logits[t], "decode position " + std::to_string(t));
        }
        std::vector<int> generated;
        int slot = 0;
        for (size_t i = 0; i < e.greedy.size(); ++i) {
          generated.push_back(argmax_row(last.data(), vocab));
          const int pos = n + static_cast<int>(i);
          if (uses_long_rope(m.config, pos + 1) && !uses_long_rope(m.config, pos)) {
            std::vector<int> all = e.prompt;
            all.insert(all.end(), generated.begin(), generated.end());
            slot = 1;
            ForwardBatch b{all, {{1, 0, pos + 1, cache.block_table(1)}}, false};
            last = forward(m, b, cache);
            continue;
          }
          ForwardBatch b{{generated.back()}, {{slot, pos, 1, cache.block_table(slot)}}, false};
          last = forward(m, b, cache);
        }
        CHECK(generated == e.greedy);
      }

      // (3) Two sequences of different lengths in one batch, then a mixed continuation step,
      // each matching what it gives alone. Sequence 1 runs the prompt reversed.
      {
        std::vector<int> other(e.prompt.rbegin(), e.prompt.rend());
        ContiguousKvCache alone_cache = make_cache(m, 1, 64);
        ForwardBatch alone{other, {{0, 0, n, alone_cache.block_table(0)}}, true};
        const auto other_logits = forward(m, alone, alone_cache);

        const int a0 = 12, a1 = 7;  // first pass: 12 tokens of seq 0, 7 of seq 1
        ContiguousKvCache cache = make_cache(m, 2, 64);
        std::vector<int> tokens = slice(other, 0, a1);
        const auto p0 = slice(e.prompt, 0, a0);
        tokens.insert(tokens.end(), p0.begin(), p0.end());
        ForwardBatch b1{tokens,
                        {{1, 0, a1, cache.block_table(1)}, {0, 0, a0, cache.block_table(0)}},
                        true};  // seq 1 first: order is the batch's
        const auto l1 = forward(m, b1, cache);
        REQUIRE(l1.size() == static_cast<size_t>(a0 + a1) * vocab);
        for (int t = 0; t < a1; ++t) {
          const std::vector<float> want(other_logits.begin() + static_cast<std::ptrdiff_t>(t) * vocab,
                                        other_logits.begin() + static_cast<std::ptrdiff_t>(t + 1) * vocab);
          check_row(&l1[static_cast<size_t>(t) * vocab], want, "batched seq 1 position " + std::to_string(t));
        }
        for (int t = 0; t < a0; ++t) {
          check_row(&l1[static_cast<size_t>(a1 + t) * vocab], e.logits[t],
                    "batched seq 0 position " + std::to_string(t));
        }
        // Second pass: the rest of seq 0 (8 tokens) and 2 more of seq 1; last-token logits only.
        tokens = slice(e.prompt, a0, n);
        const auto o = slice(other, a1, a1 + 2);
        tokens.insert(tokens.end(), o.begin(), o.end());
        ForwardBatch b2{tokens, {{0, a0, n - a0, cache.block_table(0)}, {1, a1, 2, cache.block_table(1)}}, false};
        const auto l2 = forward(m, b2, cache);
        REQUIRE(l2.size() == 2u * vocab);
        check_row(&l2[0], e.logits[n - 1], "batched seq 0 last position");
        const std::vector<float> want(other_logits.begin() + static_cast<std::ptrdiff_t>(a1 + 1) * vocab,
                                      other_logits.begin() + static_cast<std::ptrdiff_t>(a1 + 2) * vocab);
        check_row(&l2[vocab], want, "batched seq 1 position " + std::to_string(a1 + 1));
      }
    }
  }
}

TEST_CASE("stories260K: greedy continuation of BOS equals transformers'", "[model][logits]") {
  const auto dir = slab::test::testdata_or_skip("models/stories260K");
  if (dir.empty()) return;
  const auto j = read_json_file(slab::test::fixtures_dir() / "stories260K_expected.json");
  const auto want_tokens = j.at("greedy_tokens").get<std::vector<int>>();
  const auto step_logits = j.at("step_logits").get<std::vector<std::vector<float>>>();
  const auto prompt = j.at("prompt").get<std::vector<int>>();
  // The fixture's own decoding (sentencepiece, in the script) is a story; the tokenizer module
  // is tested elsewhere, so here the text only documents what the tokens say.
  CHECK_THAT(j.at("text").get<std::string>(), Catch::StartsWith("Once upon a time"));

  const Model m = load_model(dir);
  REQUIRE(prompt == std::vector<int>{m.config.bos_token_id});
  const int vocab = m.config.vocab_size;
  ContiguousKvCache cache = make_cache(m, 1, 128);
  ForwardBatch b{prompt, {{0, 0, 1, cache.block_table(0)}}, false};
  std::vector<float> logits = forward(m, b, cache);
  std::vector<int> got;
  for (size_t i = 0; i < want_tokens.size(); ++i) {
    if (i < step_logits.size()) check_row(logits.data(), step_logits[i], "step " + std::to_string(i));
    got.push_back(argmax_row(logits.data(), vocab));
    ForwardBatch next{{got.back()}, {{0, static_cast<int>(i) + 1, 1, cache.block_table(0)}}, false};
    logits = forward(m, next, cache);
  }
  CHECK(got == want_tokens);
}
