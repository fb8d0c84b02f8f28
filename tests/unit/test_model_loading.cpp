// Loading Hugging Face folders: config.json, safetensors (single and sharded), weights; and one
// clear error for each kind of broken folder.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "model/model.h"
#include "safetensors_writer.h"
#include "test_paths.h"

using Catch::Contains;
using nlohmann::json;
using namespace slab;
using namespace slab::test;

namespace {

// A tiny untied llama: vocab 16, hidden 8, 2 heads of 4, 1 KV head, 2 layers, MLP 12.
json tiny_config() {
  return {{"model_type", "llama"},
          {"vocab_size", 16},
          {"hidden_size", 8},
          {"intermediate_size", 12},
          {"num_hidden_layers", 2},
          {"num_attention_heads", 2},
          {"num_key_value_heads", 1},
          {"rms_norm_eps", 1e-5},
          {"rope_theta", 10000.0},
          {"hidden_act", "silu"},
          {"tie_word_embeddings", false},
          {"eos_token_id", 2},
          {"bos_token_id", 1}};
}

std::vector<TestTensor> tiny_tensors() {
  std::vector<TestTensor> t;
  uint32_t seed = 1;
  t.push_back(random_f32_tensor("model.embed_tokens.weight", {16, 8}, seed++));
  for (int i = 0; i < 2; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    t.push_back(random_f32_tensor(p + "input_layernorm.weight", {8}, seed++));
    t.push_back(random_f32_tensor(p + "self_attn.q_proj.weight", {8, 8}, seed++));
    t.push_back(random_f32_tensor(p + "self_attn.k_proj.weight", {4, 8}, seed++));
    t.push_back(random_f32_tensor(p + "self_attn.v_proj.weight", {4, 8}, seed++));
    t.push_back(random_f32_tensor(p + "self_attn.o_proj.weight", {8, 8}, seed++));
    t.push_back(random_f32_tensor(p + "post_attention_layernorm.weight", {8}, seed++));
    t.push_back(random_f32_tensor(p + "mlp.gate_proj.weight", {12, 8}, seed++));
    t.push_back(random_f32_tensor(p + "mlp.up_proj.weight", {12, 8}, seed++));
    t.push_back(random_f32_tensor(p + "mlp.down_proj.weight", {8, 12}, seed++));
  }
  t.push_back(random_f32_tensor("model.norm.weight", {8}, seed++));
  t.push_back(random_f32_tensor("lm_head.weight", {16, 8}, seed++));
  return t;
}

void write_tiny_model(const std::filesystem::path& dir, const json& config = tiny_config(),
                      const std::vector<TestTensor>& tensors = tiny_tensors()) {
  write_file(dir / "config.json", config.dump(2));
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
}

// Writes `tensors` as two shards plus an index.
void write_sharded(const std::filesystem::path& dir, const std::vector<TestTensor>& tensors,
                   bool drop_second_shard = false) {
  const size_t half = tensors.size() / 2;
  std::vector<TestTensor> a(tensors.begin(), tensors.begin() + static_cast<std::ptrdiff_t>(half));
  std::vector<TestTensor> b(tensors.begin() + static_cast<std::ptrdiff_t>(half), tensors.end());
  const std::string na = "model-00001-of-00002.safetensors", nb = "model-00002-of-00002.safetensors";
  json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", json::object()}};
  for (const auto& t : a) index["weight_map"][t.name] = na;
  for (const auto& t : b) index["weight_map"][t.name] = nb;
  write_file(dir / "config.json", tiny_config().dump(2));
  write_file(dir / "model.safetensors.index.json", index.dump(2));
  write_file(dir / na, safetensors_bytes(a));
  if (!drop_second_shard) write_file(dir / nb, safetensors_bytes(b));
}

const TestTensor& find(const std::vector<TestTensor>& ts, const std::string& name) {
  for (const auto& t : ts) {
    if (t.name == name) return t;
  }
  FAIL("no tensor " << name);
  return ts.front();
}

std::vector<float> as_floats(const TestTensor& t) {
  std::vector<float> v(t.bytes.size() / 4);
  std::memcpy(v.data(), t.bytes.data(), t.bytes.size());
  return v;
}

}  // namespace

