// AWQ and GPTQ checkpoints (model/prequantized_checkpoint.h) against the weights they encode (GPTQ's
// 2- and 3-bit files: test_prequantized_gptq_low_bits.cpp; the oracle and the checks:
// tests/prequantized_fixtures.h). The
// test packs its own random codes, zero points and FP16 scales the way AutoAWQ's GEMM layout does
// (eight codes per int32 along the outputs, columns in the order 0 2 4 6 1 3 5 7, 4 bits each from
// the lowest) and the way AutoGPTQ's pack() does (eight codes per int32 along the inputs in order;
// zeros eight per int32 along the outputs, stored minus one in the v1 format; g_idx per input
// row), so the oracle is the codes themselves: W[o][i] = scale · (code − zero). A wrong column
// order, nibble order, group or zero lookup changes the decoded weights and the logits by the
// order of the weights.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/packed_quant.h"
#include "model/prequantized_checkpoint.h"
#include "model_caches.h"
#include "prequantized_fixtures.h"
#include "safetensors_writer.h"

using namespace slab;
using namespace slab::test;
using Catch::Matchers::Contains;

namespace {

// AutoAWQ's packing of a [rows][out] code matrix: [rows][out / 8] int32.
std::string pack_awq(const std::vector<uint8_t>& codes, int rows, int out) {
  std::string bytes(static_cast<size_t>(rows) * (out / 8) * 4, '\0');
  for (int r = 0; r < rows; ++r) {
    for (int w = 0; w < out / 8; ++w) {
      uint32_t word = 0;
      for (int c = 0; c < 8; ++c) {
        word |= static_cast<uint32_t>(codes[static_cast<size_t>(r) * out + 8 * w + kAwqOrder[c]]) << (4 * c);
      }
      std::memcpy(&bytes[(static_cast<size_t>(r) * (out / 8) + w) * 4], &word, 4);
    }
  }
  return bytes;
}

void add_awq(std::vector<TestTensor>& tensors, const std::string& prefix, const Quantized& q) {
  tensors.push_back({prefix + ".qweight", "I32", {q.in, q.out / 8}, pack_awq(q.codes, q.in, q.out)});
  tensors.push_back({prefix + ".qzeros", "I32", {q.in / q.group, q.out / 8}, pack_awq(q.zeros, q.in / q.group, q.out)});
  std::string scales(q.scales.size() * 2, '\0');
  for (size_t i = 0; i < q.scales.size(); ++i) {
    const uint16_t h = f16_bits(q.scales[i]);
    std::memcpy(&scales[2 * i], &h, 2);
  }
  tensors.push_back({prefix + ".scales", "F16", {q.in / q.group, q.out}, scales});
}

// AutoGPTQ's packing of `bits` (4 or 8) per code, p = 32 / bits codes per int32: qweight [in /
// p][out] (input rows p·r + c at bits c·bits), qzeros [groups][out / p] (outputs p·w + c) holding
// zero − zero_offset, scales [groups][out] F16, and g_idx unless left out.
void add_gptq(std::vector<TestTensor>& tensors, const std::string& prefix, const Quantized& q, int zero_offset,
              bool with_g_idx = true, int bits = 4) {
  const int p = 32 / bits;
  std::string qweight(static_cast<size_t>(q.in / p) * q.out * 4, '\0');
  for (int r = 0; r < q.in / p; ++r) {
    for (int o = 0; o < q.out; ++o) {
      uint32_t word = 0;
      for (int c = 0; c < p; ++c) {
        word |= static_cast<uint32_t>(q.codes[static_cast<size_t>(p * r + c) * q.out + o]) << (bits * c);
      }
      std::memcpy(&qweight[(static_cast<size_t>(r) * q.out + o) * 4], &word, 4);
    }
  }
  std::string qzeros(static_cast<size_t>(q.groups) * (q.out / p) * 4, '\0');
  for (int g = 0; g < q.groups; ++g) {
    for (int w = 0; w < q.out / p; ++w) {
      uint32_t word = 0;
      for (int c = 0; c < p; ++c) {
        const int zero = q.zeros[static_cast<size_t>(g) * q.out + p * w + c] - zero_offset;
        word |= static_cast<uint32_t>(zero) << (bits * c);
      }
      std::memcpy(&qzeros[(static_cast<size_t>(g) * (q.out / p) + w) * 4], &word, 4);
    }
  }
  tensors.push_back({prefix + ".qweight", "I32", {q.in / p, q.out}, qweight});
  tensors.push_back({prefix + ".qzeros", "I32", {q.groups, q.out / p}, qzeros});
  tensors.push_back({prefix + ".scales", "F16", {q.groups, q.out}, f16_tensor_bytes(q.scales)});
  if (with_g_idx) {
    std::string g_idx(static_cast<size_t>(q.in) * 4, '\0');
    std::memcpy(g_idx.data(), q.row_group.data(), g_idx.size());
    tensors.push_back({prefix + ".g_idx", "I32", {q.in}, g_idx});
  }
}

PrequantizedConfig awq_config(int group) {
  PrequantizedConfig c;
  c.method = PrequantizedConfig::Method::awq;
  c.group_size = group;
  return c;
}

// q as GPTQ projection "x" (v1 zeros, act-order groups shuffled by `seed`) in dir, wrapped with a
// config of `group` and desc_act.
std::unique_ptr<Checkpoint> open_act_order(const TempDir& dir, Quantized& q, uint32_t seed, int group, bool desc_act) {
  shuffle_groups(q, seed);
  std::vector<TestTensor> tensors;
  add_gptq(tensors, "x", q, 1);
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
  return wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(group, 1, desc_act));
}

