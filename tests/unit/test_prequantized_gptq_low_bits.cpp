// GPTQ 2- and 3-bit checkpoints (model/prequantized_checkpoint.h): their codes are valid 4-bit
// codes, so they load as the 4-bit path's 24-byte blocks (BlockFormat::gptq2 / gptq3) and repack as
// W4 with zero points, exactly. The test packs random codes the way AutoGPTQ's pack() lays them out,
// written here one bit at a time (the loader shifts whole words): every 32 codes along the packed
// dimension fill `bits` int32 words as one little-endian bit stream, so 3-bit codes 10 and 21 of
// each run straddle two words. The oracle is the codes: W[o][i] = scale · (code − zero).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <functional>
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

// One line of codes (a qweight column along the inputs, a qzeros row along the outputs) as GPTQ's
// bit stream: code c at stream bits c·bits up, stream bit s is bit s % 32 of word s / 32; the last
// word zero-padded.
std::vector<uint32_t> pack_line(const std::function<int(int)>& code, int n, int bits) {
  std::vector<uint32_t> words((static_cast<size_t>(n) * static_cast<size_t>(bits) + 31) / 32, 0);
  for (int c = 0; c < n; ++c) {
    for (int t = 0; t < bits; ++t) {
      const size_t s = static_cast<size_t>(c) * static_cast<size_t>(bits) + static_cast<size_t>(t);
      if ((code(c) >> t) & 1) words[s / 32] |= 1u << (s % 32);
    }
  }
  return words;
}

std::string word_bytes(const std::vector<uint32_t>& words) {
  std::string bytes(words.size() * 4, '\0');
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

// q as GPTQ tensors of `bits` per code: qweight [in · bits / 32, out], qzeros [groups, out · bits /
// 32] holding zero − zero_offset, scales F16, and g_idx unless left out. Shapes round up when in
// or out leave a partial word (the loader must refuse those).
void add_gptq_bits(std::vector<TestTensor>& tensors, const std::string& prefix, const Quantized& q, int zero_offset,
                   int bits, bool with_g_idx = true) {
  const auto out = static_cast<size_t>(q.out);
  const int rows = (q.in * bits + 31) / 32;
  std::vector<uint32_t> qweight(static_cast<size_t>(rows) * out);
  for (int o = 0; o < q.out; ++o) {
    const auto column = pack_line([&](int i) { return q.codes[static_cast<size_t>(i) * out + o]; }, q.in, bits);
    for (int r = 0; r < rows; ++r) qweight[static_cast<size_t>(r) * out + o] = column[static_cast<size_t>(r)];
  }
  std::vector<uint32_t> qzeros;
  for (int g = 0; g < q.groups; ++g) {
    const auto row =
        pack_line([&](int o) { return q.zeros[static_cast<size_t>(g) * out + static_cast<size_t>(o)] - zero_offset; },
                  q.out, bits);
    qzeros.insert(qzeros.end(), row.begin(), row.end());
  }
  const int zero_words = (q.out * bits + 31) / 32;
  tensors.push_back({prefix + ".qweight", "I32", {rows, q.out}, word_bytes(qweight)});
  tensors.push_back({prefix + ".qzeros", "I32", {q.groups, zero_words}, word_bytes(qzeros)});
  tensors.push_back({prefix + ".scales", "F16", {q.groups, q.out}, f16_tensor_bytes(q.scales)});
  if (with_g_idx) {
    std::string g_idx(static_cast<size_t>(q.in) * 4, '\0');
    std::memcpy(g_idx.data(), q.row_group.data(), g_idx.size());
    tensors.push_back({prefix + ".g_idx", "I32", {q.in}, g_idx});
  }
}

// Random `bits`-bit codes; zeros zero_offset .. 2^bits − 1 + zero_offset (a v1 file's stored
// zero − 1 reaches 2^bits − 1, so its zeros reach 2^bits); scales × 16 / 2^bits so that the
// weights are as large as 4-bit ones.
Quantized random_low_bits(int out, int in, int group, uint32_t seed, int zero_offset, int bits) {
  Quantized q = random_quantized(out, in, group, seed, zero_offset, bits);
  std::mt19937 rng(seed + 1000);
  for (auto& z : q.zeros) z = static_cast<uint8_t>(zero_offset + static_cast<int>(rng() % (1u << bits)));
  for (auto& s : q.scales) s *= static_cast<float>(16 >> bits);
  return q;
}

// The blocks themselves, dequantized in the blocks' K order (input_perm), against the codes: exact.
void check_blocks(const TensorView& header, const Quantized& q) {
  REQUIRE(header.blocks != nullptr);
  std::vector<float> w(static_cast<size_t>(q.out) * static_cast<size_t>(q.in));
  awq::dequantize_awq4(header.blocks, w.size() / 32, w.data());
  int bad = 0;
  for (int o = 0; o < q.out; ++o) {
    for (int k = 0; k < q.in; ++k) {
      const int i = header.input_perm ? header.input_perm[k] : k;
      const float want = q.weight(o, i), got = w[static_cast<size_t>(o) * static_cast<size_t>(q.in) + k];
      if (!(std::fabs(got - want) <= 1e-6f * (1.0f + std::fabs(want))) && bad++ < 4) {
        FAIL_CHECK("block W[" << o << "][" << i << "] = " << got << ", want " << want);
      }
    }
  }
}

BlockFormat low_bits_format(int bits) { return bits == 2 ? BlockFormat::gptq2 : BlockFormat::gptq3; }

}  // namespace

