// GGUF models: architecture metadata to ModelConfig, GGUF tensor names to Hugging Face ones,
// llama's interleaved Q/K rows put back, and the stories260K GGUF computing what its safetensors
// twin computes.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <tuple>

#include "gguf_writer.h"
#include "kv/contiguous_kv_cache.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model/rope_params.h"
#include "runtime/file_io.h"
#include "safetensors_writer.h"
#include "test_paths.h"

using Catch::Contains;
using namespace slab;
using namespace slab::test;

namespace {

// What the GGUF converter does to a llama Q or K matrix [heads*D, in]: within each head, row
// (half i, pair j) moves to position 2*j + i. Written from the description of the format, as the
// independent counterpart of the loader's inverse.
std::vector<float> interleave_rows(const std::vector<float>& w, int heads, int in) {
  const int rows = static_cast<int>(w.size()) / in, d = rows / heads, half = d / 2;
  std::vector<float> out(w.size());
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < half; ++j)
        std::memcpy(&out[static_cast<size_t>(h * d + 2 * j + i) * in],
                    &w[static_cast<size_t>(h * d + i * half + j) * in], sizeof(float) * in);
  return out;
}

// A tiny llama (vocab 16, hidden 8, 2 heads of 4, 1 KV head, 2 layers, MLP 12) as a Hugging Face
// folder and as a GGUF file with the same weights, Q/K rows interleaved as the converter does.
struct TinyPair {
  std::vector<TestTensor> hf;
  GgufBuilder gguf;
};

TinyPair tiny_llama_pair(bool tied) {
  TinyPair p;
  p.gguf.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 2)
      .kv_u32("llama.embedding_length", 8)
      .kv_u32("llama.feed_forward_length", 12)
      .kv_u32("llama.attention.head_count", 2)
      .kv_u32("llama.attention.head_count_kv", 1)
      .kv_u32("llama.context_length", 64)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2);
  uint32_t seed = 100;
  auto add = [&](const std::string& hf, const std::string& gg, std::vector<int64_t> shape, int interleave_heads = 0) {
    size_t n = 1;
    for (int64_t d : shape) n *= static_cast<size_t>(d);
    std::vector<float> v = random_values(n, seed++);
    p.hf.push_back({hf, "F32", shape, f32_bytes(v)});
    std::vector<uint64_t> dims(shape.rbegin(), shape.rend());
    p.gguf.tensor_f32(gg, dims,
                      interleave_heads ? interleave_rows(v, interleave_heads, static_cast<int>(shape.back())) : v);
  };
  add("model.embed_tokens.weight", "token_embd.weight", {16, 8});
  for (int i = 0; i < 2; ++i) {
    const std::string h = "model.layers." + std::to_string(i) + ".", g = "blk." + std::to_string(i) + ".";
    add(h + "input_layernorm.weight", g + "attn_norm.weight", {8});
    add(h + "self_attn.q_proj.weight", g + "attn_q.weight", {8, 8}, 2);
    add(h + "self_attn.k_proj.weight", g + "attn_k.weight", {4, 8}, 1);
    add(h + "self_attn.v_proj.weight", g + "attn_v.weight", {4, 8});
    add(h + "self_attn.o_proj.weight", g + "attn_output.weight", {8, 8});
    add(h + "post_attention_layernorm.weight", g + "ffn_norm.weight", {8});
    add(h + "mlp.gate_proj.weight", g + "ffn_gate.weight", {12, 8});
    add(h + "mlp.up_proj.weight", g + "ffn_up.weight", {12, 8});
    add(h + "mlp.down_proj.weight", g + "ffn_down.weight", {8, 12});
  }
  add("model.norm.weight", "output_norm.weight", {8});
  if (!tied) add("lm_head.weight", "output.weight", {16, 8});
  return p;
}

ContiguousKvCache make_cache(const Model& m, int max_tokens) {
  KvGeometry g;
  g.num_layers = m.config.num_layers;
  g.num_kv_heads = m.config.num_kv_heads;
  g.head_dim = m.config.head_dim;
  g.block_size = 16;
  return ContiguousKvCache(g, 1, max_tokens);
}