// A one-layer llama as dir/awq (AWQ projections, group 32), dir/gptq (GPTQ v1, group 32),
// dir/gptq_act (GPTQ v1 act-order, groups of 32 dealt to rows at random) and dir/plain (the AWQ
// weights dequantized to F32); the rest (embedding, norms, head) identical. dir/plain_act holds the
// act-order weights dequantized; dir/gptq8 and dir/plain8 GPTQ 8-bit (group 32) and its weights;
// dir/gptq_mixed and dir/plain_mixed the same with k_proj in an
// order of its own (its QKV then cannot be one matrix of blocks).
void write_twins(const TempDir& dir) {
  struct Proj {
    const char* name;
    int out, in;
    uint32_t order;  // act-order: projections of one input share its order (GPTQ's Hessian is the input's)
  };
  const Proj projs[] = {{"self_attn.q_proj", kHidden, kHidden, 1}, {"self_attn.k_proj", 32, kHidden, 1},
                        {"self_attn.v_proj", 32, kHidden, 1},      {"self_attn.o_proj", kHidden, kHidden, 2},
                        {"mlp.gate_proj", kFfn, kHidden, 3},       {"mlp.up_proj", kFfn, kHidden, 3},
                        {"mlp.down_proj", kHidden, kFfn, 4}};
  std::vector<TestTensor> awq, plain, gptq, gptq_act, plain_act, gptq_mixed, plain_mixed, gptq8, plain8;
  for (std::vector<TestTensor>* t :
       {&awq, &plain, &gptq, &gptq_act, &plain_act, &gptq_mixed, &plain_mixed, &gptq8, &plain8}) {
    t->push_back(random_f32_tensor("model.embed_tokens.weight", {kVocab, kHidden}, 1));
    t->push_back(random_f32_tensor("lm_head.weight", {kVocab, kHidden}, 2));
    std::vector<float> ones(kHidden, 1.0f);
    t->push_back({"model.norm.weight", "F32", {kHidden}, f32_bytes(ones)});
    t->push_back({"model.layers.0.input_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
    t->push_back({"model.layers.0.post_attention_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
  }
  uint32_t seed = 10;
  for (const Proj& p : projs) {
    const Quantized q = random_quantized(p.out, p.in, 32, seed++, 1);
    const std::string prefix = std::string("model.layers.0.") + p.name;
    add_awq(awq, prefix, q);
    add_gptq(gptq, prefix, q, 1);
    plain.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(q))});
    Quantized shuffled = q;
    shuffle_groups(shuffled, p.order);
    add_gptq(gptq_act, prefix, shuffled, 1);
    plain_act.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(shuffled))});
    Quantized mixed = q;
    shuffle_groups(mixed, std::string(p.name) == "self_attn.k_proj" ? 9 : p.order);
    add_gptq(gptq_mixed, prefix, mixed, 1);
    plain_mixed.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(mixed))});
    Quantized q8 = random_quantized(p.out, p.in, 32, seed + 100, 1, 8);
    for (float& sc : q8.scales) sc /= 16.0f;  // 8-bit codes: weights of the 4-bit ones' size
    add_gptq(gptq8, prefix, q8, 1, true, 8);
    plain8.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(q8))});
  }
  nlohmann::json gptq8_config = {{"quant_method", "gptq"}, {"bits", 8}, {"group_size", 32}, {"desc_act", false}};
  const nlohmann::json gptq_config = {{"quant_method", "gptq"}, {"bits", 4}, {"group_size", 32}, {"desc_act", false}};
  nlohmann::json gptq_act_config = gptq_config;
  gptq_act_config["desc_act"] = true;
  for (const auto& [name, config, tensors] :
       {std::tuple{"gptq", gptq_config, &gptq}, std::tuple{"gptq_act", gptq_act_config, &gptq_act},
        std::tuple{"plain_act", nlohmann::json(), &plain_act}, std::tuple{"gptq_mixed", gptq_act_config, &gptq_mixed},
        std::tuple{"plain_mixed", nlohmann::json(), &plain_mixed}, std::tuple{"gptq8", gptq8_config, &gptq8},
        std::tuple{"plain8", nlohmann::json(), &plain8}}) {
    write_file(dir / name / "config.json", tiny_llama_config(config).dump());
    write_file(dir / name / "model.safetensors", safetensors_bytes(*tensors));
  }
  const nlohmann::json awq_config = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true}, {"version", "gemm"}};
  write_file(dir / "awq" / "config.json", tiny_llama_config(awq_config).dump());
  write_file(dir / "awq" / "model.safetensors", safetensors_bytes(awq));
  write_file(dir / "plain" / "config.json", tiny_llama_config(nullptr).dump());
  write_file(dir / "plain" / "model.safetensors", safetensors_bytes(plain));
}

}  // namespace

