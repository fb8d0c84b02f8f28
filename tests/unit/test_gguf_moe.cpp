// Mixture-of-experts GGUF files built here (tests/unit/test_gguf_converted.cpp runs the ones
// llama.cpp's converter wrote): the three ways a file lays out its experts load to the same
// weights, and what the engine does not run is refused naming the key or tensor.
#include <catch2/catch.hpp>

#include <cstddef>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf_writer.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "moe_weights.h"
#include "safetensors_writer.h"
#include "test_paths.h"

using Catch::Contains;
using namespace slab;
using namespace slab::test;

namespace {

enum class ExpertLayout {
  stacked,        // ffn_gate_exps, ffn_up_exps, ffn_down_exps [E, rows, cols] (today's converter)
  fused_gate_up,  // ffn_gate_up_exps [E, 2 · inter, hidden] (the converter's --fuse-gate-up-exps)
  per_expert,     // ffn_gate.E, ffn_up.E, ffn_down.E, one 2-D tensor each (older converters)
};

// Expert `expert`'s [rows, cols] matrix of experts stacked as [E, rows, cols].
std::vector<float> expert_matrix(const std::vector<float>& stacked, int expert, int rows, int cols) {
  const auto begin = stacked.begin() + static_cast<std::ptrdiff_t>(expert) * rows * cols;
  return {begin, begin + static_cast<std::ptrdiff_t>(rows) * cols};
}

// A tiny MoE (vocab 16, hidden 8, 2 heads of 4, 1 KV head, one layer, 4 experts of width 4, top 2)
// of architecture `arch` (llama: Mixtral; qwen3moe), the same values whatever the layout.
GgufBuilder tiny_moe(const std::string& arch, ExpertLayout layout, bool with_router = true) {
  const std::string a = arch + ".";
  const int hidden = 8, inter = 4, experts = 4;
  GgufBuilder g;
  g.kv_str("general.architecture", arch)
      .kv_u32(a + "block_count", 1)
      .kv_u32(a + "embedding_length", hidden)
      .kv_u32(a + "feed_forward_length", inter)
      .kv_u32(a + "attention.head_count", 2)
      .kv_u32(a + "attention.head_count_kv", 1)
      .kv_u32(a + "expert_count", experts)
      .kv_u32(a + "expert_used_count", 2);
  if (arch == "qwen3moe") g.kv_u32(a + "expert_feed_forward_length", inter);
  uint32_t seed = 7;
  g.tensor_f32("token_embd.weight", {8, 16}, random_values(128, seed++));
  g.tensor_f32("blk.0.attn_norm.weight", {8}, random_values(8, seed++));
  g.tensor_f32("blk.0.attn_q.weight", {8, 8}, random_values(64, seed++));
  g.tensor_f32("blk.0.attn_k.weight", {8, 4}, random_values(32, seed++));
  g.tensor_f32("blk.0.attn_v.weight", {8, 4}, random_values(32, seed++));
  g.tensor_f32("blk.0.attn_output.weight", {8, 8}, random_values(64, seed++));
  g.tensor_f32("blk.0.ffn_norm.weight", {8}, random_values(8, seed++));
  if (arch == "qwen3moe") {
    g.tensor_f32("blk.0.attn_q_norm.weight", {4}, random_values(4, seed++));
    g.tensor_f32("blk.0.attn_k_norm.weight", {4}, random_values(4, seed++));
  }
  if (with_router) g.tensor_f32("blk.0.ffn_gate_inp.weight", {8, 4}, random_values(32, seed++));
  const std::vector<float> gate = random_values(experts * inter * hidden, seed++);
  const std::vector<float> up = random_values(experts * inter * hidden, seed++);
  const std::vector<float> down = random_values(experts * hidden * inter, seed++);
  const uint64_t h = hidden, i = inter, e = experts;
  switch (layout) {
    case ExpertLayout::stacked:
      g.tensor_f32("blk.0.ffn_gate_exps.weight", {h, i, e}, gate);
      g.tensor_f32("blk.0.ffn_up_exps.weight", {h, i, e}, up);
      break;
    case ExpertLayout::fused_gate_up: {
      std::vector<float> gate_up;
      for (int x = 0; x < experts; ++x) {
        for (const auto* part : {&gate, &up}) {
          const std::vector<float> rows = expert_matrix(*part, x, inter, hidden);
          gate_up.insert(gate_up.end(), rows.begin(), rows.end());
        }
      }
      g.tensor_f32("blk.0.ffn_gate_up_exps.weight", {h, 2 * i, e}, gate_up);
      break;
    }
    case ExpertLayout::per_expert:
      for (int x = 0; x < experts; ++x) {
        const std::string n = std::to_string(x);
        g.tensor_f32("blk.0.ffn_gate." + n + ".weight", {h, i}, expert_matrix(gate, x, inter, hidden));
        g.tensor_f32("blk.0.ffn_up." + n + ".weight", {h, i}, expert_matrix(up, x, inter, hidden));
        g.tensor_f32("blk.0.ffn_down." + n + ".weight", {i, h}, expert_matrix(down, x, hidden, inter));
      }
      break;
  }
  if (layout != ExpertLayout::per_expert) g.tensor_f32("blk.0.ffn_down_exps.weight", {i, h, e}, down);
  g.tensor_f32("output_norm.weight", {8}, random_values(8, seed++));
  g.tensor_f32("output.weight", {8, 16}, random_values(128, seed++));
  return g;
}

// The config error `g` is refused with, or "(loaded)".
std::string refusal(const GgufBuilder& g) {
  const std::string bytes = g.bytes();
  try {
    (void)gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf"));
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "(loaded)";
}

}  // namespace

TEST_CASE("gguf MoE: stacked, fused gate+up and per-expert tensors load to the same experts", "[gguf][moe]") {
  for (const char* arch : {"llama", "qwen3moe"}) {
    DYNAMIC_SECTION(arch) {
      TempDir tmp;
      std::vector<Model> models;
      for (ExpertLayout layout : {ExpertLayout::stacked, ExpertLayout::fused_gate_up, ExpertLayout::per_expert}) {
        const auto path = tmp.path() / ("moe" + std::to_string(models.size()) + ".gguf");
        write_file(path, tiny_moe(arch, layout).bytes());
        models.push_back(load_model(path));
      }
      const ModelConfig& c = models[0].config;
      CHECK(c.model_type == (std::string(arch) == "llama" ? "mixtral" : "qwen3_moe"));
      CHECK(c.num_experts == 4);
      CHECK(c.num_experts_per_tok == 2);
      CHECK(c.moe_intermediate_size == 4);
      CHECK(c.moe_renormalize);  // llama.cpp renormalises both
      CHECK(c.layer_moe == std::vector<bool>{true});
      const LayerWeights& want = models[0].weights.layers[0];
      REQUIRE(want.experts.size() == 4u);
      CHECK(want.experts[3].w_down.size() == 32u);
      for (size_t m = 1; m < models.size(); ++m) {
        INFO("layout " << m);
        test::check_same_moe_layer(models[m].weights.layers[0], want);
      }
      // Expert 2's up rows are the third block of the stacked tensor (its seed: see tiny_moe).
      const std::vector<float> up = random_values(4 * 4 * 8, std::string(arch) == "llama" ? 16 : 18);
      CHECK(want.experts[2].w_up == expert_matrix(up, 2, 4, 8));
    }
  }
}

TEST_CASE("gguf MoE: what the engine does not run is refused naming the key or tensor", "[gguf][moe]") {
  const auto base = [](const std::string& arch = "llama") { return tiny_moe(arch, ExpertLayout::stacked); };
  SECTION("the files as built load") {
    CHECK(refusal(base()) == "(loaded)");
    CHECK(refusal(base("qwen3moe")) == "(loaded)");
  }
  SECTION("shared experts, by key") {
    GgufBuilder g = base("qwen3moe");
    g.kv_u32("qwen3moe.expert_shared_count", 1);
    CHECK_THAT(refusal(g), Contains("t.gguf") && Contains("'qwen3moe.expert_shared_count'") && Contains("shared"));
  }
  SECTION("shared experts, by tensor") {
    GgufBuilder g = base("qwen3moe");
    g.tensor_f32("blk.0.ffn_gate_shexp.weight", {8, 4}, std::vector<float>(32));
    CHECK_THAT(refusal(g), Contains("blk.0.ffn_gate_shexp.weight") && Contains("shared experts"));
  }
  SECTION("expert groups") {
    GgufBuilder g = base();
    g.kv_u32("llama.expert_group_count", 4);
    CHECK_THAT(refusal(g), Contains("'llama.expert_group_count'"));
  }
  SECTION("sigmoid routing") {
    GgufBuilder g = base();
    g.kv_u32("llama.expert_gating_func", 2);
    CHECK_THAT(refusal(g), Contains("'llama.expert_gating_func'") && Contains("softmax"));
  }
  SECTION("weights left unnormalised") {
    GgufBuilder g = base("qwen3moe");
    g.kv_bool("qwen3moe.expert_weights_norm", false);
    CHECK_THAT(refusal(g), Contains("'qwen3moe.expert_weights_norm'"));
  }
  SECTION("scaled weights") {
    GgufBuilder g = base();
    g.kv_f32("llama.expert_weights_scale", 2.5f);
    CHECK_THAT(refusal(g), Contains("'llama.expert_weights_scale'"));
  }
  SECTION("a layer without a router") {
    CHECK_THAT(refusal(tiny_moe("llama", ExpertLayout::stacked, false)),
               Contains("blk.0.ffn_gate_inp.weight") && Contains("without experts"));
  }
  SECTION("experts without a used count") {
    GgufBuilder g;
    g.kv_str("general.architecture", "qwen3moe")
        .kv_u32("qwen3moe.block_count", 1)
        .kv_u32("qwen3moe.embedding_length", 8)
        .kv_u32("qwen3moe.expert_feed_forward_length", 4)
        .kv_u32("qwen3moe.attention.head_count", 2)
        .kv_u32("qwen3moe.expert_count", 4)
        .tensor_f32("token_embd.weight", {8, 16}, std::vector<float>(128))
        .tensor_f32("blk.0.ffn_gate_inp.weight", {8, 4}, std::vector<float>(32));
    CHECK_THAT(refusal(g), Contains("'qwen3moe.expert_used_count'") && Contains("missing"));
  }
  SECTION("experts in an architecture without them") {
    GgufBuilder g = base("qwen2");
    CHECK_THAT(refusal(g), Contains("'qwen2.expert_count'") && Contains("llama (Mixtral) and qwen3moe"));
  }
}