std::vector<float> all_logits(const Model& m, const std::vector<int>& prompt) {
  ContiguousKvCache cache = make_cache(m, 256);
  ForwardBatch b{prompt, {{0, 0, static_cast<int>(prompt.size()), cache.block_table(0)}}, true};
  return forward(m, b, cache);
}

std::vector<int> greedy(const Model& m, int first, int n) {
  ContiguousKvCache cache = make_cache(m, 256);
  std::vector<int> out{first};
  for (int i = 0; i < n; ++i) {
    ForwardBatch b{{out.back()}, {{0, i, 1, cache.block_table(0)}}, false};
    const std::vector<float> logits = forward(m, b, cache);
    out.push_back(static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin()));
  }
  return out;
}

}  // namespace

TEST_CASE("gguf: tensor names map to the Hugging Face names the loader asks for", "[gguf]") {
  CHECK(gguf_to_hf_tensor_name("token_embd.weight") == "model.embed_tokens.weight");
  CHECK(gguf_to_hf_tensor_name("output.weight") == "lm_head.weight");
  CHECK(gguf_to_hf_tensor_name("output_norm.weight") == "model.norm.weight");
  CHECK(gguf_to_hf_tensor_name("blk.17.attn_q.bias") == "model.layers.17.self_attn.q_proj.bias");
  CHECK(gguf_to_hf_tensor_name("blk.0.attn_output.weight") == "model.layers.0.self_attn.o_proj.weight");
  CHECK(gguf_to_hf_tensor_name("blk.3.attn_k_norm.weight") == "model.layers.3.self_attn.k_norm.weight");
  CHECK(gguf_to_hf_tensor_name("blk.3.ffn_norm.weight") == "model.layers.3.post_attention_layernorm.weight");
  CHECK(gguf_to_hf_tensor_name("blk.2.ffn_down.weight") == "model.layers.2.mlp.down_proj.weight");
  CHECK(gguf_to_hf_tensor_name("rope_freqs.weight").empty());
  CHECK(gguf_to_hf_tensor_name("blk.x.attn_q.weight").empty());
  CHECK(gguf_to_hf_tensor_name("blk..attn_q.weight").empty());
  CHECK(gguf_to_hf_tensor_name("blk.1.attn_qkv.weight").empty());
}

TEST_CASE("gguf: a llama file loads to the same config and weights as its Hugging Face twin", "[gguf]") {
  for (bool tied : {false, true}) {
    DYNAMIC_SECTION((tied ? "tied" : "untied")) {
      TinyPair p = tiny_llama_pair(tied);
      TempDir tmp;
      nlohmann::json config = {{"model_type", "llama"},
                               {"vocab_size", 16},
                               {"hidden_size", 8},
                               {"intermediate_size", 12},
                               {"num_hidden_layers", 2},
                               {"num_attention_heads", 2},
                               {"num_key_value_heads", 1},
                               {"rms_norm_eps", 1e-5},
                               {"rope_theta", 10000.0},
                               {"max_position_embeddings", 64},
                               {"tie_word_embeddings", tied},
                               {"eos_token_id", 2},
                               {"bos_token_id", 1}};
      write_file(tmp / "hf" / "config.json", config.dump());
      write_file(tmp / "hf" / "model.safetensors", safetensors_bytes(p.hf));
      write_file(tmp / "gguf" / "tiny.gguf", p.gguf.bytes());

      const Model hf = load_model(tmp / "hf");
      // The folder holding one .gguf and the file itself both name the model.
      const Model gg = load_model(tmp / "gguf");
      const Model gg_file = load_model(tmp / "gguf" / "tiny.gguf");
      CHECK(gg.config.model_type == "llama");
      CHECK(gg.config.tie_word_embeddings == tied);
      CHECK(gg.config.num_kv_heads == 1);
      CHECK(gg.config.head_dim == 4);
      CHECK(gg.config.max_position_embeddings == 64);
      CHECK(gg.config.eos_token_ids == std::vector<int>{2});
      CHECK(gg.config.bos_token_id == 1);
      CHECK(gg.weights.layers[1].wq == hf.weights.layers[1].wq);  // interleaving undone exactly
      CHECK(gg.weights.layers[0].wk == hf.weights.layers[0].wk);
      CHECK(gg.weights.layers[0].w_down == hf.weights.layers[0].w_down);
      CHECK(gg.weights.lm_head == hf.weights.lm_head);
      const std::vector<int> prompt{1, 5, 9, 3, 12, 7};
      CHECK(all_logits(gg, prompt) == all_logits(hf, prompt));
      CHECK(all_logits(gg_file, prompt) == all_logits(hf, prompt));
    }
  }
}