TEST_CASE("gptq 2/3-bit: read as the weights they encode, v1 and v2 zeros, groups 32/128/per row, g_idx",
          "[model][quant][gptq]") {
  for (const int bits : {2, 3}) {
    for (const int zero_offset : {1, 0}) {  // v1 ("gptq") stores zero − 1; v2 the zero
      for (const int group : {32, 128, 0}) {
        for (const bool with_g_idx : {true, false}) {
          INFO("bits " << bits << " zero_offset " << zero_offset << " group " << group << " g_idx " << with_g_idx);
          TempDir dir;
          const Quantized q = random_low_bits(64, 256, group > 0 ? group : 256, 21 + bits, zero_offset, bits);
          std::vector<TestTensor> tensors;
          add_gptq_bits(tensors, "x", q, zero_offset, bits, with_g_idx);
          write_file(dir / "model.safetensors", safetensors_bytes(tensors));
          const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()),
                                                       gptq_config(group, zero_offset, false, bits));
          CHECK(ck->tensor_names() == std::vector<std::string>{"x.weight"});
          const TensorView header = ck->tensor_header("x.weight");
          CHECK(header.block_format == low_bits_format(bits));
          CHECK(header.input_perm == nullptr);
          check_blocks(header, q);
          check_decoded(*ck, "x.weight", q);
          check_repacked(*ck, q, group == 32 ? 32 : 128);  // W4 with zero points
        }
      }
    }
  }
}

TEST_CASE("gptq 2/3-bit act-order: exact values, blocks exact in the inputs' sorted order", "[model][quant][gptq]") {
  for (const int bits : {2, 3}) {
    for (const int zero_offset : {1, 0}) {
      for (const int group : {32, 128}) {
        INFO("bits " << bits << " zero_offset " << zero_offset << " group " << group);
        TempDir dir;
        Quantized q = random_low_bits(32, 256, group, 31 + bits, zero_offset, bits);
        shuffle_groups(q, 5);
        std::vector<TestTensor> tensors;
        add_gptq_bits(tensors, "x", q, zero_offset, bits);
        write_file(dir / "model.safetensors", safetensors_bytes(tensors));
        const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()),
                                                     gptq_config(group, zero_offset, true, bits));
        const TensorView header = ck->tensor_header("x.weight");
        CHECK(header.block_format == low_bits_format(bits));
        REQUIRE(header.input_perm != nullptr);
        check_blocks(header, q);
        check_decoded(*ck, "x.weight", q);  // the tensor's own order
        check_repacked(*ck, q, group);
      }
    }
  }
}