TEST_CASE("awq: qweight/qzeros/scales read as the weights they encode", "[model][quant]") {
  for (int group : {32, 64, 128}) {
    INFO("group " << group);
    TempDir dir;
    const Quantized q = random_quantized(48, 256, group, 7);
    std::vector<TestTensor> tensors;
    add_awq(tensors, "model.layers.0.mlp.up_proj", q);
    tensors.push_back(random_f32_tensor("model.norm.weight", {8}, 3));
    write_file(dir / "model.safetensors", safetensors_bytes(tensors));
    const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), awq_config(group));

    const std::string name = "model.layers.0.mlp.up_proj.weight";
    CHECK(ck->has(name));
    CHECK(ck->has("model.norm.weight"));
    CHECK_FALSE(ck->has("model.layers.0.mlp.up_proj.qweight"));
    const std::vector<std::string> names = ck->tensor_names();
    CHECK(names.size() == 2);
    CHECK(ck->tensor_bytes(name) == 48u * 256u * 2u);
    const TensorView header = ck->tensor_header(name);
    CHECK(header.shape == std::vector<int64_t>{48, 256});
    CHECK(header.block_format == BlockFormat::awq4);
    REQUIRE(header.blocks != nullptr);
    CHECK(header.data == nullptr);

    check_decoded(*ck, name, q);
    ck->release(name);
    CHECK(ck->tensor(name).data != nullptr);  // made again after a release
  }
}

TEST_CASE(
    "awq and gptq: groups of 128 (and gptq's one per row) repack as W4 g128, smaller ones as g32, exact up "
    "to BF16 scales",
    "[model][quant]") {
  for (const bool gptq : {false, true}) {
    for (int group : {32, 64, 128, 256, 0}) {
      if (group == 0 && !gptq) continue;  // one group per row: GPTQ's group_size -1
      INFO((gptq ? "gptq" : "awq") << " group " << group);
      TempDir dir;
      const Quantized q = random_quantized(40, 512, group > 0 ? group : 512, 11, gptq ? 1 : 0);
      std::vector<TestTensor> tensors;
      if (gptq) {
        add_gptq(tensors, "x", q, 1);
      } else {
        add_awq(tensors, "x", q);
      }
      write_file(dir / "model.safetensors", safetensors_bytes(tensors));
      const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()),
                                                   gptq ? gptq_config(group, 1) : awq_config(group));
      check_repacked(*ck, q, group % 128 == 0 ? 128 : 32);
    }
  }
  for (int group : {32, 64, 128, 0}) {  // GPTQ 8-bit: W8 with zero points, g128 where it can
    INFO("gptq 8-bit group " << group);
    TempDir dir;
    const Quantized q = random_quantized(40, 512, group > 0 ? group : 512, 13, 1, 8);
    std::vector<TestTensor> tensors;
    add_gptq(tensors, "x", q, 1, true, 8);
    write_file(dir / "model.safetensors", safetensors_bytes(tensors));
    const auto ck =
        wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(group, 1, false, 8));
    CHECK(ck->tensor_header("x.weight").block_format == BlockFormat::gptq8);
    check_repacked(*ck, q, group % 128 == 0 ? 128 : 32, 8);
  }
}