TEST_CASE("gguf: metadata the engine cannot honour is refused naming the key", "[gguf]") {
  auto with = [](auto&& edit) {
    TinyPair p = tiny_llama_pair(false);
    edit(p.gguf);
    const std::string bytes = p.gguf.bytes();
    return GgufFile::parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "t.gguf");
  };
  // Later duplicate keys are refused by the reader, so each case builds its own file.
  SECTION("an unknown architecture") {
    // Neighbours of the supported families are refused by name, not read as them.
    for (const char* arch : {"gemma2", "gemma3n", "phi2"}) {
      GgufBuilder g;
      g.kv_str("general.architecture", arch);
      const std::string b = g.bytes();
      REQUIRE_THROWS_WITH(
          gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.gguf")),
          Contains("t.gguf") && Contains("'general.architecture'") && Contains(std::string("'") + arch + "'"));
    }
  }
  SECTION("a mistyped key") {
    GgufBuilder g;
    g.kv_str("general.architecture", "qwen2").kv_str("qwen2.embedding_length", "eight");
    g.tensor_f32("token_embd.weight", {8, 16}, std::vector<float>(128));
    const std::string b = g.bytes();
    REQUIRE_THROWS_WITH(
        gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.gguf")),
        Contains("'qwen2.embedding_length'") && Contains("integer") && Contains("string"));
  }
  SECTION("experts without a router (Mixtral converts to architecture llama with llama.expert_count)") {
    // test_gguf_moe.cpp has the rest of what mixture-of-experts files may not say.
    REQUIRE_THROWS_WITH(gguf_model_config(with([](GgufBuilder& g) {
                          g.kv_u32("llama.expert_count", 8).kv_u32("llama.expert_used_count", 2);
                        })),
                        Contains("'blk.0.ffn_gate_inp.weight'") && Contains("without experts"));
  }
  SECTION("partial rotary") {
    REQUIRE_THROWS_WITH(gguf_model_config(with([](GgufBuilder& g) { g.kv_u32("llama.rope.dimension_count", 2); })),
                        Contains("'llama.rope.dimension_count'") && Contains("partial rotary"));
  }
  SECTION("YaRN") {
    REQUIRE_THROWS_WITH(gguf_model_config(with([](GgufBuilder& g) { g.kv_str("llama.rope.scaling.type", "yarn"); })),
                        Contains("'llama.rope.scaling.type'") && Contains("yarn"));
  }
  SECTION("RoPE divisors of the wrong size") {
    REQUIRE_THROWS_WITH(gguf_model_config(with([](GgufBuilder& g) {
                          g.tensor_f32("rope_freqs.weight", {3}, {1, 2, 4});
                        })),
                        Contains("'rope_freqs.weight'") && Contains("2 F32 frequency divisors"));
  }
  SECTION("linear scaling and a sliding window are read") {
    const ModelConfig c = gguf_model_config(with([](GgufBuilder& g) {
      g.kv_str("llama.rope.scaling.type", "linear").kv_f32("llama.rope.scaling.factor", 4.0f);
      g.kv_u32("llama.attention.sliding_window", 32);
    }));
    CHECK(c.rope_scaling.type == RopeScalingType::linear);
    CHECK(c.rope_scaling.factor == 4.0f);
    CHECK(c.model_type == "mistral");
    CHECK(c.sliding_window == 32);
  }
}

namespace {

// IEEE half bits of a value that is 0 or a normal half with at most 10 mantissa bits.
uint16_t exact_f16_bits(float v) {
  if (v == 0.0f) return 0;
  const float a = std::fabs(v);
  const int e = static_cast<int>(std::floor(std::log2(a)));
  const auto mant = static_cast<uint16_t>(std::lround((a / std::ldexp(1.0f, e) - 1.0f) * 1024.0f));
  return static_cast<uint16_t>((v < 0 ? 0x8000 : 0) | ((e + 15) << 10) | mant);
}

}  // namespace

