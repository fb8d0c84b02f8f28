// Quantized GGUF tensors: each block decoder against gguf-py's numpy dequantizer, and a small
// Q8_0/Q4_K llama against its FP32 twin (tests/fixtures/gguf, made by
// scripts/make_gguf_fixtures.py).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "gguf_writer.h"
#include "kernels/bf16.h"
#include "kv/contiguous_kv_cache.h"
#include "model/gguf_blocks.h"
#include "model/gguf_model.h"
#include "model/model.h"
#include "model/packed_quant.h"
#include "safetensors_writer.h"
#include "test_paths.h"

using namespace slab;
using namespace slab::test;

namespace {

std::vector<uint8_t> from_hex(const std::string& hex) {
  std::vector<uint8_t> out(hex.size() / 2);
  for (size_t i = 0; i < out.size(); ++i) out[i] = static_cast<uint8_t>(std::stoi(hex.substr(2 * i, 2), nullptr, 16));
  return out;
}

// scripts/make_gguf_fixtures.py's weight_values(): offset + scale * (u - 0.5), u from a 32-bit
// hash of (index + seed * golden ratio).
std::vector<float> weight_values(uint32_t seed, size_t count, double scale, double offset = 0.0) {
  std::vector<float> out(count);
  for (size_t i = 0; i < count; ++i) {
    uint64_t h = (static_cast<uint64_t>(i) + static_cast<uint64_t>(seed) * 0x9E3779B9ull) & 0xffffffffull;
    h ^= h >> 16;
    h = (h * 0x85EBCA6Bull) & 0xffffffffull;
    h ^= h >> 13;
    h = (h * 0xC2B2AE35ull) & 0xffffffffull;
    h ^= h >> 16;
    const double u = static_cast<double>(h) / 4294967296.0 - 0.5;
    out[i] = static_cast<float>(u * scale + offset);
  }
  return out;
}

constexpr uint64_t kVocab = 64, kHidden = 256, kFfn = 256, kHeads = 4, kKvHeads = 2, kHeadDim = 64;

// The fixture model's weights in FP32, as the same GGUF names and metadata.
std::string f32_twin_bytes() {
  GgufBuilder g;
  g.kv_str("general.architecture", "llama")
      .kv_u32("llama.block_count", 1)
      .kv_u32("llama.context_length", 128)
      .kv_u32("llama.embedding_length", kHidden)
      .kv_u32("llama.feed_forward_length", kFfn)
      .kv_u32("llama.attention.head_count", kHeads)
      .kv_u32("llama.attention.head_count_kv", kKvHeads)
      .kv_u32("llama.rope.dimension_count", kHeadDim)
      .kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f)
      .kv_f32("llama.rope.freq_base", 10000.0f)
      .kv_u32("tokenizer.ggml.bos_token_id", 1)
      .kv_u32("tokenizer.ggml.eos_token_id", 2);
  uint32_t seed = 1;
  auto add = [&](const std::string& name, uint64_t rows, uint64_t cols, double scale, double offset = 0.0) {
    std::vector<uint64_t> dims = rows == 0 ? std::vector<uint64_t>{cols} : std::vector<uint64_t>{cols, rows};
    g.tensor_f32(name, dims, weight_values(seed++, (rows == 0 ? 1 : rows) * cols, scale, offset));
  };
  add("token_embd.weight", kVocab, kHidden, 2.0);
  add("blk.0.attn_norm.weight", 0, kHidden, 0.2, 1.0);
  add("blk.0.attn_q.weight", kHeads * kHeadDim, kHidden, 0.25);
  add("blk.0.attn_k.weight", kKvHeads * kHeadDim, kHidden, 0.25);
  add("blk.0.attn_v.weight", kKvHeads * kHeadDim, kHidden, 0.25);
  add("blk.0.attn_output.weight", kHidden, kHeads * kHeadDim, 0.25);
  add("blk.0.ffn_norm.weight", 0, kHidden, 0.2, 1.0);
  add("blk.0.ffn_gate.weight", kFfn, kHidden, 0.25);
  add("blk.0.ffn_up.weight", kFfn, kHidden, 0.25);
  add("blk.0.ffn_down.weight", kHidden, kFfn, 0.25);
  add("output_norm.weight", 0, kHidden, 0.2, 1.0);
  add("output.weight", kVocab, kHidden, 0.5);
  return g.bytes();
}

