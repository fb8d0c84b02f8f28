// Packing a checkpoint on several threads (TaskTeam, PackOptions::team) gives the bytes one
// thread gives, for BF16, SwiGLU and round-to-nearest matrices and for repacked GGUF and AWQ
// blocks and F16 rows, ragged panels and parts off panel boundaries included; and the
// team's shares cover every unit once, run on the cpus given for them, and pass exceptions back
// to the caller.
#include <catch2/catch.hpp>

#include <sched.h>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <stdexcept>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "affinity_guard.h"
#include "model/packed_quant.h"
#include "model/packed_weights.h"
#include "runtime/task_team.h"
#include "runtime/topology.h"

using namespace slab;

namespace {

// Big enough that the team splits its matrices (kMinPackPanelsPerThread panels a thread): MLP 688
// rows (22 BF16 panels, the last ragged; 43 quantized ones), vocab 1000 (32 panels); heads of 24
// make K and V 48 rows each, so the QKV parts do not start on BF16 panel boundaries.
ModelConfig pack_test_config() {
  return parse_model_config({{"model_type", "llama"},
                             {"vocab_size", 1000},
                             {"hidden_size", 256},
                             {"intermediate_size", 688},
                             {"num_hidden_layers", 2},
                             {"num_attention_heads", 8},
                             {"num_key_value_heads", 2},
                             {"head_dim", 24},
                             {"rms_norm_eps", 1e-5},
                             {"tie_word_embeddings", false}},
                            "pack test config");
}

std::vector<float> random_matrix(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 0.05f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

ModelWeights random_weights(const ModelConfig& c) {
  std::mt19937 rng(7);
  const size_t h = static_cast<size_t>(c.hidden_size), inter = static_cast<size_t>(c.intermediate_size);
  const size_t q_dim = static_cast<size_t>(c.num_heads) * c.head_dim;
  const size_t kv = static_cast<size_t>(c.num_kv_heads) * c.head_dim;
  ModelWeights w;
  w.token_embedding = random_matrix(static_cast<size_t>(c.vocab_size) * h, rng);
  w.lm_head = random_matrix(static_cast<size_t>(c.vocab_size) * h, rng);
  w.final_norm.assign(h, 1.0f);
  for (int l = 0; l < c.num_layers; ++l) {
    LayerWeights lw;
    lw.attn_norm.assign(h, 1.0f);
    lw.mlp_norm.assign(h, 1.0f);
    lw.wq = random_matrix(q_dim * h, rng);
    lw.wk = random_matrix(kv * h, rng);
    lw.wv = random_matrix(kv * h, rng);
    lw.wo = random_matrix(h * q_dim, rng);
    lw.w_gate = random_matrix(inter * h, rng);
    lw.w_up = random_matrix(inter * h, rng);
    lw.w_down = random_matrix(h * inter, rng);
    w.layers.push_back(std::move(lw));
  }
  return w;
}

bool same_bytes(const PackedMatrix& a, const PackedMatrix& b) {
  if (a.bytes() != b.bytes() || a.n != b.n || a.k != b.k || a.swiglu != b.swiglu || a.quantized != b.quantized) {
    return false;
  }
  return std::memcmp(a.buf.as<const uint8_t>(), b.buf.as<const uint8_t>(), a.bytes()) == 0;
}

// Rows of random blocks of one format with sane FP16 (FP32 for AWQ) scales where the format has
// them: the repack converts those, so a NaN would throw. AWQ blocks share their map over each
// run of four (one map per 128 elements), so the parts repack as W4 g128.
std::vector<uint8_t> random_blocks(BlockFormat format, int rows, int k, std::mt19937& rng) {
  struct Layout {
    int elems;
    size_t bytes;
    std::vector<size_t> fp16_at;
  };
  Layout l{};
  switch (format) {
    case BlockFormat::q8_0: l = {32, 34, {0}}; break;
    case BlockFormat::q4_0: l = {32, 18, {0}}; break;
    case BlockFormat::q4_1: l = {32, 20, {0, 2}}; break;
    case BlockFormat::q4_k: l = {256, 144, {0, 2}}; break;
    case BlockFormat::q5_k: l = {256, 176, {0, 2}}; break;
    case BlockFormat::q6_k: l = {256, 210, {208}}; break;
    case BlockFormat::awq4: l = {32, 24, {}}; break;
    default: FAIL("no layout for this format");
  }
  const size_t blocks = static_cast<size_t>(rows) * static_cast<size_t>(k / l.elems);
  std::vector<uint8_t> out(blocks * l.bytes);
  std::uniform_int_distribution<int> byte(0, 255);
  for (uint8_t& b : out) b = static_cast<uint8_t>(byte(rng));
  std::uniform_int_distribution<int> mantissa(0, 1023);
  for (size_t b = 0; b < blocks; ++b) {
    uint8_t* blk = out.data() + b * l.bytes;
    for (const size_t at : l.fp16_at) {
      const auto h = static_cast<uint16_t>(0x2000 | mantissa(rng));  // ~2^-7 .. 2^-6
      std::memcpy(blk + at, &h, 2);
    }
    if (format == BlockFormat::awq4) {
      if (b % 4 == 0) {
        const float map[2] = {0.01f + 0.001f * static_cast<float>(b % 7), -0.08f};
        std::memcpy(blk, map, sizeof(map));
      } else {
        std::memcpy(blk, blk - (b % 4) * l.bytes, 8);
      }
    }
  }
  return out;
}

TensorView block_part(const std::string& name, BlockFormat format, int rows, int k,
                      const std::vector<uint8_t>& blocks) {
  TensorView v;
  v.name = name;
  v.file = "random blocks";
  v.dtype = DType::bf16;
  v.shape = {rows, k};
  v.block_format = format;
  v.blocks = blocks.data();
  return v;
}

}  // namespace

TEST_CASE("a team's shares cover every unit once, in contiguous runs of at least min_units", "[model]") {
  const TaskTeam team(3);
  for (const int units : {1, 7, 8, 23, 24, 100}) {
    std::vector<std::atomic<int>> hits(static_cast<size_t>(units));
    std::atomic<int> calls{0};
    std::atomic<bool> short_share{false};
    team.for_shares(units, 8, [&](int lo, int hi) {
      ++calls;
      if (hi - lo < 8 && units >= 8) short_share = true;
      for (int u = lo; u < hi; ++u) ++hits[static_cast<size_t>(u)];
    });
    for (const auto& h : hits) CHECK(h.load() == 1);
    CHECK(calls.load() == std::clamp(units / 8, 1, 3));
    CHECK_FALSE(short_share.load());
  }
}

TEST_CASE("a team passes a share's exception to the caller after every share has finished", "[model]") {
  const TaskTeam team(4);
  std::atomic<int> finished{0};
  CHECK_THROWS_WITH(team.for_shares(40, 1,
                                    [&](int lo, int) {
                                      if (lo > 0 && lo < 20) throw std::runtime_error("panel failed");
                                      ++finished;
                                    }),
                    "panel failed");
  CHECK(finished.load() == 3);
}

TEST_CASE("a team's worker runs on the cpus given for it", "[model]") {
  const test::AffinityGuard guard;
  guard.widen();
  const TopologyInfo info = Topology::system().process_info();
  if (info.cores.size() < 2) {
    WARN("skipped: one core in this process's cpuset");
    return;
  }
  const std::vector<int>& second = info.cores[1].os_cpus;
  const TaskTeam team(2, {{}, second});
  std::atomic<int> cpu{-1};
  team.for_shares(2, 1, [&](int lo, int) {
    if (lo == 1) cpu = sched_getcpu();
  });
  CHECK(std::find(second.begin(), second.end(), cpu.load()) != second.end());
}

TEST_CASE("packing on three threads gives the bytes one thread gives", "[model]") {
  const ModelConfig c = pack_test_config();
  const ModelWeights w = random_weights(c);
  const auto checkpoint = checkpoint_over(c, w);
  const TaskTeam team(3);
  for (const WeightQuantization q : {WeightQuantization::automatic, WeightQuantization::w8, WeightQuantization::w4}) {
    INFO("quantization " << weight_quantization_name(q));
    PackOptions serial;
    serial.quantization = q;
    PackOptions threaded = serial;
    threaded.team = &team;
    const PackedModel one = pack_model(c, *checkpoint, serial);
    const PackedModel three = pack_model(c, *checkpoint, threaded);
    REQUIRE(one.layers.size() == three.layers.size());
    for (size_t l = 0; l < one.layers.size(); ++l) {
      INFO("layer " << l);
      CHECK(same_bytes(one.layers[l].qkv, three.layers[l].qkv));
      CHECK(same_bytes(one.layers[l].o, three.layers[l].o));
      CHECK(same_bytes(one.layers[l].gate_up, three.layers[l].gate_up));
      CHECK(same_bytes(one.layers[l].down, three.layers[l].down));
    }
    CHECK(same_bytes(one.lm_head, three.lm_head));
    // The matrices were packed at all: a zero-filled buffer on both sides would also compare equal.
    const PackedMatrix& g = three.layers[0].gate_up;
    const uint8_t* bytes = g.buf.as<const uint8_t>();
    size_t nonzero = 0;
    for (size_t i = 0; i < g.bytes(); ++i) nonzero += bytes[i] != 0;
    CHECK(nonzero > g.bytes() / 2);
  }
}

TEST_CASE("block repacks on three threads give the bytes one thread gives", "[model]") {
  // Parts of 40 and 56 rows: 6 panels of 16 rows, fewer than the team's minimum for a second
  // share, so one run; parts of 184 and 216: 25 panels in three runs. Either second part starts
  // inside a panel.
  const TaskTeam team(3);
  std::mt19937 rng(11);
  for (const BlockFormat format : {BlockFormat::q4_k, BlockFormat::q5_k, BlockFormat::q6_k, BlockFormat::q8_0,
                                   BlockFormat::q4_0, BlockFormat::q4_1, BlockFormat::awq4}) {
    for (const int first_rows : {40, 184}) {
      const int k = 512, second_rows = first_rows == 40 ? 56 : 216;
      INFO(block_format_name(format) << ", parts of " << first_rows << " and " << second_rows << " rows");
      const auto a = random_blocks(format, first_rows, k, rng);
      const auto b = random_blocks(format, second_rows, k, rng);
      const std::vector<TensorView> parts = {block_part("a", format, first_rows, k, a),
                                             block_part("b", format, second_rows, k, b)};
      const std::optional<kern::QuantFormat> f = block_repack_format(parts);
      REQUIRE(f.has_value());
      if (format == BlockFormat::awq4) CHECK(f->group == 128);
      const size_t bytes = kern::packed_quant_bytes(*f, first_rows + second_rows, k);
      std::vector<uint8_t> one(bytes, 0xAA), three(bytes, 0x55);
      pack_stacked_blocks(one.data(), parts, k, *f);
      pack_stacked_blocks(three.data(), parts, k, *f, &team);
      CHECK(one == three);
      CHECK(static_cast<size_t>(std::count(one.begin(), one.end(), uint8_t{0})) < bytes / 2);
    }
  }
}

TEST_CASE("F16 rows pack on three threads as on one, and as their FP32 values do", "[model]") {
  // Each run of panels widens its own F16 rows; a wrong row offset or element size shows as a
  // difference from the FP32 twin, whose values are the same numbers.
  const TaskTeam team(3);
  std::mt19937 rng(5);
  const int k = 256;
  const std::vector<int> rows = {400, 72};  // 25 + 4.5 quantized panels, the last one ragged
  std::vector<std::vector<uint16_t>> half(rows.size());
  std::vector<std::vector<float>> single(rows.size());
  std::vector<TensorView> f16_parts, f32_parts;
  std::uniform_int_distribution<int> bits(0, 0x7ff);
  for (size_t i = 0; i < rows.size(); ++i) {
    const size_t n = static_cast<size_t>(rows[i]) * k;
    for (size_t e = 0; e < n; ++e) {
      const int b = bits(rng);  // sign, and exponents 2^-9 .. 2^-2
      const auto h = static_cast<uint16_t>(((b & 1) << 15) | ((6 + (b >> 1) % 8) << 10) | ((b * 37) & 0x3ff));
      half[i].push_back(h);
      single[i].push_back(f16_to_f32(h));
    }
    TensorView v;
    v.name = "part" + std::to_string(i);
    v.file = "F16 rows";
    v.shape = {rows[i], k};
    v.dtype = DType::f16;
    v.data = half[i].data();
    f16_parts.push_back(v);
    v.dtype = DType::f32;
    v.data = single[i].data();
    f32_parts.push_back(v);
  }
  for (const WeightQuantization q : {WeightQuantization::w8, WeightQuantization::w4}) {
    INFO("quantization " << weight_quantization_name(q));
    const kern::QuantFormat f = *rtn_quant_format(q);
    const size_t bytes = kern::packed_quant_bytes(f, rows[0] + rows[1], k);
    std::vector<uint8_t> one(bytes), three(bytes), from_f32(bytes);
    pack_stacked_rtn(one.data(), f16_parts, k, f);
    pack_stacked_rtn(three.data(), f16_parts, k, f, &team);
    pack_stacked_rtn(from_f32.data(), f32_parts, k, f);
    CHECK(one == three);
    CHECK(one == from_f32);
  }
}