TEST_CASE("stories260K loads: config, tied weights, shapes", "[model]") {
  const auto dir = testdata_or_skip("models/stories260K");
  if (dir.empty()) return;
  const Model m = load_model(dir);
  const ModelConfig& c = m.config;
  CHECK(c.model_type == "llama");
  CHECK(c.vocab_size == 512);
  CHECK(c.hidden_size == 64);
  CHECK(c.intermediate_size == 172);
  CHECK(c.num_layers == 5);
  CHECK(c.num_heads == 8);
  CHECK(c.num_kv_heads == 4);
  CHECK(c.head_dim == 8);
  CHECK(c.rms_norm_eps == Approx(1e-5f));
  CHECK(c.rope_theta == 10000.0f);
  CHECK(c.rope_scaling.type == RopeScalingType::none);
  CHECK(c.tie_word_embeddings);
  CHECK_FALSE(c.qkv_bias);
  CHECK_FALSE(c.qk_norm);
  CHECK(c.sliding_window == 0);
  CHECK(c.bos_token_id == 1);
  CHECK(c.eos_token_ids == std::vector<int>{2});
  CHECK(m.generation.eos_token_ids == std::vector<int>{2});

  const ModelWeights& w = m.weights;
  CHECK(w.token_embedding.size() == 512u * 64u);
  REQUIRE(w.layers.size() == 5);
  for (const auto& l : w.layers) {
    CHECK(l.wq.size() == 64u * 64u);
    CHECK(l.wk.size() == 32u * 64u);
    CHECK(l.wv.size() == 32u * 64u);
    CHECK(l.wo.size() == 64u * 64u);
    CHECK(l.w_gate.size() == 172u * 64u);
    CHECK(l.w_down.size() == 64u * 172u);
    CHECK(l.bq.empty());
    CHECK(l.q_norm.empty());
  }
  CHECK(w.final_norm.size() == 64u);
  CHECK(w.lm_head.empty());
  CHECK(w.output_matrix() == w.token_embedding.data());
  for (float x : w.token_embedding) REQUIRE(std::isfinite(x));
}

TEST_CASE("a tiny generated model loads with the values written", "[model]") {
  TempDir tmp;
  const auto tensors = tiny_tensors();
  write_tiny_model(tmp.path(), tiny_config(), tensors);
  const Model m = load_model(tmp.path());
  CHECK(m.config.num_layers == 2);
  CHECK(m.config.head_dim == 4);
  CHECK(m.weights.layers[1].wk == as_floats(find(tensors, "model.layers.1.self_attn.k_proj.weight")));
  CHECK(m.weights.lm_head == as_floats(find(tensors, "lm_head.weight")));
  CHECK(m.weights.output_matrix() == m.weights.lm_head.data());
  CHECK(m.generation.eos_token_ids.empty());  // no generation_config.json
}

TEST_CASE("a sharded checkpoint loads exactly like the single file", "[model]") {
  TempDir single, sharded;
  const auto tensors = tiny_tensors();
  write_tiny_model(single.path(), tiny_config(), tensors);
  write_sharded(sharded.path(), tensors);
  const Model a = load_model(single.path());
  const Model b = load_model(sharded.path());
  CHECK(a.weights.token_embedding == b.weights.token_embedding);
  CHECK(a.weights.final_norm == b.weights.final_norm);
  CHECK(a.weights.lm_head == b.weights.lm_head);
  REQUIRE(a.weights.layers.size() == b.weights.layers.size());
  for (size_t i = 0; i < a.weights.layers.size(); ++i) {
    const auto& x = a.weights.layers[i];
    const auto& y = b.weights.layers[i];
    CHECK(x.attn_norm == y.attn_norm);
    CHECK(x.wq == y.wq);
    CHECK(x.wk == y.wk);
    CHECK(x.wv == y.wv);
    CHECK(x.wo == y.wo);
    CHECK(x.mlp_norm == y.mlp_norm);
    CHECK(x.w_gate == y.w_gate);
    CHECK(x.w_up == y.w_up);
    CHECK(x.w_down == y.w_down);
  }
  const auto ck = open_safetensors_checkpoint(sharded.path());
  CHECK(ck->tensor_names().size() == tensors.size());
}

TEST_CASE("generation_config.json eos ids are merged into the config", "[model]") {
  TempDir tmp;
  json config = tiny_config();
  config["eos_token_id"] = json::array({2, 3});
  write_tiny_model(tmp.path(), config);
  write_file(tmp / "generation_config.json",
             R"({"eos_token_id": [3, 7], "bos_token_id": 1, "temperature": 0.6, "top_p": 0.9,
                 "top_k": 20, "do_sample": true})");
  const Model m = load_model(tmp.path());
  CHECK(m.config.eos_token_ids == std::vector<int>{2, 3, 7});
  CHECK(m.generation.eos_token_ids == std::vector<int>{3, 7});
  CHECK(m.generation.temperature == Approx(0.6f));
  CHECK(m.generation.top_p == Approx(0.9f));
  CHECK(m.generation.top_k == 20);
  CHECK(m.generation.do_sample);
}

// ---- one clear error per broken folder -------------------------------------------------------