std::vector<float> all_logits(const Model& m, const std::vector<int>& prompt) {
  KvGeometry geometry;
  geometry.num_layers = m.config.num_layers;
  geometry.num_kv_heads = m.config.num_kv_heads;
  geometry.head_dim = m.config.head_dim;
  geometry.block_size = 16;
  ContiguousKvCache cache(geometry, 1, 128);
  ForwardBatch b{prompt, {{0, 0, static_cast<int>(prompt.size()), cache.block_table(0)}}, true};
  return forward(m, b, cache);
}

}  // namespace

TEST_CASE("gguf blocks: every decoder gives gguf-py's floats", "[gguf][quant]") {
  std::ifstream in(fixtures_dir() / "gguf" / "blocks.json");
  REQUIRE(in.good());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  struct Decoder {
    const char* type;
    void (*decode)(const uint8_t*, size_t, float*);
    size_t block_elems, block_bytes;
  };
  const Decoder decoders[] = {
      {"Q8_0", gguf::dequantize_q8_0, 32, 34},   {"Q4_0", gguf::dequantize_q4_0, 32, 18},
      {"Q4_1", gguf::dequantize_q4_1, 32, 20},   {"Q5_0", gguf::dequantize_q5_0, 32, 22},
      {"Q5_1", gguf::dequantize_q5_1, 32, 24},   {"Q4_K", gguf::dequantize_q4_k, 256, 144},
      {"Q5_K", gguf::dequantize_q5_k, 256, 176}, {"Q6_K", gguf::dequantize_q6_k, 256, 210},
  };
  for (const Decoder& d : decoders) {
    DYNAMIC_SECTION(d.type) {
      const auto& entry = fixture.at(d.type);
      const std::vector<uint8_t> blocks = from_hex(entry.at("blocks").get<std::string>());
      const auto expected = entry.at("expected").get<std::vector<float>>();
      REQUIRE(blocks.size() % d.block_bytes == 0);
      const size_t count = blocks.size() / d.block_bytes;
      REQUIRE(expected.size() == count * d.block_elems);
      std::vector<float> got(expected.size());
      d.decode(blocks.data(), count, got.data());
      size_t mismatches = 0;
      for (size_t i = 0; i < got.size(); ++i) {
        // gguf-py multiplies the same FP32 factors, possibly in another order: one rounding apart.
        const float tol = 2.5e-7f * std::max(1.0f, std::fabs(expected[i]));
        if (!(std::fabs(got[i] - expected[i]) <= tol)) {
          if (mismatches++ < 5) UNSCOPED_INFO("element " << i << ": got " << got[i] << ", gguf-py " << expected[i]);
        }
      }
      CHECK(mismatches == 0);
    }
  }
}