TEST_CASE("gguf: F16 and BF16 tensors are read as such, Q/K rows reordered in their own dtype", "[gguf]") {
  // One Q matrix of 2 heads of 4 rows (8 columns), stored interleaved as F16 and as BF16.
  std::vector<float> hf(64);
  for (size_t i = 0; i < hf.size(); ++i) hf[i] = static_cast<float>(i) * 0.25f - 4.0f;  // exact in F16 and BF16
  std::string f16, bf16;
  for (float v : interleave_rows(hf, 2, 8)) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    f16 += GgufBuilder::pod(exact_f16_bits(v));
    bf16 += GgufBuilder::pod(static_cast<uint16_t>(bits >> 16));
  }
  for (const auto& [type, bytes, dtype] : {std::tuple{1u, f16, DType::f16}, std::tuple{30u, bf16, DType::bf16}}) {
    GgufBuilder g;
    g.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.embedding_length", 8)
        .kv_u32("llama.feed_forward_length", 8)
        .kv_u32("llama.attention.head_count", 2);
    g.tensor_f32("token_embd.weight", {8, 4}, std::vector<float>(32, 1.0f));
    g.tensor("blk.0.attn_q.weight", {8, 8}, type, bytes);
    const std::string file = g.bytes();
    const auto checkpoint =
        open_gguf_checkpoint(GgufFile::parse(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "t.gguf"));
    const TensorView q = checkpoint->tensor("model.layers.0.self_attn.q_proj.weight");
    CHECK(q.dtype == dtype);
    CHECK(q.shape == std::vector<int64_t>{8, 8});
    std::vector<float> got(64);
    convert_to_f32(q, got.data());
    CHECK(got == hf);
  }
}

TEST_CASE("gguf: a split model names split.count", "[gguf]") {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama").kv_u32("split.count", 3);
  const std::string b = g.bytes();
  REQUIRE_THROWS_WITH(
      gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.gguf")),
      Contains("'split.count'") && Contains("3 files"));
}

TEST_CASE("gguf: a folder with several .gguf files and no config.json is refused naming them", "[gguf]") {
  TempDir tmp;
  write_file(tmp / "a.gguf", "x");
  write_file(tmp / "b.gguf", "y");
  REQUIRE_THROWS_WITH(load_model_metadata(tmp.path()), Contains("a.gguf, b.gguf") && Contains("--model FILE"));
}

TEST_CASE("stories260K: the GGUF file computes the safetensors folder's logits and greedy text", "[gguf][logits]") {
  const auto folder = testdata_or_skip("models/stories260K");
  const auto gguf = testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
  if (folder.empty() || gguf.empty()) return;
  const Model hf = load_model(folder);
  const Model gg = load_model(gguf);
  CHECK(gg.config.num_layers == hf.config.num_layers);
  CHECK(gg.config.num_kv_heads == hf.config.num_kv_heads);
  CHECK(gg.config.head_dim == hf.config.head_dim);
  CHECK(gg.config.vocab_size == hf.config.vocab_size);
  CHECK(gg.config.rms_norm_eps == hf.config.rms_norm_eps);
  CHECK(gg.config.eos_token_ids == hf.config.eos_token_ids);
  const std::vector<std::vector<int>> prompts = {{1},
                                                 {1, 403, 407, 261, 378, 296},
                                                 {1, 29, 300, 418, 271, 260, 506, 305, 269, 400, 336, 299, 271, 309},
                                                 {1, 511, 3, 100, 200, 300, 400, 500, 2, 1, 7}};
  for (const auto& prompt : prompts) {
    const std::vector<float> want = all_logits(hf, prompt), got = all_logits(gg, prompt);
    REQUIRE(got.size() == want.size());
    float worst = 0.0f;
    for (size_t i = 0; i < want.size(); ++i)
      worst = std::max(worst, std::fabs(got[i] - want[i]) / (1.0f + std::fabs(want[i])));
    INFO("prompt of " << prompt.size() << " tokens");
    CHECK(worst <= 1e-5f);
  }
  CHECK(greedy(gg, 1, 100) == greedy(hf, 1, 100));
}