TEST_CASE("gptq: qweight/qzeros/scales/g_idx read as the weights they encode, v1 and v2 zeros, 4 and 8 bits",
          "[model][quant]") {
  for (const int bits : {4, 8}) {
    for (const int zero_offset : {1, 0}) {  // v1 ("gptq") stores zero − 1; v2 the zero
      for (const int group : {32, 128, 0}) {
        for (const bool with_g_idx : {true, false}) {
          INFO("bits " << bits << " zero_offset " << zero_offset << " group " << group << " g_idx " << with_g_idx);
          TempDir dir;
          const Quantized q = random_quantized(48, 256, group > 0 ? group : 256, 21, zero_offset, bits);
          std::vector<TestTensor> tensors;
          add_gptq(tensors, "model.layers.0.mlp.up_proj", q, zero_offset, with_g_idx, bits);
          tensors.push_back(random_f32_tensor("model.layers.0.mlp.up_proj.bias", {48}, 4));
          write_file(dir / "model.safetensors", safetensors_bytes(tensors));
          const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()),
                                                       gptq_config(group, zero_offset, false, bits));
          const std::string name = "model.layers.0.mlp.up_proj.weight";
          CHECK(ck->has(name));
          CHECK(ck->has("model.layers.0.mlp.up_proj.bias"));
          CHECK_FALSE(ck->has("model.layers.0.mlp.up_proj.g_idx"));
          CHECK(ck->tensor_names().size() == 2);
          const TensorView header = ck->tensor_header(name);
          CHECK(header.block_format == (bits == 8 ? BlockFormat::gptq8 : BlockFormat::gptq4));
          REQUIRE(header.blocks != nullptr);
          check_decoded(*ck, name, q);
        }
      }
    }
  }
}

// Act-order: the values stay exact in the tensor's own order; the blocks hold the inputs sorted by
// group (input_perm), each run of 32 in one group, so they too are exact. A g_idx whose groups
// are no whole runs of 32 after sorting has no blocks (the packer takes the values).
TEST_CASE("gptq act-order: exact values, blocks exact in the inputs' sorted order", "[model][quant]") {
  TempDir dir;
  Quantized q = random_quantized(24, 256, 64, 31, 1);
  const auto ck = open_act_order(dir, q, 5, 64, true);
  const TensorView header = ck->tensor_header("x.weight");
  CHECK(header.block_format == BlockFormat::gptq4);
  REQUIRE(header.blocks != nullptr);
  REQUIRE(header.input_perm != nullptr);
  for (int k = 1; k < q.in; ++k) {  // sorted by group, stable
    const int a = header.input_perm[k - 1], b = header.input_perm[k];
    REQUIRE((q.row_group[static_cast<size_t>(a)] < q.row_group[static_cast<size_t>(b)] ||
             (q.row_group[static_cast<size_t>(a)] == q.row_group[static_cast<size_t>(b)] && a < b)));
  }
  std::vector<float> blocks(static_cast<size_t>(q.out) * q.in);
  awq::dequantize_awq4(header.blocks, blocks.size() / 32, blocks.data());
  int bad = 0;
  for (int o = 0; o < q.out; ++o) {
    for (int k = 0; k < q.in; ++k) {
      const float want = q.weight(o, header.input_perm[k]), got = blocks[static_cast<size_t>(o) * q.in + k];
      if (!(std::fabs(got - want) <= 1e-6f * (1.0f + std::fabs(want))) && bad++ < 4) {
        FAIL_CHECK("block W[" << o << "][perm " << k << "] = " << got << ", want " << want);
      }
    }
  }
  check_decoded(*ck, "x.weight", q);  // the values: the tensor's own order
  // The same file without desc_act in config.json: refused, naming g_idx.
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(64, 1, false)),
                      Contains("x.g_idx") && Contains("desc_act"));

  // Groups of 48 (GPTQ's group_size 48 is refused by config.json's check, but a g_idx may still
  // give such sizes): a run of 32 then spans two groups, so no blocks, exact values.
  Quantized odd = random_quantized(8, 96, 48, 9, 1);
  const auto ck2 = open_act_order(dir, odd, 3, 64, true);
  CHECK(ck2->tensor_header("x.weight").blocks == nullptr);
  check_decoded(*ck2, "x.weight", odd);
}