TEST_CASE("gguf blocks of every format repack for the INT8/INT4 kernels within BF16 rounding of gguf-py's floats",
          "[gguf][quant]") {
  // The repack keeps each block's codes and turns its FP16 scale (and minimum) into a BF16 scale
  // and zero (BF16: 8 significant bits, a relative rounding of at most 2^-8): per group of 32 the
  // error is at most 2^-8 of the slope over half the code range plus 2^-8 of the offset, under
  // 2^-8 · (range / 2 + max|y|). Q4_K and Q6_K keep their super-blocks (K-quant formats): their
  // FP16 scales stay exact, so only FP32 rounding remains.
  std::ifstream in(fixtures_dir() / "gguf" / "blocks.json");
  REQUIRE(in.good());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  struct Case {
    const char* type;
    BlockFormat format;
    int block_elems;
    size_t block_bytes;
    int bits;
    int group;
    bool zero_point;
    bool k_quant;
  };
  const Case cases[] = {
      {"Q8_0", BlockFormat::q8_0, 32, 34, 8, 32, false, false},
      {"Q4_0", BlockFormat::q4_0, 32, 18, 4, 32, false, false},
      {"Q4_1", BlockFormat::q4_1, 32, 20, 4, 32, true, false},
      {"Q5_0", BlockFormat::q5_0, 32, 22, 8, 32, false, false},
      {"Q5_1", BlockFormat::q5_1, 32, 24, 8, 32, true, false},
      {"Q4_K", BlockFormat::q4_k, 256, 144, 4, 32, true, true},
      {"Q5_K", BlockFormat::q5_k, 256, 176, 5, 32, true, true},
      {"Q6_K", BlockFormat::q6_k, 256, 210, 6, 16, false, true},
  };
  for (const Case& c : cases) {
    DYNAMIC_SECTION(c.type) {
      const auto& entry = fixture.at(c.type);
      const std::vector<uint8_t> blocks = from_hex(entry.at("blocks").get<std::string>());
      const auto want = entry.at("expected").get<std::vector<float>>();
      const int k = c.block_elems == 32 ? 64 : 256;
      const int n = static_cast<int>(want.size()) / k;
      REQUIRE(n >= 2);
      TensorView view{"t", DType::bf16, {n, k}, nullptr, "blocks.json", c.format, blocks.data()};
      const std::optional<kern::QuantFormat> f = block_repack_format({view});
      REQUIRE(f);
      CHECK(f->bits == c.bits);
      CHECK(f->group == c.group);
      CHECK(f->zero_point == c.zero_point);
      CHECK(f->k_quant == c.k_quant);
      std::vector<uint8_t> packed(kern::packed_quant_bytes(*f, n, k));
      pack_stacked_blocks(packed.data(), {view}, k, *f);
      std::vector<float> got(want.size());
      kern::dequantize_quant_linear(got.data(), static_cast<size_t>(k), packed.data(), *f, n, k);
      size_t bad = 0;
      for (size_t g = 0; g < want.size() / 32; ++g) {
        const auto [lo, hi] = std::minmax_element(want.begin() + 32 * g, want.begin() + 32 * (g + 1));
        const float amax = std::max(std::fabs(*lo), std::fabs(*hi)), range = *hi - *lo;
        // K-quant: a wrong code is off by a step, at least range / 63.
        const float tol =
            c.k_quant ? 1e-6f * (amax + range) : std::ldexp(0.5f * range + amax, -8) * 1.02f + 1e-7f * amax;
        for (size_t i = 32 * g; i < 32 * (g + 1); ++i) {
          if (!(std::fabs(got[i] - want[i]) <= tol) && bad++ < 5)
            UNSCOPED_INFO("element " << i << ": got " << got[i] << ", gguf-py " << want[i] << ", tol " << tol);
        }
      }
      CHECK(bad == 0);
    }
  }
}

TEST_CASE("gguf blocks: Q4_K stacked with Q6_K (a Q4_K_M QKV) repacks as W8 with zero points", "[gguf][quant]") {
  std::ifstream in(fixtures_dir() / "gguf" / "blocks.json");
  REQUIRE(in.good());
  const nlohmann::json fixture = nlohmann::json::parse(in);
  const std::vector<uint8_t> q4k = from_hex(fixture.at("Q4_K").at("blocks").get<std::string>());
  const std::vector<uint8_t> q6k = from_hex(fixture.at("Q6_K").at("blocks").get<std::string>());
  std::vector<float> want = fixture.at("Q4_K").at("expected").get<std::vector<float>>();
  const auto want6 = fixture.at("Q6_K").at("expected").get<std::vector<float>>();
  want.insert(want.end(), want6.begin(), want6.end());
  const int k = 256, n = static_cast<int>(want.size()) / k;
  const TensorView a{"a", DType::bf16, {3, k}, nullptr, "blocks.json", BlockFormat::q4_k, q4k.data()};
  const TensorView b{"b", DType::bf16, {3, k}, nullptr, "blocks.json", BlockFormat::q6_k, q6k.data()};
  const std::optional<kern::QuantFormat> f = block_repack_format({a, b});
  REQUIRE(f);
  CHECK(f->bits == 8);
  CHECK(f->zero_point);
  std::vector<uint8_t> packed(kern::packed_quant_bytes(*f, n, k));
  pack_stacked_blocks(packed.data(), {a, b}, k, *f);
  std::vector<float> got(want.size());
  kern::dequantize_quant_linear(got.data(), static_cast<size_t>(k), packed.data(), *f, n, k);
  for (size_t g = 0; g < want.size() / 32; ++g) {
    const auto [lo, hi] = std::minmax_element(want.begin() + 32 * g, want.begin() + 32 * (g + 1));
    const float amax = std::max(std::fabs(*lo), std::fabs(*hi)), range = *hi - *lo;
    const float tol = amax * (0.5f / 127.0f + 1.0f / 256.0f) + std::ldexp(0.5f * range + amax, -8) * 1.02f;
    for (size_t i = 32 * g; i < 32 * (g + 1); ++i) {
      INFO("element " << i);
      REQUIRE(std::fabs(got[i] - want[i]) <= tol);
    }
  }
}