TEST_CASE("broken model folders each give one clear error", "[model]") {
  TempDir tmp;
  const auto dir = tmp / "model";
  const std::string st = (dir / "model.safetensors").string();
  const std::string cfg = (dir / "config.json").string();

  SECTION("missing config.json") {
    write_file(dir / "model.safetensors", safetensors_bytes(tiny_tensors()));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(dir.string()) && Contains("no config.json"));
  }
  SECTION("unknown model_type") {
    json c = tiny_config();
    c["model_type"] = "gpt2";
    write_tiny_model(dir, c);
    REQUIRE_THROWS_WITH(load_model(dir), Contains(cfg) && Contains("'model_type'") && Contains("gpt2"));
  }
  SECTION("unsupported rope scaling type") {
    json c = tiny_config();
    c["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
    write_tiny_model(dir, c);
    REQUIRE_THROWS_WITH(load_model(dir), Contains(cfg) && Contains("rope_scaling") && Contains("yarn"));
  }
  SECTION("truncated safetensors") {
    write_file(dir / "config.json", tiny_config().dump());
    std::string bytes = safetensors_bytes(tiny_tensors());
    bytes.resize(bytes.size() - 100);
    write_file(dir / "model.safetensors", bytes);
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("lm_head.weight") && Contains("truncated"));
  }
  SECTION("file shorter than the length prefix") {
    write_file(dir / "config.json", tiny_config().dump());
    write_file(dir / "model.safetensors", std::string("\x10\0\0", 3));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("truncated"));
  }
  SECTION("header length beyond the file") {
    write_file(dir / "config.json", tiny_config().dump());
    write_file(dir / "model.safetensors", safetensors_raw("{}", "", 1 << 20));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("header length 1048576 exceeds"));
  }
  SECTION("malformed header JSON") {
    write_file(dir / "config.json", tiny_config().dump());
    write_file(dir / "model.safetensors", safetensors_raw("{\"a\": {\"dtype\": ", ""));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("malformed safetensors header JSON"));
  }
  SECTION("unsupported dtype") {
    auto tensors = tiny_tensors();
    tensors[3].dtype = "I8";
    tensors[3].bytes.resize(tensors[3].bytes.size() / 4);
    write_tiny_model(dir, tiny_config(), tensors);
    REQUIRE_THROWS_WITH(load_model(dir),
                        Contains(st) && Contains(tensors[3].name) && Contains("unsupported dtype 'I8'"));
  }
  SECTION("data offsets out of range") {
    const auto tensors = tiny_tensors();
    json header = safetensors_header(tensors);
    header["model.norm.weight"]["data_offsets"] = {100000, 100032};
    std::string data;
    for (const auto& t : tensors) data += t.bytes;
    write_file(dir / "config.json", tiny_config().dump());
    write_file(dir / "model.safetensors", safetensors_raw(header.dump(), data));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("model.norm.weight") && Contains("data_offsets"));
  }
  SECTION("data offsets disagreeing with the shape") {
    const auto tensors = tiny_tensors();
    json header = safetensors_header(tensors);
    header["model.norm.weight"]["shape"] = {9};
    std::string data;
    for (const auto& t : tensors) data += t.bytes;
    write_file(dir / "config.json", tiny_config().dump());
    write_file(dir / "model.safetensors", safetensors_raw(header.dump(), data));
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("model.norm.weight") && Contains("needs 36"));
  }
  SECTION("missing tensor") {
    auto tensors = tiny_tensors();
    tensors.erase(tensors.begin() + 11);
    write_tiny_model(dir, tiny_config(), tensors);
    REQUIRE_THROWS_WITH(load_model(dir),
                        Contains(st) && Contains("model.layers.1.self_attn.q_proj.weight") && Contains("not found"));
  }
  SECTION("missing lm_head while untied") {
    auto tensors = tiny_tensors();
    tensors.pop_back();
    write_tiny_model(dir, tiny_config(), tensors);
    REQUIRE_THROWS_WITH(load_model(dir),
                        Contains(st) && Contains("lm_head.weight") && Contains("tie_word_embeddings is false"));
  }
  SECTION("wrong shape") {
    auto tensors = tiny_tensors();
    tensors[4] = random_f32_tensor("model.layers.0.self_attn.v_proj.weight", {8, 4}, 99);
    write_tiny_model(dir, tiny_config(), tensors);
    REQUIRE_THROWS_WITH(load_model(dir), Contains(st) && Contains("model.layers.0.self_attn.v_proj.weight") &&
                                             Contains("expected shape [4, 8], found [8, 4]"));
  }
  SECTION("sharded index pointing to a missing shard") {
    write_sharded(dir, tiny_tensors(), /*drop_second_shard=*/true);
    REQUIRE_THROWS_WITH(load_model(dir), Contains((dir / "model.safetensors.index.json").string()) &&
                                             Contains("model-00002-of-00002.safetensors") && Contains("not found"));
  }
  SECTION("no weights at all") {
    write_file(dir / "config.json", tiny_config().dump());
    REQUIRE_THROWS_WITH(load_model(dir), Contains(dir.string()) && Contains("no model.safetensors"));
  }
}