namespace {

// Hugging Face names back to GGUF ones, the test's own table (the loader maps the other way).
std::string hf_to_gguf(const std::string& hf) {
  static const std::vector<std::pair<std::string, std::string>> kSuffixes = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"post_attention_layernorm.weight", "ffn_norm.weight"},
      {"self_attn.q_proj.", "attn_q."},
      {"self_attn.k_proj.", "attn_k."},
      {"self_attn.v_proj.", "attn_v."},
      {"self_attn.o_proj.", "attn_output."},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"mlp.gate_proj.", "ffn_gate."},
      {"mlp.up_proj.", "ffn_up."},
      {"mlp.down_proj.", "ffn_down."}};
  if (hf == "model.embed_tokens.weight") return "token_embd.weight";
  if (hf == "model.norm.weight") return "output_norm.weight";
  if (hf == "lm_head.weight") return "output.weight";
  const std::string prefix = "model.layers.";
  REQUIRE(hf.rfind(prefix, 0) == 0);
  const size_t dot = hf.find('.', prefix.size());
  const std::string layer = hf.substr(prefix.size(), dot - prefix.size()), rest = hf.substr(dot + 1);
  for (const auto& [from, to] : kSuffixes) {
    if (rest.rfind(from, 0) == 0) return "blk." + layer + "." + to + rest.substr(from.size());
  }
  FAIL("no GGUF name for " << hf);
  return {};
}

// Llama 3.1 scaling as the GGUF converter stores it: per frequency, the divisor of the base
// frequency (1 for short wavelengths, `factor` for long ones, blended between), in double.
std::vector<float> llama3_divisors(const ModelConfig& c) {
  const RopeScaling& s = c.rope_scaling;
  const double low_wavelength = s.original_max_position_embeddings / s.low_freq_factor;
  const double high_wavelength = s.original_max_position_embeddings / s.high_freq_factor;
  std::vector<float> out;
  for (int i = 0; i < c.head_dim / 2; ++i) {
    const double freq = 1.0 / std::pow(static_cast<double>(c.rope_theta), 2.0 * i / c.head_dim);
    const double wavelength = 2.0 * M_PI / freq;
    if (wavelength < high_wavelength) {
      out.push_back(1.0f);
    } else if (wavelength > low_wavelength) {
      out.push_back(s.factor);
    } else {
      const double smooth = (s.original_max_position_embeddings / wavelength - s.low_freq_factor) /
                            (s.high_freq_factor - s.low_freq_factor);
      out.push_back(static_cast<float>(1.0 / ((1.0 - smooth) / s.factor + smooth)));
    }
  }
  return out;
}