// The spec's own example, words set by hand: 3-bit row 10 of a run of 32 has its two low bits in
// bits 30-31 of the run's first word and its high bit in bit 0 of the second; row 21 its low bit
// in bit 31 of the second word and its two high bits in bits 0-1 of the third. Same for the zeros
// of output columns 10 and 21.
TEST_CASE("gptq 3-bit: the codes that straddle two words", "[model][quant][gptq]") {
  const int out = 32, in = 32;
  std::vector<uint32_t> qweight(3 * out, 0), qzeros(3, 0);
  // Column 0: row 10 = 0b101 (5), row 21 = 0b011 (3); column 1: row 10 = 0b010 (2), row 21 = 0b110 (6).
  qweight[0 * out + 0] = 1u << 30;
  qweight[1 * out + 0] = 1u << 0;
  qweight[1 * out + 0] |= 1u << 31;
  qweight[2 * out + 0] = 1u << 0;
  qweight[0 * out + 1] = 1u << 31;
  qweight[2 * out + 1] = 3u << 0;
  // Zeros (v2): column 10 = 0b110 (6), column 21 = 0b101 (5); every other column 0.
  qzeros[0] = 2u << 30;
  qzeros[1] = 1u << 0;
  qzeros[1] |= 1u << 31;
  qzeros[2] = 2u << 0;
  std::vector<TestTensor> tensors;
  tensors.push_back({"x.qweight", "I32", {3, out}, word_bytes(qweight)});
  tensors.push_back({"x.qzeros", "I32", {1, 3}, word_bytes(qzeros)});
  tensors.push_back({"x.scales", "F16", {1, out}, f16_tensor_bytes(std::vector<float>(out, 1.0f))});
  TempDir dir;
  write_file(dir / "model.safetensors", safetensors_bytes(tensors));
  const auto ck = wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(0, 0, false, 3));
  const TensorView view = ck->tensor("x.weight");
  std::vector<float> w(static_cast<size_t>(out) * in);
  convert_to_f32(view, w.data());
  auto at = [&](int o, int i) { return w[static_cast<size_t>(o) * in + static_cast<size_t>(i)]; };
  CHECK(at(0, 10) == 5.0f);
  CHECK(at(0, 21) == 3.0f);
  CHECK(at(1, 10) == 2.0f);
  CHECK(at(1, 21) == 6.0f);
  CHECK(at(0, 9) == 0.0f);
  CHECK(at(0, 11) == 0.0f);
  CHECK(at(0, 20) == 0.0f);
  CHECK(at(0, 22) == 0.0f);
  CHECK(at(10, 0) == -6.0f);
  CHECK(at(21, 0) == -5.0f);
  CHECK(at(9, 0) == 0.0f);
  CHECK(at(11, 0) == 0.0f);
  CHECK(at(20, 0) == 0.0f);
  CHECK(at(22, 0) == 0.0f);
}

TEST_CASE("gptq: bits other than 2, 3, 4, 8 and 2/3-bit shapes that are no whole runs are refused",
          "[model][quant][gptq]") {
  TempDir dir;
  auto open = [&](const Quantized& q, int bits) {
    std::vector<TestTensor> t;
    add_gptq_bits(t, "x", q, 1, bits);
    write_file(dir / "model.safetensors", safetensors_bytes(t));
    return open_safetensors_checkpoint(dir.path());
  };
  for (const int bits : {1, 5, 6, 7}) {
    INFO("bits " << bits);
    REQUIRE_THROWS_WITH(
        wrap_prequantized_checkpoint(open(random_low_bits(32, 64, 32, 3, 1, 3), 3), gptq_config(32, 1, false, bits)),
        Contains("bits " + std::to_string(bits)) && Contains("2, 3, 8 (GPTQ)"));
  }
  PrequantizedConfig awq3 = gptq_config(32, 0, false, 3);  // AWQ: 4-bit only
  awq3.method = PrequantizedConfig::Method::awq;
  REQUIRE_THROWS_WITH(wrap_prequantized_checkpoint(open(random_low_bits(32, 64, 32, 3, 1, 3), 3), awq3),
                      Contains("bits 3"));
  // 3-bit, 40 inputs: qweight's 4 rows are no whole runs of 32 (3 words each).
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(32, 40, 40, 4, 1, 3), 3), gptq_config(0, 1, false, 3)),
      Contains("model.safetensors") && Contains("x.qweight") && Contains("multiples of 32"));
  // 3-bit, 48 inputs (5 rows), and 2-bit, 48 inputs (3 rows: 48 inputs, not a multiple of 32).
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(32, 48, 48, 4, 1, 3), 3), gptq_config(0, 1, false, 3)),
      Contains("x.qweight") && Contains("multiples of 32"));
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(32, 48, 48, 4, 1, 2), 2), gptq_config(0, 1, false, 2)),
      Contains("x.qweight") && Contains("multiples of 32"));
  // Outputs: 3-bit zeros come 32 columns in 3 words, 2-bit ones 16 in a word.
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(16, 64, 32, 5, 1, 3), 3), gptq_config(32, 1, false, 3)),
      Contains("x.qweight") && Contains("[16, 64]") && Contains("outputs in multiples of 32"));
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(8, 64, 32, 5, 1, 2), 2), gptq_config(32, 1, false, 2)),
      Contains("x.qweight") && Contains("outputs in multiples of 16"));
  // qzeros of a 3-bit [64, 64] weight: [2, 6]; a file with [2, 4] is refused naming it.
  std::vector<TestTensor> t;
  add_gptq_bits(t, "x", random_low_bits(64, 64, 32, 6, 1, 3), 1, 3);
  t[1].shape = {2, 4};
  t[1].bytes.resize(32);
  write_file(dir / "model.safetensors", safetensors_bytes(t));
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open_safetensors_checkpoint(dir.path()), gptq_config(32, 1, false, 3)),
      Contains("x.qzeros") && Contains("[2, 6]"));
  // The 4-bit config on a 3-bit file: its qweight reads as 8 rows a word and the zeros do not fit.
  REQUIRE_THROWS_WITH(
      wrap_prequantized_checkpoint(open(random_low_bits(64, 64, 32, 7, 1, 3), 3), gptq_config(32, 1, false, 4)),
      Contains("x.q"));
}

