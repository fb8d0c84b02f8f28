// AWQ checkpoints (model/awq_checkpoint.h) against the weights they encode. The test packs its
// own random codes, zero points and FP16 scales the way AutoAWQ's GEMM layout does (eight codes
// per int32, columns in the order 0 2 4 6 1 3 5 7, 4 bits each from the lowest), so the oracle
// is the codes themselves: W[o][i] = scale · (code − zero). A wrong column order, nibble order,
// group or zero lookup changes the decoded weights and the logits by the order of the weights.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/contiguous_kv_cache.h"
#include "model/awq_checkpoint.h"
#include "model/model.h"
#include "model/model_runner.h"
#include "model/packed_quant.h"
#include "model_caches.h"
#include "safetensors_writer.h"

using namespace slab;
using namespace slab::test;
using Catch::Matchers::Contains;

namespace {

uint16_t f16_bits(float v) {  // exact for the test's scales (a few significant bits)
  uint32_t x;
  std::memcpy(&x, &v, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int e = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(e) << 10 | ((x >> 13) & 0x3ffu));
}

// One projection quantized: codes [in][out], zeros [in / g][out], scales [in / g][out].
struct Quantized {
  int out = 0, in = 0, group = 0;
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  float weight(int o, int i) const {
    const size_t g = static_cast<size_t>(i / group) * static_cast<size_t>(out) + static_cast<size_t>(o);
    return scales[g] * (static_cast<float>(codes[static_cast<size_t>(i) * out + o]) - static_cast<float>(zeros[g]));
  }
};

Quantized random_quantized(int out, int in, int group, uint32_t seed) {
  std::mt19937 rng(seed);
  Quantized q{out, in, group, {}, {}, {}};
  q.codes.resize(static_cast<size_t>(in) * out);
  for (auto& c : q.codes) c = static_cast<uint8_t>(rng() % 16);
  q.zeros.resize(static_cast<size_t>(in / group) * out);
  for (auto& z : q.zeros) z = static_cast<uint8_t>(rng() % 16);
  q.scales.resize(q.zeros.size());
  for (auto& s : q.scales) s = std::ldexp(static_cast<float>(8 + rng() % 8), -9);  // 2^-6 .. 2^-5.1
  return q;
}

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

std::vector<float> dequantized(const Quantized& q) {  // [out][in], nn.Linear's layout
  std::vector<float> w(static_cast<size_t>(q.out) * q.in);
  for (int o = 0; o < q.out; ++o) {
    for (int i = 0; i < q.in; ++i) w[static_cast<size_t>(o) * q.in + i] = q.weight(o, i);
  }
  return w;
}

constexpr int kHidden = 64, kFfn = 128, kHeads = 4, kKvHeads = 2, kVocab = 64;

nlohmann::json tiny_llama_config(const nlohmann::json& quantization) {
  nlohmann::json c = {
      {"model_type", "llama"},         {"hidden_size", kHidden},        {"intermediate_size", kFfn},
      {"num_hidden_layers", 1},        {"num_attention_heads", kHeads}, {"num_key_value_heads", kKvHeads},
      {"vocab_size", kVocab},          {"rms_norm_eps", 1e-5},          {"rope_theta", 10000.0},
      {"max_position_embeddings", 64}, {"tie_word_embeddings", false},  {"hidden_act", "silu"},
  };
  if (!quantization.is_null()) c["quantization_config"] = quantization;
  return c;
}

// A one-layer llama twice: with AWQ projections (group 32), and with those weights dequantized to
// F32; the rest (embedding, norms, head) identical.
void write_twins(const TempDir& dir) {
  struct Proj {
    const char* name;
    int out, in;
  };
  const Proj projs[] = {{"self_attn.q_proj", kHidden, kHidden}, {"self_attn.k_proj", 32, kHidden},
                        {"self_attn.v_proj", 32, kHidden},      {"self_attn.o_proj", kHidden, kHidden},
                        {"mlp.gate_proj", kFfn, kHidden},       {"mlp.up_proj", kFfn, kHidden},
                        {"mlp.down_proj", kHidden, kFfn}};
  std::vector<TestTensor> awq, plain;
  for (std::vector<TestTensor>* t : {&awq, &plain}) {
    t->push_back(random_f32_tensor("model.embed_tokens.weight", {kVocab, kHidden}, 1));
    t->push_back(random_f32_tensor("lm_head.weight", {kVocab, kHidden}, 2));
    std::vector<float> ones(kHidden, 1.0f);
    t->push_back({"model.norm.weight", "F32", {kHidden}, f32_bytes(ones)});
    t->push_back({"model.layers.0.input_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
    t->push_back({"model.layers.0.post_attention_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
  }
  uint32_t seed = 10;
  for (const Proj& p : projs) {
    const Quantized q = random_quantized(p.out, p.in, 32, seed++);
    const std::string prefix = std::string("model.layers.0.") + p.name;
    add_awq(awq, prefix, q);
    plain.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(q))});
  }
  const nlohmann::json awq_config = {
      {"quant_method", "awq"}, {"bits", 4}, {"group_size", 32}, {"zero_point", true}, {"version", "gemm"}};
  write_file(dir / "awq" / "config.json", tiny_llama_config(awq_config).dump());
  write_file(dir / "awq" / "model.safetensors", safetensors_bytes(awq));
  write_file(dir / "plain" / "config.json", tiny_llama_config(nullptr).dump());
  write_file(dir / "plain" / "model.safetensors", safetensors_bytes(plain));
}

std::vector<float> reference_logits(const Model& m, const std::vector<int>& prompt) {
  ContiguousKvCache cache = test::one_slot_cache(m.config, KvDtype::f32);
  return forward(m, {prompt, {{0, 0, static_cast<int>(prompt.size()), cache.block_table(0)}}, true}, cache);
}

double relative_rms(const std::vector<float>& got, const std::vector<float>& want) {
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err2 += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    ref2 += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(err2 / ref2);
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
    const auto ck = wrap_awq_checkpoint(open_safetensors_checkpoint(dir.path()), group);

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

    const TensorView view = ck->tensor(name);
    REQUIRE(view.dtype == DType::bf16);
    std::vector<float> got(static_cast<size_t>(view.numel()));
    convert_to_f32(view, got.data());
    int bad = 0;
    for (int o = 0; o < q.out; ++o) {
      for (int i = 0; i < q.in; ++i) {
        const float want = q.weight(o, i);
        const float v = got[static_cast<size_t>(o) * q.in + i];
        if (!(std::fabs(v - want) <= std::ldexp(std::fabs(want), -8) + 1e-7f) && bad++ < 4) {
          FAIL_CHECK("W[" << o << "][" << i << "] = " << v << ", want " << want);
        }
      }
    }
    ck->release(name);
    CHECK(ck->tensor(name).data != nullptr);  // made again after a release
  }
}

TEST_CASE("awq: groups of 128 repack as W4 g128, smaller ones as g32, both exact up to BF16 scales", "[model][quant]") {
  for (int group : {32, 64, 128, 256}) {
    INFO("group " << group);
    TempDir dir;
    const Quantized q = random_quantized(40, 512, group, 11);
    std::vector<TestTensor> tensors;
    add_awq(tensors, "x", q);
    write_file(dir / "model.safetensors", safetensors_bytes(tensors));
    const auto ck = wrap_awq_checkpoint(open_safetensors_checkpoint(dir.path()), group);
    const std::vector<TensorView> parts{ck->tensor_header("x.weight")};
    const std::optional<kern::QuantFormat> f = block_repack_format(parts);
    REQUIRE(f.has_value());
    CHECK(f->bits == 4);
    CHECK(f->zero_point);
    CHECK(f->group == (group % 128 == 0 ? 128 : 32));
    std::vector<uint8_t> packed(kern::packed_quant_bytes(*f, q.out, q.in));
    pack_stacked_blocks(packed.data(), parts, q.in, *f);
    std::vector<float> w(static_cast<size_t>(q.out) * q.in);
    kern::dequantize_quant_linear(w.data(), static_cast<size_t>(q.in), packed.data(), *f, q.out, q.in);
    int bad = 0;
    for (int o = 0; o < q.out; ++o) {
      for (int i = 0; i < q.in; ++i) {
        const float want = q.weight(o, i), got = w[static_cast<size_t>(o) * q.in + i];
        // The scale is rounded to BF16 and the zero chosen with it: within 2^-8 of 15 steps.
        const float step = q.scales[static_cast<size_t>(i / group) * q.out + o];
        if (!(std::fabs(got - want) <= 16.0f * step * std::ldexp(1.0f, -8)) && bad++ < 4) {
          FAIL_CHECK("W[" << o << "][" << i << "] = " << got << ", want " << want);
        }
      }
    }
  }
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
  REQUIRE_THROWS_WITH(wrap_awq_checkpoint(open([](auto& t) { t.erase(t.begin() + 1); }), 32),
                      Contains("model.safetensors") && Contains("x.qweight") && Contains("x.qzeros"));
  auto wrong_scales = [](auto& t) {
    t[2].shape = {1, 32};
    t[2].bytes.resize(64);
  };
  REQUIRE_THROWS_WITH(wrap_awq_checkpoint(open(wrong_scales), 32), Contains("x.scales") && Contains("[2, 16]"));
  REQUIRE_THROWS_WITH(wrap_awq_checkpoint(open([](auto&) {}), 128), Contains("x.qweight") && Contains("groups of 128"));
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
  CHECK(awq.config.awq_group_size == 32);
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