TEST_CASE("gptq: broken projections are refused naming the file and the tensor", "[model][quant]") {
  const Quantized q = random_quantized(16, 64, 32, 3, 1);
  TempDir dir;
  auto open = [&](const std::function<void(std::vector<TestTensor>&)>& edit) {
    std::vector<TestTensor> t;
    add_gptq(t, "x", q, 1);
    edit(t);
    write_file(dir / "model.safetensors", safetensors_bytes(t));
    return open_safetensors_checkpoint(dir.path());
  };
  const PrequantizedConfig c = gptq_config(32, 1);
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open([](auto& t) { t.erase(t.begin() + 2); }), c),
                      Contains("model.safetensors") && Contains("x.qweight") && Contains("x.scales"));
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open([](auto& t) {
                                                     t[1].shape = {1, 4};
                                                   }),
                                                   c),
                      Contains("x.qzeros") && Contains("[2, 2]"));
  auto bad_g_idx = [](auto& t) {
    const int32_t g = 7;
    std::memcpy(&t[3].bytes[4 * 5], &g, 4);
  };
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open(bad_g_idx), c),
                      Contains("x.g_idx") && Contains("row 5") && Contains("group 7 of 2"));
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open([](auto& t) {
                                                     t[3].shape = {32};
                                                     t[3].bytes.resize(128);
                                                   }),
                                                   c),
                      Contains("x.g_idx") && Contains("[64]"));
  std::vector<TestTensor> odd;  // 8 × 40 weights: inputs not a multiple of 32
  add_gptq(odd, "y", random_quantized(8, 40, 40, 4, 1), 1);
  write_file(dir / "model.safetensors", safetensors_bytes(odd));
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(0, 1)),
                      Contains("y.qweight") && Contains("multiples of 32"));
}

TEST_CASE("awq: broken projections are refused naming the file and the tensor", "[model][quant]") {
  const Quantized q = random_quantized(16, 64, 32, 3);
  TempDir dir;
  // Projection "x" as AWQ tensors, changed by `edit`, in dir/model.safetensors.
  auto open = [&](const std::function<void(std::vector<TestTensor>&)>& edit) {
    std::vector<TestTensor> t;
    add_awq(t, "x", q);
    edit(t);
    write_file(dir / "model.safetensors", safetensors_bytes(t));
    return open_safetensors_checkpoint(dir.path());
  };
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open([](auto& t) { t.erase(t.begin() + 1); }), awq_config(32)),
                      Contains("model.safetensors") && Contains("x.qweight") && Contains("x.qzeros"));
  auto wrong_scales = [](auto& t) {
    t[2].shape = {1, 32};
    t[2].bytes.resize(64);
  };
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open(wrong_scales), awq_config(32)),
                      Contains("x.scales") && Contains("[2, 16]"));
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open([](auto&) {}), awq_config(128)),
                      Contains("x.qweight") && Contains("groups of 128"));
  // The I32 tensors themselves are never read as weights.
  const auto raw = open([](auto&) {});
  const TensorView qw = raw->tensor("x.qweight");
  std::vector<float> out(static_cast<size_t>(qw.numel()));
  REQUIRE_THROWS_WITH(convert_to_f32(qw, out.data()), Contains("x.qweight") && Contains("I32"));
}