TEST_CASE("gguf: a Q8_0/Q4_K llama computes its FP32 twin's logits within the quantization error", "[gguf][quant]") {
  const auto quantized_path = fixtures_dir() / "gguf" / "tiny_llama_q8_0_q4_k.gguf";
  TempDir tmp;
  write_file(tmp / "f32.gguf", f32_twin_bytes());
  const Model f32 = load_model(tmp / "f32.gguf");
  const Model quantized = load_model(quantized_path);
  REQUIRE(quantized.config.hidden_size == 256);

  // The checkpoint hands the decoded matrices out as BF16; each weight is within its format's step
  // of the FP32 value (Q8_0: max|x|/127 per 32, here <= 0.125/127; Q4_K: range/15 per 32, plus the
  // 6-bit rounding of scale and min, here <= 0.5/15).
  const auto checkpoint = open_model_checkpoint(quantized_path);
  const TensorView up = checkpoint->tensor("model.layers.0.mlp.up_proj.weight");
  CHECK(up.dtype == DType::bf16);
  const TensorView q = checkpoint->tensor("model.layers.0.self_attn.q_proj.weight");
  std::vector<float> up_f32(static_cast<size_t>(up.numel())), q_f32(static_cast<size_t>(q.numel()));
  convert_to_f32(up, up_f32.data());
  convert_to_f32(q, q_f32.data());
  float worst_up = 0.0f, worst_q = 0.0f;
  for (size_t i = 0; i < up_f32.size(); ++i)
    worst_up = std::max(worst_up, std::fabs(up_f32[i] - f32.weights.layers[0].w_up[i]));
  for (size_t i = 0; i < q_f32.size(); ++i)
    worst_q = std::max(worst_q, std::fabs(q_f32[i] - f32.weights.layers[0].wq[i]));
  CHECK(worst_up <= 0.5f / 15 + 0.125f / 128);  // plus BF16 rounding of values <= 0.125
  CHECK(worst_q <= 0.125f / 127 + 0.125f / 128);
  CHECK(worst_q > 0.0f);  // the weights really went through the quantizer

  const std::vector<int> prompt{1, 7, 33, 12, 60, 5, 5, 41, 20, 9};
  const std::vector<float> want = all_logits(f32, prompt), got = all_logits(quantized, prompt);
  REQUIRE(got.size() == want.size());
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err2 += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    ref2 += want[i] * static_cast<double>(want[i]);
  }
  const double relative_rms = std::sqrt(err2 / ref2);
  INFO("relative RMS logit error " << relative_rms);
  // 4-bit MLP weights are off by up to 1/30 of each group's range, about 7 % RMS of the weights
  // themselves; the logits show as much (measured 0.074). A wrong decoder or row order gives
  // errors of the order of the logits (> 0.5).
  CHECK(relative_rms < 0.12);
  CHECK(relative_rms > 1e-4);  // not the FP32 weights by accident
}

TEST_CASE("gguf: quantized tensors are decoded to BF16 only when asked, and again after a release", "[gguf][quant]") {
  const auto checkpoint = open_model_checkpoint(fixtures_dir() / "gguf" / "tiny_llama_q8_0_q4_k.gguf");
  const std::string name = "model.layers.0.mlp.up_proj.weight";
  const TensorView header = checkpoint->tensor_header(name);
  CHECK(header.data == nullptr);  // nothing decoded yet
  REQUIRE(header.blocks != nullptr);
  CHECK(header.block_format != BlockFormat::none);
  const TensorView first = checkpoint->tensor(name);
  REQUIRE(first.data != nullptr);
  CHECK(first.shape == header.shape);
  const auto* v = static_cast<const kern::bf16_t*>(first.data);
  const std::vector<kern::bf16_t> values(v, v + first.numel());
  CHECK(checkpoint->tensor(name).data == first.data);  // cached until released
  checkpoint->release(name);
  const TensorView again = checkpoint->tensor(name);
  const auto* w = static_cast<const kern::bf16_t*>(again.data);
  CHECK(std::equal(values.begin(), values.end(), w));
}