// A Hugging Face fixture folder written as the GGUF converter would write it.
std::string gguf_from_hf_folder(const std::filesystem::path& dir) {
  const ModelConfig c = load_model_config(dir / "config.json");
  const std::string arch = c.model_type == "mistral" ? "llama" : c.model_type;
  const std::string a = arch + ".";
  GgufBuilder g;
  g.kv_str("general.architecture", arch)
      .kv_u32(a + "block_count", static_cast<uint32_t>(c.num_layers))
      .kv_u32(a + "context_length", static_cast<uint32_t>(c.max_position_embeddings))
      .kv_u32(a + "embedding_length", static_cast<uint32_t>(c.hidden_size))
      .kv_u32(a + "feed_forward_length", static_cast<uint32_t>(c.intermediate_size))
      .kv_u32(a + "attention.head_count", static_cast<uint32_t>(c.num_heads))
      .kv_u32(a + "attention.head_count_kv", static_cast<uint32_t>(c.num_kv_heads))
      .kv_u32(a + "attention.key_length", static_cast<uint32_t>(c.head_dim))
      .kv_u32(a + "attention.value_length", static_cast<uint32_t>(c.head_dim))
      .kv_u32(a + "rope.dimension_count", static_cast<uint32_t>(c.head_dim))
      .kv_f32(a + "rope.freq_base", c.rope_theta)
      .kv_f32(a + "attention.layer_norm_rms_epsilon", c.rms_norm_eps);
  if (c.sliding_window > 0) g.kv_u32(a + "attention.sliding_window", static_cast<uint32_t>(c.sliding_window));
  if (!c.eos_token_ids.empty()) g.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(c.eos_token_ids[0]));
  if (c.bos_token_id >= 0) g.kv_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(c.bos_token_id));
  if (c.rope_scaling.type == RopeScalingType::llama3)
    g.tensor_f32("rope_freqs.weight", {uint64_t(c.head_dim / 2)}, llama3_divisors(c));
  const auto checkpoint = open_safetensors_checkpoint(dir);
  for (const std::string& name : checkpoint->tensor_names()) {
    const TensorView v = checkpoint->tensor(name);
    std::vector<float> values(static_cast<size_t>(v.numel()));
    convert_to_f32(v, values.data());
    const int in = v.shape.size() == 2 ? static_cast<int>(v.shape[1]) : 1;
    if (arch == "llama" && name.find("q_proj") != std::string::npos) values = interleave_rows(values, c.num_heads, in);
    if (arch == "llama" && name.find("k_proj") != std::string::npos)
      values = interleave_rows(values, c.num_kv_heads, in);
    g.tensor_f32(hf_to_gguf(name), std::vector<uint64_t>(v.shape.rbegin(), v.shape.rend()), values);
  }
  return g.bytes();
}

}  // namespace

TEST_CASE("gguf: every fixture architecture written as GGUF computes transformers' logits", "[gguf][logits]") {
  for (const char* name : {"llama_gqa", "llama_tied", "llama_bias", "mistral_sliding_window", "qwen2_bias",
                           "qwen3_qk_norm", "llama3_rope_scaling"}) {
    DYNAMIC_SECTION(name) {
      const auto dir = fixtures_dir() / "models" / name;
      TempDir tmp;
      write_file(tmp / "model.gguf", gguf_from_hf_folder(dir));
      const Model m = load_model(tmp / "model.gguf");
      const Model hf = load_model(dir);
      CHECK(m.config.model_type == hf.config.model_type);
      CHECK(m.config.qkv_bias == hf.config.qkv_bias);
      CHECK(m.config.o_bias == hf.config.o_bias);
      CHECK(m.config.mlp_bias == hf.config.mlp_bias);
      CHECK(m.config.qk_norm == hf.config.qk_norm);
      CHECK(m.config.sliding_window == hf.config.sliding_window);
      CHECK(m.config.tie_word_embeddings == hf.config.tie_word_embeddings);
      CHECK(m.config.rope_scaling.type == hf.config.rope_scaling.type);
      const auto expected = read_json_file(dir / "expected_logits.json");
      const auto prompt = expected.at("prompt").get<std::vector<int>>();
      const auto want = expected.at("logits").get<std::vector<std::vector<float>>>();
      const std::vector<float> got = all_logits(m, prompt);
      const size_t vocab = static_cast<size_t>(m.config.vocab_size);
      REQUIRE(got.size() == want.size() * vocab);
      float worst_excess = -1.0f;
      for (size_t t = 0; t < want.size(); ++t) {
        for (size_t i = 0; i < vocab; ++i) {
          // test_model_logits.cpp's tolerance for the FP32 path against transformers.
          const float diff = std::fabs(got[t * vocab + i] - want[t][i]);
          worst_excess = std::max(worst_excess, diff - (1e-4f + 1e-3f * std::fabs(want[t][i])));
        }
      }
      CHECK(worst_excess <= 0.0f);
    }
  }
}