// ---- config.json semantics --------------------------------------------------------------------

namespace {
ModelConfig parse(const json& j) { return parse_model_config(j, "test/config.json"); }

json with(json j, const std::string& key, const json& value) {
  j[key] = value;
  return j;
}
}  // namespace

TEST_CASE("config.json field errors name the file and the field", "[model]") {
  const json c = tiny_config();
  REQUIRE_THROWS_WITH(parse(with(c, "hidden_size", -3)),
                      Contains("test/config.json: field 'hidden_size': expected a positive integer"));
  REQUIRE_THROWS_WITH(parse(with(c, "hidden_size", "64")), Contains("field 'hidden_size'"));
  json missing = c;
  missing.erase("vocab_size");
  REQUIRE_THROWS_WITH(parse(missing), Contains("field 'vocab_size'"));
  REQUIRE_THROWS_WITH(parse(with(c, "hidden_act", "gelu")), Contains("field 'hidden_act'") && Contains("gelu"));
  REQUIRE_THROWS_WITH(parse(with(c, "num_key_value_heads", 3)), Contains("field 'num_key_value_heads'"));
  REQUIRE_THROWS_WITH(parse(with(c, "rope_scaling", {{"type", "dynamic"}, {"factor", 2.0}})),
                      Contains("rope_scaling.type") && Contains("dynamic"));
  REQUIRE_THROWS_WITH(parse(with(c, "rope_parameters", {{"rope_type", "yarn"}, {"rope_theta", 1e4}})),
                      Contains("rope_parameters.rope_type") && Contains("yarn"));
  REQUIRE_THROWS_WITH(parse(with(c, "rope_scaling", {{"rope_type", "linear"}})), Contains("rope_scaling.factor"));
  // Pre-quantized Hugging Face checkpoints other than AWQ's 4-bit GEMM layout and GPTQ's 2-, 3-,
  // 4- and 8-bit layouts are refused by name, not served as if unquantized.
  REQUIRE_THROWS_WITH(
      parse(with(c, "quantization_config", {{"quant_method", "fp8"}})),
      Contains("field 'quantization_config.quant_method'") && Contains("'fp8'") && Contains("--quantization"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", "fp8")), Contains("field 'quantization_config'"));
  using Method = PrequantizedConfig::Method;
  CHECK(parse(with(c, "quantization_config", nullptr)).prequantized.method == Method::none);
  const json awq = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", 128}, {"zero_point", true}, {"version", "gemm"}};
  CHECK(parse(with(c, "quantization_config", awq)).prequantized.method == Method::awq);
  CHECK(parse(with(c, "quantization_config", awq)).prequantized.group_size == 128);
  // GPTQ as AutoGPTQ writes it (v1 zeros: stored minus one), GPTQModel's v2, and per-row groups.
  const json gptq = {{"quant_method", "gptq"}, {"bits", 4},          {"group_size", 128},
                     {"desc_act", true},       {"sym", true},        {"damp_percent", 0.01},
                     {"true_sequential", true}, {"static_groups", false}};
  const PrequantizedConfig g = parse(with(c, "quantization_config", gptq)).prequantized;
  CHECK(g.method == Method::gptq);
  CHECK(g.group_size == 128);
  CHECK(g.desc_act);
  CHECK(g.zero_offset == 1);
  CHECK(parse(with(c, "quantization_config", with(gptq, "checkpoint_format", "gptq_v2"))).prequantized.zero_offset == 0);
  CHECK(parse(with(c, "quantization_config", with(gptq, "group_size", -1))).prequantized.group_size == 0);
  for (const int bits : {2, 3, 8}) {
    CHECK(parse(with(c, "quantization_config", with(gptq, "bits", bits))).prequantized.bits == bits);
  }
  for (const int bits : {1, 5, 6, 7, 16}) {
    REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(gptq, "bits", bits))),
                        Contains("field 'quantization_config.bits'") && Contains("GPTQ") && Contains("2, 3, 4 and 8"));
  }
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(awq, "bits", 3))),
                      Contains("field 'quantization_config.bits'") && Contains("AWQ"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(gptq, "group_size", 100))),
                      Contains("field 'quantization_config.group_size'") && Contains("or -1"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(gptq, "checkpoint_format", "marlin"))),
                      Contains("field 'quantization_config.checkpoint_format'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(gptq, "is_marlin_format", true))),
                      Contains("field 'quantization_config.is_marlin_format'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(gptq, "desc_act", "yes"))),
                      Contains("field 'quantization_config.desc_act'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(awq, "bits", 8))),
                      Contains("field 'quantization_config.bits'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(awq, "group_size", 100))),
                      Contains("field 'quantization_config.group_size'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(awq, "zero_point", false))),
                      Contains("field 'quantization_config.zero_point'"));
  REQUIRE_THROWS_WITH(parse(with(c, "quantization_config", with(awq, "version", "gemv"))),
                      Contains("field 'quantization_config.version'") && Contains("gemv"));
  REQUIRE_THROWS_WITH(parse(with(c, "eos_token_id", 99)), Contains("field 'eos_token_id'"));
  REQUIRE_THROWS_WITH(parse(with(c, "eos_token_id", "x")), Contains("field 'eos_token_id'"));
  REQUIRE_THROWS_WITH(parse(with(c, "tie_word_embeddings", 1)), Contains("field 'tie_word_embeddings'"));
  REQUIRE_THROWS_WITH(parse(json::array()), Contains("test/config.json"));
  REQUIRE_THROWS_WITH(load_model_config("/nonexistent/config.json"), Contains("/nonexistent/config.json"));
}

TEST_CASE("config.json: RoPE settings in both spellings", "[model]") {
  const json c = tiny_config();
  ModelConfig m = parse(with(c, "rope_scaling", nullptr));
  CHECK(m.rope_scaling.type == RopeScalingType::none);
  m = parse(with(c, "rope_scaling", {{"rope_type", "default"}}));
  CHECK(m.rope_scaling.type == RopeScalingType::none);
  m = parse(with(c, "rope_scaling", {{"type", "linear"}, {"factor", 2.0}}));
  CHECK(m.rope_scaling.type == RopeScalingType::linear);
  CHECK(m.rope_scaling.factor == 2.0f);
  m = parse(with(with(c, "rope_theta", 500000.0), "rope_scaling",
                 {{"rope_type", "llama3"},
                  {"factor", 8.0},
                  {"low_freq_factor", 1.0},
                  {"high_freq_factor", 4.0},
                  {"original_max_position_embeddings", 8192}}));
  CHECK(m.rope_theta == 500000.0f);
  CHECK(m.rope_scaling.type == RopeScalingType::llama3);
  CHECK(m.rope_scaling.factor == 8.0f);
  CHECK(m.rope_scaling.original_max_position_embeddings == 8192);
  // transformers 5 spelling: everything inside rope_parameters.
  json v5 = c;
  v5.erase("rope_theta");
  v5["rope_parameters"] = {{"rope_type", "llama3"},   {"rope_theta", 250000.0},
                           {"factor", 32.0},          {"low_freq_factor", 1.0},
                           {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 64}};
  m = parse(v5);
  CHECK(m.rope_theta == 250000.0f);
  CHECK(m.rope_scaling.type == RopeScalingType::llama3);
  CHECK(m.rope_scaling.factor == 32.0f);
  CHECK(m.rope_scaling.original_max_position_embeddings == 64);
  v5["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 1000000.0}};
  m = parse(v5);
  CHECK(m.rope_theta == 1000000.0f);
  CHECK(m.rope_scaling.type == RopeScalingType::none);
}

TEST_CASE("config.json: family rules for biases, q/k norm, head_dim and sliding window", "[model]") {
  const json c = tiny_config();
  ModelConfig m = parse(with(with(c, "attention_bias", true), "mlp_bias", true));
  CHECK(m.qkv_bias);
  CHECK(m.o_bias);
  CHECK(m.mlp_bias);

  json mistral = with(c, "model_type", "mistral");
  m = parse(with(mistral, "sliding_window", 8));
  CHECK(m.sliding_window == 8);
  CHECK_FALSE(m.qkv_bias);
  m = parse(with(mistral, "sliding_window", nullptr));
  CHECK(m.sliding_window == 0);
  m = parse(with(with(mistral, "head_dim", 16), "attention_bias", true));
  CHECK(m.head_dim == 16);
  CHECK_FALSE(m.qkv_bias);  // transformers' Mistral has no biases whatever the config says

  json qwen2 = with(c, "model_type", "qwen2");
  m = parse(qwen2);
  CHECK(m.qkv_bias);
  CHECK_FALSE(m.o_bias);
  CHECK_FALSE(m.mlp_bias);
  m = parse(with(qwen2, "sliding_window", 4096));  // ignored without use_sliding_window
  CHECK(m.sliding_window == 0);
  json q2sw = with(with(qwen2, "use_sliding_window", true), "sliding_window", 16);
  m = parse(with(q2sw, "max_window_layers", 0));
  CHECK(m.sliding_window == 16);
  m = parse(with(q2sw, "max_window_layers", 28));  // no layer reaches the window
  CHECK(m.sliding_window == 0);
  REQUIRE_THROWS_WITH(parse(with(q2sw, "max_window_layers", 1)),
                      Contains("field 'max_window_layers'") && Contains("only some layers"));
  REQUIRE_THROWS_WITH(parse(with(q2sw, "layer_types", {"full_attention", "sliding_attention"})),
                      Contains("field 'layer_types'"));

  json qwen3 = with(c, "model_type", "qwen3");
  m = parse(qwen3);
  CHECK(m.qk_norm);
  CHECK(m.head_dim == 128);  // Qwen3Config default, not hidden / heads
  CHECK_FALSE(m.qkv_bias);
  m = parse(with(with(qwen3, "head_dim", 16), "attention_bias", true));
  CHECK(m.head_dim == 16);
  CHECK(m.qkv_bias);
  CHECK(m.o_bias);
  m = parse(with(with(qwen3, "layer_types", {"full_attention", "full_attention"}), "sliding_window", nullptr));
  CHECK(m.sliding_window == 0);
}

TEST_CASE("F16 and BF16 convert exactly, including subnormals, infinities and NaN", "[model]") {
  const std::vector<uint16_t> f16 = {0x0000, 0x8000, 0x3c00, 0xc000, 0x7bff, 0x0001,
                                     0x03ff, 0x0400, 0x7c00, 0xfc00, 0x7e00, 0x3555};
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> want = {0.0f,
                                   -0.0f,
                                   1.0f,
                                   -2.0f,
                                   65504.0f,
                                   std::ldexp(1.0f, -24),
                                   std::ldexp(1023.0f, -24),
                                   std::ldexp(1.0f, -14),
                                   inf,
                                   -inf,
                                   0,
                                   0.333251953125f};
  TensorView v;
  v.dtype = DType::f16;
  v.shape = {static_cast<int64_t>(f16.size())};
  v.data = f16.data();
  std::vector<float> out(f16.size());
  convert_to_f32(v, out.data());
  for (size_t i = 0; i < f16.size(); ++i) {
    INFO("f16 bits " << f16[i]);
    if (i == 10) {
      CHECK(std::isnan(out[i]));
    } else {
      CHECK(out[i] == want[i]);
      CHECK(std::signbit(out[i]) == std::signbit(want[i]));
    }
  }
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc040, 0x7f80, 0xff80, 0x7fc0, 0x0001, 0x8000};
  v.dtype = DType::bf16;
  v.shape = {static_cast<int64_t>(bf16.size())};
  v.data = bf16.data();
  out.resize(bf16.size());
  convert_to_f32(v, out.data());
  CHECK(out[0] == 1.0f);
  CHECK(out[1] == -3.0f);
  CHECK(out[2] == inf);
  CHECK(out[3] == -inf);
  CHECK(std::isnan(out[4]));
  CHECK(out[5] == std::ldexp(1.0f, -133));  // bf16 subnormal
  CHECK(std::signbit(out[6]));
  CHECK(dtype_size(DType::bf16) == 2);
  CHECK(std::string(dtype_name(DType::f16)) == "F16");
}

TEST_CASE("the transformers-made fixtures load with the features transformers gives them", "[model]") {
  const auto dir = fixtures_dir() / "models";
  ModelConfig c = load_model(dir / "llama_gqa").config;
  CHECK(c.num_kv_heads == 2);
  CHECK(c.head_dim == 8);
  CHECK_FALSE(c.tie_word_embeddings);

  Model m = load_model(dir / "llama3_rope_scaling");  // BF16 on disk
  CHECK(m.config.rope_theta == 500000.0f);
  CHECK(m.config.rope_scaling.type == RopeScalingType::llama3);
  CHECK(m.config.rope_scaling.factor == 8.0f);
  CHECK(m.config.rope_scaling.original_max_position_embeddings == 64);

  m = load_model(dir / "llama_tied");  // F16 on disk
  CHECK(m.config.tie_word_embeddings);
  CHECK(m.weights.lm_head.empty());

  c = load_model(dir / "llama_bias").config;
  CHECK((c.qkv_bias && c.o_bias && c.mlp_bias));

  c = load_model(dir / "mistral_sliding_window").config;
  CHECK(c.sliding_window == 8);

  m = load_model(dir / "qwen2_bias");
  CHECK(m.config.qkv_bias);
  CHECK_FALSE(m.config.o_bias);
  CHECK(m.config.rope_theta == 1000000.0f);
  CHECK(m.weights.layers[0].bq.size() == 32u);
  CHECK(m.weights.layers[0].bo.empty());

  m = load_model(dir / "qwen3_qk_norm");
  CHECK(m.config.head_dim == 16);
  CHECK(m.config.qk_norm);
  CHECK(m.weights.layers[1].wq.size() == 64u * 32u);
  CHECK(m.weights.layers[1].wo.size() == 32u * 64u);
  CHECK(m.weights.layers[1].k_norm.size() == 16u);
}

TEST_CASE("config.json: phi3 fused projections, partial rotary and longrope", "[model]") {
  json phi3 = with(with(tiny_config(), "model_type", "phi3"), "hidden_size", 16);  // 2 heads of 8
  ModelConfig m = parse(phi3);
  CHECK((m.fused_qkv_proj && m.fused_gate_up_proj));
  CHECK_FALSE((m.qkv_bias || m.o_bias || m.mlp_bias));
  CHECK(m.rotary_dim == 8);
  CHECK(m.max_position_embeddings == 4096);  // Phi3Config's default
  CHECK(parse(with(phi3, "sliding_window", 8)).sliding_window == 8);
  CHECK(parse(with(phi3, "partial_rotary_factor", 0.75)).rotary_dim == 6);
  CHECK(parse(with(phi3, "partial_rotary_factor", 0.5)).rotary_dim == 4);
  REQUIRE_THROWS_WITH(parse(with(phi3, "partial_rotary_factor", 0.125)),
                      Contains("field 'partial_rotary_factor'") && Contains("even"));
  REQUIRE_THROWS_WITH(parse(with(phi3, "partial_rotary_factor", 1.5)), Contains("field 'partial_rotary_factor'"));

  const json longrope = {{"type", "su"},  // Phi-3's old spelling, read as longrope like transformers does
                         {"short_factor", {1.0, 1.5, 2.0, 3.0}},
                         {"long_factor", {2.0, 4.0, 8.0, 16.0}}};
  json lr = with(with(with(phi3, "rope_scaling", longrope), "max_position_embeddings", 1024),
                 "original_max_position_embeddings", 64);
  m = parse(lr);
  CHECK(m.rope_scaling.type == RopeScalingType::longrope);
  CHECK(m.rope_scaling.original_max_position_embeddings == 64);
  CHECK(m.rope_scaling.short_factor == std::vector<float>{1.0f, 1.5f, 2.0f, 3.0f});
  CHECK(m.rope_scaling.long_factor.back() == 16.0f);
  // factor = 1024 / 64 = 16; attention factor sqrt(1 + ln 16 / ln 64) = sqrt(1 + 2/3).
  CHECK(m.rope_scaling.factor == 16.0f);
  CHECK(m.rope_scaling.attention_factor == Approx(std::sqrt(5.0 / 3.0)).epsilon(1e-6));
  json explicit_af = lr;
  explicit_af["rope_scaling"]["attention_factor"] = 1.5;
  CHECK(parse(explicit_af).rope_scaling.attention_factor == 1.5f);
  json no_orig = lr;
  no_orig.erase("original_max_position_embeddings");
  CHECK(parse(no_orig).rope_scaling.original_max_position_embeddings == 4096);  // Phi3Config's default
  json short_list = lr;
  short_list["rope_scaling"]["long_factor"] = {1.0, 2.0};
  REQUIRE_THROWS_WITH(parse(short_list), Contains("field 'rope_scaling.long_factor'") && Contains("4 positive"));
  json bad_value = lr;
  bad_value["rope_scaling"]["short_factor"] = {1.0, 0.0, 2.0, 3.0};
  REQUIRE_THROWS_WITH(parse(bad_value), Contains("field 'rope_scaling.short_factor'"));
  json bad_type = lr;
  bad_type["rope_scaling"]["type"] = "dynamic";
  REQUIRE_THROWS_WITH(parse(bad_type), Contains("longrope") && Contains("dynamic"));
}

TEST_CASE("phi3 fixtures: fused tensors load as row slices, and a wrong fused shape names the tensor", "[model]") {
  const auto dir = fixtures_dir() / "models";
  Model m = load_model(dir / "phi3_longrope");  // BF16 on disk, tied, partial rotary
  CHECK(m.config.rotary_dim == 12);
  CHECK(m.config.rope_scaling.type == RopeScalingType::longrope);
  CHECK(m.config.rope_scaling.original_max_position_embeddings == 24);
  CHECK(m.config.tie_word_embeddings);
  // q, k, v: 4 x 16, 2 x 16, 2 x 16 rows of the [128, 64] qkv_proj; gate and up 96 rows each.
  CHECK(m.weights.layers[0].wq.size() == 64u * 64u);
  CHECK(m.weights.layers[0].wk.size() == 32u * 64u);
  CHECK(m.weights.layers[1].w_up.size() == 96u * 64u);
  const auto ck = open_model_checkpoint(dir / "phi3_longrope");
  const TensorView fused = ck->tensor("model.layers.1.mlp.gate_up_proj.weight");
  REQUIRE(fused.shape == std::vector<int64_t>{192, 64});
  // The up rows are the second half of gate_up_proj, as transformers' chunk(2) splits it.
  std::vector<float> all(static_cast<size_t>(fused.numel()));
  convert_to_f32(fused, all.data());
  CHECK(std::equal(m.weights.layers[1].w_up.begin(), m.weights.layers[1].w_up.end(), all.begin() + 96 * 64));

  ModelConfig wrong = m.config;
  wrong.intermediate_size = 80;
  REQUIRE_THROWS_WITH(load_model_weights(wrong, *ck),
                      Contains("model.layers.0.mlp.gate_up_proj.weight") && Contains("[160, 64]"));
}

TEST_CASE("config.json: gemma3_text defaults and rules, and gemma3's text_config", "[model]") {
  json g = with(with(tiny_config(), "model_type", "gemma3_text"), "num_hidden_layers", 7);
  g.erase("hidden_act");
  g.erase("tie_word_embeddings");
  g.erase("rope_theta");
  ModelConfig m = parse(g);
  CHECK(m.head_dim == 256);  // Gemma3TextConfig's default
  CHECK(m.tie_word_embeddings);
  CHECK(m.mlp_activation == MlpActivation::gelu_tanh);
  CHECK((m.norm_plus_one && m.sandwich_norms && m.qk_norm));
  CHECK(m.sliding_window == 4096);
  // sliding_window_pattern 6: every 6th layer is global.
  CHECK(m.layer_sliding == std::vector<bool>{true, true, true, true, true, false, true});
  CHECK(layer_window(m, 5) == 0);
  CHECK(layer_uses_local_rope(m, 0));
  CHECK(m.rope_theta == 1000000.0f);
  CHECK(m.rope_local_theta == 10000.0f);
  CHECK(m.attn_scale == Approx(1.0 / 16.0));  // query_pre_attn_scalar 256
  CHECK(m.embed_scale == std::sqrt(8.0f));   // no dtype: float32
  // The normalizer in the config's dtype: sqrt(8) = 2.828... is 2.828125 in BF16.
  CHECK(parse(with(g, "dtype", "bfloat16")).embed_scale == 2.828125f);
  CHECK(parse(with(g, "torch_dtype", "float16")).embed_scale == 2.828125f);
  // Old spelling: rope_local_base_freq, and rope_scaling on the global layers only.
  m = parse(with(with(with(g, "rope_local_base_freq", 5000.0), "rope_theta", 2e5), "rope_scaling",
                 {{"rope_type", "linear"}, {"factor", 8.0}}));
  CHECK(m.rope_local_theta == 5000.0f);
  CHECK(m.rope_theta == 200000.0f);
  CHECK(m.rope_scaling.type == RopeScalingType::linear);
  CHECK(parse(with(g, "final_logit_softcapping", 30.0)).final_logit_softcap == 30.0f);
  REQUIRE_THROWS_WITH(parse(with(g, "attn_logit_softcapping", 50.0)), Contains("field 'attn_logit_softcapping'"));
  REQUIRE_THROWS_WITH(parse(with(g, "hidden_activation", "gelu")), Contains("field 'hidden_activation'"));
  REQUIRE_THROWS_WITH(parse(with(g, "use_bidirectional_attention", true)),
                      Contains("field 'use_bidirectional_attention'"));
  REQUIRE_THROWS_WITH(parse(with(g, "dtype", "int8")), Contains("field 'dtype'"));
  REQUIRE_THROWS_WITH(parse(with(g, "layer_types", {"full_attention"})), Contains("field 'layer_types'"));

  // Gemma3ForConditionalGeneration: the text tower's config and tensors under language_model.model.
  json mm = {{"model_type", "gemma3"}, {"dtype", "bfloat16"}, {"text_config", g}, {"vision_config", json::object()}};
  mm["text_config"].erase("model_type");
  mm["text_config"]["dtype"] = "float32";  // as transformers writes it; the top-level dtype wins
  m = parse(mm);
  CHECK(m.model_type == "gemma3_text");
  CHECK(m.weight_prefix == "language_model.model.");
  CHECK(m.embed_scale == 2.828125f);
  REQUIRE_THROWS_WITH(parse(json{{"model_type", "gemma3"}}), Contains("field 'text_config'"));
}