// A one-layer llama with 2- and 3-bit GPTQ projections (v1, group 32; in order and act-order)
// computes its dequantized twin's logits, decoded (reference path) and repacked for the W4
// kernels; the weights line names the GPTQ width and the W4 it runs as.
TEST_CASE("gptq 2/3-bit: a model computes its dequantized twin's logits as W4", "[model][quant][gptq]") {
  struct Proj {
    const char* name;
    int out, in;
    uint32_t order;
  };
  const Proj projs[] = {{"self_attn.q_proj", kHidden, kHidden, 1}, {"self_attn.k_proj", 32, kHidden, 1},
                        {"self_attn.v_proj", 32, kHidden, 1},      {"self_attn.o_proj", kHidden, kHidden, 2},
                        {"mlp.gate_proj", kFfn, kHidden, 3},       {"mlp.up_proj", kFfn, kHidden, 3},
                        {"mlp.down_proj", kHidden, kFfn, 4}};
  const std::vector<int> prompt{1, 7, 33, 12, 60, 5, 5, 41, 20, 9};
  const auto n = static_cast<int>(prompt.size());
  for (const int bits : {2, 3}) {
    for (const bool act_order : {false, true}) {
      INFO("bits " << bits << " act-order " << act_order);
      TempDir dir;
      std::vector<TestTensor> gptq, plain;
      for (std::vector<TestTensor>* t : {&gptq, &plain}) {
        t->push_back(random_f32_tensor("model.embed_tokens.weight", {kVocab, kHidden}, 1));
        t->push_back(random_f32_tensor("lm_head.weight", {kVocab, kHidden}, 2));
        const std::vector<float> ones(kHidden, 1.0f);
        t->push_back({"model.norm.weight", "F32", {kHidden}, f32_bytes(ones)});
        t->push_back({"model.layers.0.input_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
        t->push_back({"model.layers.0.post_attention_layernorm.weight", "F32", {kHidden}, f32_bytes(ones)});
      }
      uint32_t seed = 40;
      for (const Proj& p : projs) {
        Quantized q = random_low_bits(p.out, p.in, 32, seed++, 1, bits);
        if (act_order) shuffle_groups(q, p.order);
        const std::string prefix = std::string("model.layers.0.") + p.name;
        add_gptq_bits(gptq, prefix, q, 1, bits);
        plain.push_back({prefix + ".weight", "F32", {p.out, p.in}, f32_bytes(dequantized(q))});
      }
      const nlohmann::json config = {
          {"quant_method", "gptq"}, {"bits", bits}, {"group_size", 32}, {"desc_act", act_order}};
      write_file(dir / "gptq" / "config.json", tiny_llama_config(config).dump());
      write_file(dir / "gptq" / "model.safetensors", safetensors_bytes(gptq));
      write_file(dir / "plain" / "config.json", tiny_llama_config(nullptr).dump());
      write_file(dir / "plain" / "model.safetensors", safetensors_bytes(plain));

      const Model model = load_model(dir / "gptq");
      const Model twin = load_model(dir / "plain");
      CHECK(model.config.prequantized.bits == bits);
      const std::vector<float> want = reference_logits(twin, prompt);
      const double decoded = relative_rms(reference_logits(model, prompt), want);
      INFO("decoded: relative RMS logit error " << decoded);
      CHECK(decoded < 0.01);

      const auto checkpoint = open_model_checkpoint(dir / "gptq");
      ModelRunner repacked(model, *checkpoint);
      const std::string path = "GPTQ " + std::to_string(bits) + "-bit -> W4 g32 zero-point (repacked) x 4";
      CHECK(repacked.weight_format().find(path) != std::string::npos);
      const auto twin_checkpoint = open_model_checkpoint(dir / "plain");
      ModelRunner bf16(twin, *twin_checkpoint);
      ContiguousKvCache c1 = test::one_slot_cache(model.config, repacked.kv_dtype());
      ContiguousKvCache c2 = test::one_slot_cache(twin.config, bf16.kv_dtype());
      const std::vector<float> got = repacked.forward({prompt, {{0, 0, n, c1.block_table(0)}}, true}, c1);
      const std::vector<float> base = bf16.forward({prompt, {{0, 0, n, c2.block_table(0)}}, true}, c2);
      const double err = relative_rms(got, base);
      INFO("repacked: relative RMS logit error " << err << " (weights: " << repacked.weight_format() << ")");
      CHECK(err < 0.05);
    }
  }
}
