#pragma once
// Test helpers for the AWQ/GPTQ checkpoint tests (model/prequantized_checkpoint.h): random codes,
// zero points and FP16 scales as the oracle (W[o][i] = scale · (code − zero)), the checks of the
// decoded values and of the W4/W8 repack against it, and a one-layer llama's config and logits.
// The packers (AutoAWQ's, AutoGPTQ's) stay in the test files.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kv/contiguous_kv_cache.h"
#include "model/model.h"
#include "model/packed_quant.h"
#include "model/prequantized_checkpoint.h"
#include "model_caches.h"

namespace slab::test {

inline uint16_t f16_bits(float v) {  // exact for the test's scales (a few significant bits)
  uint32_t x;
  std::memcpy(&x, &v, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const int e = static_cast<int>((x >> 23) & 0xff) - 127 + 15;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(e) << 10 | ((x >> 13) & 0x3ffu));
}

// One projection quantized: codes [in][out], zeros [groups][out], scales [groups][out]; input
// row i in group row_group[i] (i / group unless shuffled: GPTQ's act-order).
struct Quantized {
  int out = 0, in = 0, group = 0, groups = 0;
  std::vector<uint8_t> codes, zeros;
  std::vector<float> scales;
  std::vector<int> row_group;
  float weight(int o, int i) const {
    const size_t g =
        static_cast<size_t>(row_group[static_cast<size_t>(i)]) * static_cast<size_t>(out) + static_cast<size_t>(o);
    return scales[g] * (static_cast<float>(codes[static_cast<size_t>(i) * out + o]) - static_cast<float>(zeros[g]));
  }
};

// zero_min 1: a GPTQ v1 file cannot store a zero of 0 (it stores zero − 1). bits 8: codes and
// zeros 0..255 (GPTQ 8-bit).
inline Quantized random_quantized(int out, int in, int group, uint32_t seed, int zero_min = 0, int bits = 4) {
  const int levels = 1 << bits;
  std::mt19937 rng(seed);
  Quantized q{out, in, group, (in + group - 1) / group, {}, {}, {}, {}};
  q.row_group.resize(static_cast<size_t>(in));
  for (int i = 0; i < in; ++i) q.row_group[static_cast<size_t>(i)] = i / group;
  q.codes.resize(static_cast<size_t>(in) * out);
  for (auto& c : q.codes) c = static_cast<uint8_t>(rng() % static_cast<uint32_t>(levels));
  q.zeros.resize(static_cast<size_t>(q.groups) * out);
  for (auto& z : q.zeros)
    z = static_cast<uint8_t>(zero_min + static_cast<int>(rng() % static_cast<uint32_t>(levels - zero_min)));
  q.scales.resize(q.zeros.size());
  for (auto& s : q.scales) s = std::ldexp(static_cast<float>(8 + rng() % 8), -9);  // 2^-6 .. 2^-5.1
  return q;
}

inline std::string f16_tensor_bytes(const std::vector<float>& v) {
  std::string bytes(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = f16_bits(v[i]);
    std::memcpy(&bytes[2 * i], &h, 2);
  }
  return bytes;
}

inline PrequantizedConfig gptq_config(int group, int zero_offset, bool desc_act = false, int bits = 4) {
  PrequantizedConfig c;
  c.method = PrequantizedConfig::Method::gptq;
  c.bits = bits;
  c.group_size = group;  // 0: one group per row (-1 in config.json)
  c.zero_offset = zero_offset;
  c.desc_act = desc_act;
  return c;
}

// Act-order: rows dealt to groups by a random permutation (each group keeps its size), as GPTQ's
// desc_act orders them by activation.
inline void shuffle_groups(Quantized& q, uint32_t seed) {
  std::mt19937 rng(seed);
  std::shuffle(q.row_group.begin(), q.row_group.end(), rng);
}

// Decoded values of `name` against q.weight: BF16 rounding only.
inline void check_decoded(const Checkpoint& ck, const std::string& name, const Quantized& q) {
  const TensorView view = ck.tensor(name);
  REQUIRE(view.dtype == DType::bf16);
  REQUIRE(view.shape == std::vector<int64_t>{q.out, q.in});
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
}

// Repacked for the W4 kernels as block_repack_format chooses: g128 where every 128 share a scale.
// Act-order (input_perm): packed input k is the weight's input input_perm[k].
inline void check_repacked(const Checkpoint& ck, const Quantized& q, int want_group, int want_bits = 4) {
  const std::vector<TensorView> parts{ck.tensor_header("x.weight")};
  const std::optional<kern::QuantFormat> f = block_repack_format(parts);
  REQUIRE(f.has_value());
  CHECK(f->bits == want_bits);
  CHECK(f->zero_point);
  CHECK(f->group == want_group);
  std::vector<uint8_t> packed(kern::packed_quant_bytes(*f, q.out, q.in));
  pack_stacked_blocks(packed.data(), parts, q.in, *f);
  std::vector<float> w(static_cast<size_t>(q.out) * q.in);
  kern::dequantize_quant_linear(w.data(), static_cast<size_t>(q.in), packed.data(), *f, q.out, q.in);
  int bad = 0;
  const int32_t* perm = parts.front().input_perm;
  for (int o = 0; o < q.out; ++o) {
    for (int k = 0; k < q.in; ++k) {
      const int i = perm ? perm[k] : k;
      const float want = q.weight(o, i), got = w[static_cast<size_t>(o) * q.in + k];
      // The scale is rounded to BF16 and the zero chosen with it: within 2^-8 of the top code's steps.
      const float step = q.scales[static_cast<size_t>(q.row_group[static_cast<size_t>(i)]) * q.out + o];
      if (!(std::fabs(got - want) <= static_cast<float>(1 << want_bits) * step * std::ldexp(1.0f, -8)) && bad++ < 4) {
        FAIL_CHECK("W[" << o << "][" << i << "] = " << got << ", want " << want);
      }
    }
  }
}

inline std::vector<float> dequantized(const Quantized& q) {  // [out][in], nn.Linear's layout
  std::vector<float> w(static_cast<size_t>(q.out) * q.in);
  for (int o = 0; o < q.out; ++o) {
    for (int i = 0; i < q.in; ++i) w[static_cast<size_t>(o) * q.in + i] = q.weight(o, i);
  }
  return w;
}

inline constexpr int kHidden = 64, kFfn = 128, kHeads = 4, kKvHeads = 2, kVocab = 64;

inline nlohmann::json tiny_llama_config(const nlohmann::json& quantization) {
  nlohmann::json c = {
      {"model_type", "llama"},         {"hidden_size", kHidden},        {"intermediate_size", kFfn},
      {"num_hidden_layers", 1},        {"num_attention_heads", kHeads}, {"num_key_value_heads", kKvHeads},
      {"vocab_size", kVocab},          {"rms_norm_eps", 1e-5},          {"rope_theta", 10000.0},
      {"max_position_embeddings", 64}, {"tie_word_embeddings", false},  {"hidden_act", "silu"},
  };
  if (!quantization.is_null()) c["quantization_config"] = quantization;
  return c;
}

inline std::vector<float> reference_logits(const Model& m, const std::vector<int>& prompt) {
  ContiguousKvCache cache = test::one_slot_cache(m.config, KvDtype::f32);
  return forward(m, {prompt, {{0, 0, static_cast<int>(prompt.size()), cache.block_table(0)}}, true}, cache);
}

inline double relative_rms(const std::vector<float>& got, const std::vector<float>& want) {
  double err2 = 0.0, ref2 = 0.0;
  for (size_t i = 0; i < want.size(); ++i) {
    err2 += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    ref2 += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(err2 / ref2);
}

}  // namespace slab::test