TEST_CASE("awq: a model computes its dequantized twin's logits, decoded and repacked for the W4 kernels",
          "[model][quant]") {
  TempDir dir;
  write_twins(dir);
  const Model awq = load_model(dir / "awq");
  const Model plain = load_model(dir / "plain");
  CHECK(awq.config.prequantized.method == PrequantizedConfig::Method::awq);
  CHECK(awq.config.prequantized.group_size == 32);
  const std::vector<int> prompt{1, 7, 33, 12, 60, 5, 5, 41, 20, 9};
  const std::vector<float> want = reference_logits(plain, prompt);

  // Decoded to BF16 (the reference path): the weights' BF16 rounding only.
  const double decoded = relative_rms(reference_logits(awq, prompt), want);
  INFO("decoded: relative RMS logit error " << decoded);
  CHECK(decoded < 0.01);

  // Repacked from the blocks for the W4 kernels (`auto`), against the plain model's BF16 kernels:
  // scales rounded to BF16 and INT8 activations (measured ~1 %). A wrong code or group order
  // gives errors of the order of the logits.
  const auto checkpoint = open_model_checkpoint(dir / "awq");
  ModelRunner repacked(awq, *checkpoint);
  CHECK(repacked.weight_format().find("AWQ 4-bit -> W4 g32 zero-point (repacked)") != std::string::npos);
  const auto plain_checkpoint = open_model_checkpoint(dir / "plain");
  ModelRunner bf16(plain, *plain_checkpoint);
  ContiguousKvCache c1 = test::one_slot_cache(awq.config, repacked.kv_dtype());
  ContiguousKvCache c2 = test::one_slot_cache(plain.config, bf16.kv_dtype());
  const auto n = static_cast<int>(prompt.size());
  const std::vector<float> got = repacked.forward({prompt, {{0, 0, n, c1.block_table(0)}}, true}, c1);
  const std::vector<float> base = bf16.forward({prompt, {{0, 0, n, c2.block_table(0)}}, true}, c2);
  const double err = relative_rms(got, base);
  INFO("repacked: relative RMS logit error "
       << err << " (the plain model's BF16 kernels against FP32: " << relative_rms(base, want) << ")");
  CHECK(err < 0.05);
}

// The same model through GPTQ, in order and act-order (each projection's inputs in their own
// shuffled group order, gathered before the matrix): decoded (reference path) and repacked for
// the W4 kernels. A wrong gather order gives errors of the order of the logits.
TEST_CASE("gptq: a model computes its dequantized twin's logits, in order and act-order", "[model][quant]") {
  TempDir dir;
  write_twins(dir);
  const std::vector<int> prompt{1, 7, 33, 12, 60, 5, 5, 41, 20, 9};
  const auto n = static_cast<int>(prompt.size());
  for (const char* variant : {"gptq", "gptq_act", "gptq_mixed", "gptq8"}) {
    INFO(variant);
    const std::string v = variant;
    const std::string twin = v == "gptq"       ? "plain"
                             : v == "gptq_act" ? "plain_act"
                             : v == "gptq8"    ? "plain8"
                                               : "plain_mixed";
    const Model gptq = load_model(dir / v);
    const Model plain = load_model(dir / twin);
    CHECK(gptq.config.prequantized.method == PrequantizedConfig::Method::gptq);
    CHECK(gptq.config.prequantized.zero_offset == 1);
    const std::vector<float> want = reference_logits(plain, prompt);
    const double decoded = relative_rms(reference_logits(gptq, prompt), want);
    INFO("decoded: relative RMS logit error " << decoded);
    CHECK(decoded < 0.01);

    const auto checkpoint = open_model_checkpoint(dir / v);
    ModelRunner repacked(gptq, *checkpoint);
    // Mixed orders: QKV from its values (BF16), the other three from their blocks.
    const char* path = v == "gptq_mixed" ? "GPTQ 4-bit -> W4 g32 zero-point (repacked) x 3"
                       : v == "gptq8"    ? "GPTQ 8-bit -> W8 g32 zero-point (repacked) x 4"
                                         : "GPTQ 4-bit -> W4 g32 zero-point (repacked) x 4";
    CHECK(repacked.weight_format().find(path) != std::string::npos);
    if (v == "gptq_mixed") CHECK(repacked.weight_format().find("GPTQ 4-bit -> BF16 x 1") != std::string::npos);
    const auto plain_checkpoint = open_model_checkpoint(dir / twin);
    ModelRunner bf16(plain, *plain_checkpoint);
    ContiguousKvCache c1 = test::one_slot_cache(gptq.config, repacked.kv_dtype());
    ContiguousKvCache c2 = test::one_slot_cache(plain.config, bf16.kv_dtype());
    const std::vector<float> got = repacked.forward({prompt, {{0, 0, n, c1.block_table(0)}}, true}, c1);
    const std::vector<float> base = bf16.forward({prompt, {{0, 0, n, c2.block_table(0)}}, true}, c2);
    const double err = relative_rms(got, base);
    INFO("repacked: relative RMS logit error " << err << " (weights: " << repacked.weight_format() << ")");
    CHECK(err < 0.05);
  }
}