TEST_CASE("gguf: Llama 3.1 and 3.2 scaling parameters are recovered from rope_freqs.weight", "[gguf]") {
  struct Case {
    float factor, low, high;
    int orig, head_dim;
    float theta;
  };
  // The last case has no frequency in the blended band (head_dim 8).
  for (const Case k : {Case{8.0f, 1.0f, 4.0f, 8192, 128, 500000.0f}, Case{32.0f, 1.0f, 4.0f, 8192, 64, 500000.0f},
                       Case{4.0f, 2.0f, 8.0f, 4096, 128, 10000.0f}, Case{8.0f, 1.0f, 4.0f, 1000, 8, 500000.0f}}) {
    ModelConfig c;
    c.head_dim = k.head_dim;
    c.rope_theta = k.theta;
    c.rope_scaling.type = RopeScalingType::llama3;
    c.rope_scaling.factor = k.factor;
    c.rope_scaling.low_freq_factor = k.low;
    c.rope_scaling.high_freq_factor = k.high;
    c.rope_scaling.original_max_position_embeddings = k.orig;
    const std::vector<float> divisors = llama3_divisors(c);
    GgufBuilder g;
    g.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.embedding_length", 2 * k.head_dim)
        .kv_u32("llama.feed_forward_length", 8)
        .kv_u32("llama.attention.head_count", 2)
        .kv_f32("llama.rope.freq_base", k.theta);
    g.tensor_f32("token_embd.weight", {uint64_t(2 * k.head_dim), 4}, std::vector<float>(8 * k.head_dim, 1.0f));
    g.tensor_f32("rope_freqs.weight", {uint64_t(k.head_dim / 2)}, divisors);
    const std::string b = g.bytes();
    const ModelConfig got =
        gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(b.data()), b.size(), "t.gguf"));
    INFO("factor " << k.factor << ", low " << k.low << ", high " << k.high << ", orig " << k.orig);
    CHECK(got.rope_scaling.type == RopeScalingType::llama3);
    CHECK(got.rope_scaling.factor == k.factor);
    // The divisors fix only the two wavelengths orig / low and orig / high (the engine uses nothing
    // else); Llama's own low = 1, high = 4 come back as they were.
    const RopeScaling& r = got.rope_scaling;
    if (k.head_dim > 8) {
      CHECK(r.original_max_position_embeddings / r.low_freq_factor == Approx(k.orig / k.low).epsilon(1e-5));
      CHECK(r.original_max_position_embeddings / r.high_freq_factor == Approx(k.orig / k.high).epsilon(1e-5));
    }
    // Whatever was recovered gives the frequencies the divisors give.
    ModelConfig recovered = c;
    recovered.rope_scaling = r;
    std::vector<float> want(static_cast<size_t>(k.head_dim / 2)), base(want.size()), have(want.size());
    ModelConfig plain = c;
    plain.rope_scaling = {};
    ref::rope_inverse_frequencies(base.data(), k.head_dim, rope_frequency_params(plain));
    ref::rope_inverse_frequencies(have.data(), k.head_dim, rope_frequency_params(recovered));
    for (size_t i = 0; i < want.size(); ++i) CHECK(have[i] == Approx(base[i] / divisors[i]).epsilon(1e-5));
    if (k.low == 1.0f && k.high == 4.0f && k.head_dim > 8) {
      CHECK(r.original_max_position_embeddings == k.orig);
      CHECK(r.low_freq_factor == Approx(1.0f).epsilon(1e-5));
      CHECK(r.high_freq_factor == Approx(4.0f).epsilon(1e-5));
    }

    // Divisors no Llama 3 scaling makes are refused.
    std::vector<float> odd = divisors;
    odd[1] = 3.0f;
    GgufBuilder bad;
    bad.kv_str("general.architecture", "llama")
        .kv_u32("llama.block_count", 1)
        .kv_u32("llama.embedding_length", 2 * k.head_dim)
        .kv_u32("llama.feed_forward_length", 8)
        .kv_u32("llama.attention.head_count", 2)
        .kv_f32("llama.rope.freq_base", k.theta);
    bad.tensor_f32("token_embd.weight", {uint64_t(2 * k.head_dim), 4}, std::vector<float>(8 * k.head_dim, 1.0f));
    bad.tensor_f32("rope_freqs.weight", {uint64_t(k.head_dim / 2)}, odd);
    const std::string bb = bad.bytes();
    REQUIRE_THROWS_WITH(
        gguf_model_config(GgufFile::parse(reinterpret_cast<const uint8_t*>(bb.data()), bb.size(), "t.gguf")),
        Contains("'rope_freqs.weight'"));
  }
}
