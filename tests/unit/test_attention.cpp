// SLAB attention against the scalar FP32 reference (ref::attention) on the same BF16-rounded K/V.
//
// Tolerance: K and V are BF16 values that both sides see exactly in FP32 and Q is FP32 on both
// sides, so every product q·k and p·v is computed from the same numbers. What differs is FP32
// summation order (scores of ≤ 256 terms, outputs of ≤ 4100 terms), the vectorised exp (< 4e-7
// relative where a weight is above e^-16, 1.5e-6 below) and the split-KV merge's rescaling: all
// well under 1e-4 of max|v| here. The bound
// checked is |out - ref| <= 1e-3 * max|v| (max|v| = 1), the accuracy expected of FP32 softmax on
// BF16 inputs.
//
// Every block id that no sequence uses, layer 0 of every block, the slots of a sequence's last
// block past its kv_len, the workspace and the output all start as NaN: a read of any of them
// shows up as a NaN in the result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "kernels/attention.h"
#include "kernels/kv_block.h"
#include "kernels/reference.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"

using namespace slab;
using namespace slab::kern;

namespace {

constexpr float kTolerance = 1e-3f;
constexpr bf16_t kBf16NaN = 0x7fc0;

struct SeqSpec {
  int q_len, kv_len;
};

struct Problem {
  AttnShape shape;
  int layers = 2, layer = 1;
  size_t head_stride = 0, block_stride = 0, k_offset = 0, v_offset = 0;
  std::vector<bf16_t> pool;
  std::vector<float> pool_f32;
  std::vector<std::vector<int32_t>> tables;
  std::vector<AttnSeq> seqs;
  std::vector<float> q, expected;
  size_t width = 0;
  int rows = 0;
  float scale = 1.0f;
};

Problem make_problem(const AttnShape& shape, const std::vector<SeqSpec>& specs, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Problem p;
  p.shape = shape;
  const int bs = shape.block_size, hd = shape.head_dim;
  p.head_stride = static_cast<size_t>(bs) * hd;
  const size_t kv_stride = p.head_stride * shape.n_kv_heads;
  p.block_stride = 2 * kv_stride * p.layers;
  p.k_offset = 2 * kv_stride * p.layer;
  p.v_offset = p.k_offset + kv_stride;
  int needed = 0;
  for (const SeqSpec& s : specs) needed += (s.kv_len + bs - 1) / bs;
  const int total_blocks = needed + 3;  // three blocks nobody owns
  std::vector<int32_t> ids(static_cast<size_t>(total_blocks));
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.pool.assign(p.block_stride * total_blocks, kBf16NaN);
  p.pool_f32.assign(p.pool.size(), std::numeric_limits<float>::quiet_NaN());
  p.width = static_cast<size_t>(shape.n_heads) * hd;
  size_t next = 0;
  for (const SeqSpec& s : specs) {
    std::vector<int32_t> table;
    for (int b = 0; b * bs < s.kv_len; ++b) table.push_back(ids[next++]);
    for (int pos = 0; pos < s.kv_len; ++pos) {
      const size_t base = static_cast<size_t>(table[static_cast<size_t>(pos / bs)]) * p.block_stride;
      for (int h = 0; h < shape.n_kv_heads; ++h) {
        for (size_t off : {p.k_offset, p.v_offset}) {
          const size_t at = base + off + h * p.head_stride + static_cast<size_t>(pos % bs) * hd;
          for (int d = 0; d < hd; ++d) {
            const bf16_t v = f32_to_bf16(dist(rng));
            p.pool[at + d] = v;
            p.pool_f32[at + d] = bf16_to_f32(v);
          }
        }
      }
    }
    p.tables.push_back(std::move(table));
    p.seqs.push_back({p.rows, s.q_len, s.kv_len, nullptr});
    p.rows += s.q_len;
  }
  for (size_t i = 0; i < p.seqs.size(); ++i) p.seqs[i].block_table = p.tables[i].data();
  p.q.resize(static_cast<size_t>(p.rows) * p.width);
  for (float& v : p.q) v = 3.0f * dist(rng);  // scores of a few units: a peaked softmax
  p.scale = 1.0f / std::sqrt(static_cast<float>(hd));

  p.expected.assign(p.q.size(), 0.0f);
  for (size_t i = 0; i < p.seqs.size(); ++i) {
    const AttnSeq& s = p.seqs[i];
    ref::PagedKv kv{p.pool_f32.data(), s.block_table, bs, p.block_stride, p.k_offset, p.v_offset, p.head_stride};
    for (int r = 0; r < s.q_len; ++r) {
      const size_t row = static_cast<size_t>(s.q_start + r);
      ref::attention(p.expected.data() + row * p.width, p.q.data() + row * p.width, kv, shape.n_heads, shape.n_kv_heads,
                     hd, s.kv_len - s.q_len + r, shape.window, p.scale);
    }
  }
  return p;
}

AttentionArgs make_args(const Problem& p, float* out, float* workspace, Isa isa) {
  AttentionArgs a;
  a.q = p.q.data();
  a.ldq = p.width;
  a.out = out;
  a.ldo = p.width;
  a.kv = {p.pool.data(), p.shape.block_size, p.block_stride, p.k_offset, p.v_offset, p.head_stride};
  a.seqs = p.seqs.data();
  a.n_seqs = static_cast<int>(p.seqs.size());
  a.scale = p.scale;
  a.workspace = workspace;
  a.isa = isa;
  return a;
}

float max_error(const std::vector<float>& got, const std::vector<float>& want) {
  float worst = 0.0f;
  for (size_t i = 0; i < got.size(); ++i) {
    const float e = std::fabs(got[i] - want[i]);
    if (!(e <= worst)) worst = std::isnan(e) ? std::numeric_limits<float>::infinity() : e;
  }
  return worst;
}

struct RunOptions {
  bool round_p_to_bf16 = false;
  bool fp32_products = false;  // AttentionArgs::fp32_products: the AVX-512 block on FP32 FMAs
  bool vectors_in_lanes = true;
  bool amx = false;           // AttentionArgs::amx: prefill items on the hardware tiles
  bool amx_emulated = false;  // the same on kern::AmxEmulator
  bool k_tiled = false;       // AttnKvPool::k_tiled: p.pool holds K in the tiled order (with_tiled_k)
};

// Runs the kernel with the threads one after the other (kernels know only their index).
std::vector<float> run_sequential(const Problem& p, Isa isa, int n_threads, const RunOptions& o = {}) {
  const AttentionPlan plan = plan_attention(p.shape, p.seqs.data(), static_cast<int>(p.seqs.size()), n_threads);
  std::vector<float> ws(attention_workspace_floats(plan) + 1, std::numeric_limits<float>::quiet_NaN());
  std::vector<float> out(p.q.size(), std::numeric_limits<float>::quiet_NaN());
  AttentionArgs args = make_args(p, out.data(), ws.data(), isa);
  args.round_p_to_bf16 = o.round_p_to_bf16;
  args.fp32_products = o.fp32_products;
  args.vectors_in_lanes = o.vectors_in_lanes;
  args.amx = o.amx;
  args.amx_emulated = o.amx_emulated;
  args.kv.k_tiled = o.k_tiled;
  for (int t = 0; t < n_threads; ++t) attention_run(args, plan, t, n_threads);
  if (plan.needs_merge()) {
    for (int t = 0; t < n_threads; ++t) attention_merge(args, plan, t, n_threads);
  }
  return out;
}

std::vector<Isa> isas() {
  std::vector<Isa> v{Isa::scalar};
  if (cpu_features().has_avx2_kernels()) v.push_back(Isa::avx2);
  if (cpu_features().has_avx512_bf16_kernels()) v.push_back(Isa::avx512_bf16);
  return v;
}

// Query heads and KV heads of a test shape.
struct Heads {
  int n, kv;
};

// The tests of the AVX-512 and AMX blocks: false, with a warning naming what went untested and
// why, on a CPU without the AVX-512 BF16 kernels.
bool avx512_bf16_or_warn(const char* untested) {
  if (cpu_features().has_avx512_bf16_kernels()) return true;
  WARN(untested << " not tested: no AVX-512 BF16 kernels on this CPU (" << cpu_features().summary() << ")");
  return false;
}

// With round_p_to_bf16 the AVX-512 block rounds every softmax weight to BF16 (relative error
// <= 2^-8: 8 significant bits), which moves the output by at most 2^-8 * max|v| on top of the
// exact path's error.
constexpr float kRoundedPTolerance = kTolerance + 1.0f / 256.0f;

void check_all(const Problem& p, const std::vector<int>& thread_counts) {
  for (Isa isa : isas()) {
    for (int threads : thread_counts) {
      INFO("isa " << isa_name(isa) << " threads " << threads);
      const std::vector<float> exact = run_sequential(p, isa, threads);
      CHECK(max_error(exact, p.expected) <= kTolerance);
      const std::vector<float> rounded = run_sequential(p, isa, threads, {.round_p_to_bf16 = true});
      if (isa == Isa::avx512_bf16) {
        CHECK(max_error(rounded, p.expected) <= kRoundedPTolerance);
        INFO("FP32 products");
        const std::vector<float> fp32 = run_sequential(p, isa, threads, {.fp32_products = true});
        CHECK(max_error(fp32, p.expected) <= kTolerance);
        // Another block ran, not the dot products again (a window of one token makes any block
        // copy V exactly).
        if (p.shape.window != 1) CHECK(max_error(fp32, exact) > 0.0f);
        const std::vector<float> fp32_rounded =
            run_sequential(p, isa, threads, {.round_p_to_bf16 = true, .fp32_products = true});
        CHECK(max_error(fp32_rounded, p.expected) <= kRoundedPTolerance);
        if (p.shape.window != 1) CHECK(max_error(fp32_rounded, fp32) > 0.0f);  // P was rounded
      } else {  // the FP32 blocks have no BF16 P to round
        CHECK(max_error(rounded, exact) == 0.0f);
      }
      if (isa != Isa::scalar) {  // the AVX2 one-vector block where the shape runs vectors in lanes
        INFO("no vectors-in-lanes block");
        CHECK(max_error(run_sequential(p, isa, threads, {.vectors_in_lanes = false}), p.expected) <= kTolerance);
      }
    }
  }
}

}  // namespace

TEST_CASE("attention mixed batches match the reference over head shapes", "[attention]") {
  // Groups of 1, 4, 7, 8 and 16 query heads a KV head: the AVX2 vectors-in-lanes block runs the
  // last two (kAttnLanesMinGroupAvx2), decode rows in one register, longer tiles in two.
  const Heads heads[] = {{1, 1}, {8, 2}, {14, 2}, {32, 4}, {32, 2}};
  uint32_t seed = 1;
  for (int hd : {64, 80, 128}) {
    for (Heads h : heads) {
      for (int bs : {16, 32}) {
        INFO("head_dim " << hd << " heads " << h.n << "/" << h.kv << " block " << bs);
        const AttnShape shape{h.n, h.kv, hd, bs, 0};
        // Decode at 1, 15, 17, 100, 1000; multi-token with and without a prefix; prefill from
        // empty and after a prefix.
        const std::vector<SeqSpec> specs = {{1, 1},    {1, 15},   {1, 17},  {1, 100}, {1, 1000}, {2, 17},
                                            {37, 100}, {36, 100}, {64, 64}, {70, 70}, {66, 150}};
        check_all(make_problem(shape, specs, seed++), {1, 2, 3, 7});
      }
    }
  }
}

// Speculative decoding verifies k draft tokens in one multi-row pass and keeps their K/V: its
// greedy output equals plain decoding only if each verification row's attention is, bit for
// bit, what a decode step computes for that row alone. Same for a prompt's rows against
// decoding them one by one.
TEST_CASE("attention of a row does not depend on the rows sharing its item", "[attention]") {
  for (Heads h : {Heads{32, 4}, Heads{8, 2}, Heads{32, 2}}) {
    for (int hd : {64, 80}) {
      for (int bs : {16, 32}) {
        INFO("heads " << h.n << "/" << h.kv << " head_dim " << hd << " block " << bs);
        const AttnShape shape{h.n, h.kv, hd, bs, 0};
        for (SeqSpec spec : {SeqSpec{9, 120}, SeqSpec{70, 150}}) {  // multi-token, prefill
          const Problem p = make_problem(shape, {spec}, 900 + hd + bs + spec.q_len);
          // Each row alone: a decode sequence over the same blocks, its own KV length.
          std::vector<AttnSeq> singles;
          for (int r = 0; r < spec.q_len; ++r) {
            singles.push_back({r, 1, spec.kv_len - spec.q_len + r + 1, p.seqs[0].block_table});
          }
          // Shapes whose decode rows run on the AMX tiles too: the emulated tiles, the same rule.
          const bool amx =
              cpu_features().has_avx512_bf16_kernels() && attention_amx_all_classes(shape, Isa::avx512_bf16);
          for (Isa isa : isas()) {
            // 0: the default block, 1: FP32 products (AVX-512), 2: emulated AMX tiles.
            for (int variant : {0, 1, 2}) {
              const bool tiles = variant == 2, fp32 = variant == 1;
              if (tiles && (isa != Isa::avx512_bf16 || !amx)) continue;
              if (fp32 && isa != Isa::avx512_bf16) continue;
              for (bool round_p : {false, true}) {
                INFO("isa " << isa_name(isa) << (tiles ? " on emulated AMX tiles" : "")
                            << (fp32 ? " with FP32 products" : "") << " P rounded " << round_p << " rows "
                            << spec.q_len);
                const std::vector<float> together = run_sequential(
                    p, isa, 1, {.round_p_to_bf16 = round_p, .fp32_products = fp32, .amx_emulated = tiles});
                const AttentionPlan plan = plan_attention(shape, singles.data(), spec.q_len, 1);
                REQUIRE_FALSE(plan.needs_merge());
                std::vector<float> ws(attention_workspace_floats(plan) + 1);
                std::vector<float> alone(p.q.size(), std::numeric_limits<float>::quiet_NaN());
                AttentionArgs args = make_args(p, alone.data(), ws.data(), isa);
                args.seqs = singles.data();
                args.n_seqs = spec.q_len;
                args.round_p_to_bf16 = round_p;
                args.fp32_products = fp32;
                args.amx_emulated = tiles;
                attention_run(args, plan, 0, 1);
                CHECK(max_error(alone, together) == 0.0f);
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("attention long contexts split the KV range and merge", "[attention]") {
  for (int hd : {64, 128}) {
    for (int window : {0, 700, 1500}) {
      INFO("head_dim " << hd << " window " << window);
      const AttnShape shape{8, 2, hd, 32, window};
      const Problem p = make_problem(shape, {{1, 4100}, {1, 1000}, {3, 4100}}, 100 + hd + window);
      const AttentionPlan plan = plan_attention(shape, p.seqs.data(), 3, 2);
      // A window under kAttnSplitTokens keeps the work of a row short: no split.
      CHECK(plan.needs_merge() == (window != 700));
      check_all(p, {1, 2, 3, 7});
    }
  }
  // One sequence, one KV head: fewer items than threads, so even a short context splits.
  const AttnShape one{4, 1, 64, 16, 0};
  const Problem p = make_problem(one, {{1, 100}}, 7);
  CHECK(plan_attention(one, p.seqs.data(), 1, 3).needs_merge());
  CHECK_FALSE(plan_attention(one, p.seqs.data(), 1, 1).needs_merge());
  check_all(p, {1, 2, 3, 7});
}

TEST_CASE("attention sliding window", "[attention]") {
  for (int window : {1, 16, 33, 100}) {
    for (int bs : {16, 32}) {
      INFO("window " << window << " block " << bs);
      const AttnShape shape{14, 2, 64, bs, window};
      const std::vector<SeqSpec> specs = {{1, 1}, {1, 17}, {1, 1000}, {9, 40}, {80, 200}};
      check_all(make_problem(shape, specs, 500 + window + bs), {1, 2, 3, 7});
    }
  }
}

TEST_CASE("attention plan classifies sequences and skips masked blocks", "[attention]") {
  const AttnShape shape{32, 4, 64, 32, 0};
  const std::vector<AttnSeq> seqs = {
      {0, 1, 500, nullptr}, {1, 5, 20, nullptr}, {6, 64, 64, nullptr}, {70, 200, 200, nullptr}};
  const AttentionPlan plan = plan_attention(shape, seqs.data(), 4, 2);
  CHECK(plan.n_decode == 1);
  CHECK(plan.n_multi == 2);
  CHECK(plan.n_prefill == 1);
  CHECK(classify_attention(65) == AttnClass::prefill);
  int prefill_items = 0;
  for (const AttnWorkItem& it : plan.items) {
    REQUIRE(it.kv0 < it.kv1);
    if (it.seq != 3) continue;
    ++prefill_items;
    CHECK(it.partial < 0);
    CHECK(it.kv1 == it.row1);  // causal: a tile reads up to its last row's position only
  }
  CHECK(prefill_items == 4 * 25);  // 200 rows in tiles of 64 / 8 rows, per KV head
  // Every item lands on exactly one thread.
  std::vector<int> seen(plan.items.size(), 0);
  for (int i : plan.order) ++seen[static_cast<size_t>(i)];
  CHECK(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
  CHECK(plan.thread_begin.size() == 3u);
}

// Items taken longest first from the shared counter compute what the plan's per-thread lists do:
// each item writes its own rows (or its own partial), whichever thread runs it. Run in turn,
// thread 0 takes all but the others' first items, and the merge still finds every partial.
TEST_CASE("attention items from the shared counter give the plan lists' bits", "[attention]") {
  const AttnShape shape{32, 4, 64, 32, 0};
  const Problem p = make_problem(shape, {{1, 1500}, {1, 33}, {20, 50}, {100, 300}}, 7);
  for (Isa isa : isas()) {
    INFO("isa " << isa_name(isa));
    const int n_threads = 5;
    const std::vector<float> lists = run_sequential(p, isa, n_threads);
    CHECK(max_error(lists, p.expected) <= kTolerance);
    const AttentionPlan plan = plan_attention(shape, p.seqs.data(), static_cast<int>(p.seqs.size()), n_threads);
    REQUIRE(plan.needs_merge());  // the 1500-token decode is split
    REQUIRE(plan.by_cost.size() == plan.items.size());
    std::vector<float> ws(attention_workspace_floats(plan) + 1, std::numeric_limits<float>::quiet_NaN());
    std::vector<float> out(p.q.size(), std::numeric_limits<float>::quiet_NaN());
    AttentionArgs args = make_args(p, out.data(), ws.data(), isa);
    int cursor = 0;
    args.item_cursor = &cursor;
    for (int t = 0; t < n_threads; ++t) attention_run(args, plan, t, n_threads);
    for (int t = 0; t < n_threads; ++t) attention_merge(args, plan, t, n_threads);
    CHECK(out == lists);
  }
}

TEST_CASE("attention runs on a thread pool", "[attention]") {
  ThreadPoolOptions opts;
  opts.n_threads = 3;
  opts.pin = false;
  opts.pin_caller = false;
  ThreadPool pool(opts);
  const AttnShape shape{32, 4, 64, 32, 0};
  const Problem p = make_problem(shape, {{1, 1500}, {1, 33}, {20, 50}, {100, 300}}, 99);
  for (Isa isa : isas()) {
    INFO("isa " << isa_name(isa));
    const AttentionPlan plan = plan_attention(shape, p.seqs.data(), 4, pool.size());
    std::vector<float> ws(attention_workspace_floats(plan), std::numeric_limits<float>::quiet_NaN());
    std::vector<float> out(p.q.size(), std::numeric_limits<float>::quiet_NaN());
    const AttentionArgs args = make_args(p, out.data(), ws.data(), isa);
    attention(args, plan, [&](auto&& f) { pool.run_on_all(f); });
    CHECK(max_error(out, p.expected) <= kTolerance);
  }
}

TEST_CASE("attention falls back where the AVX-512 path does not fit", "[attention]") {
  // head_dim 72 is not a multiple of 16 (the AVX2 block takes it: a multiple of 8), 36 not of 8
  // either (scalar); block size 24 is not a multiple of 16. Every ISA must still be right.
  for (const AttnShape shape : {AttnShape{8, 2, 72, 16, 0}, AttnShape{4, 2, 36, 16, 0}, AttnShape{4, 1, 64, 24, 0}}) {
    const Problem p = make_problem(shape, {{1, 40}, {5, 33}, {70, 90}}, 4242);
    for (Isa isa : isas()) {
      for (int threads : {1, 3}) {
        INFO("isa " << isa_name(isa) << " threads " << threads << " head_dim " << shape.head_dim << " block "
                    << shape.block_size);
        CHECK(max_error(run_sequential(p, isa, threads), p.expected) <= kTolerance);
      }
    }
  }
}

// The problem with every block's K (every layer and head, the NaN slots included) rewritten in
// the tiled order kv_write keeps for the AVX-512 and AMX blocks (kernels/kv_block.h).
Problem with_tiled_k(const Problem& p) {
  Problem t = p;
  const int bs = p.shape.block_size, hd = p.shape.head_dim;
  for (size_t block = 0; block * p.block_stride < p.pool.size(); ++block) {
    for (int layer = 0; layer < p.layers; ++layer) {
      for (int h = 0; h < p.shape.n_kv_heads; ++h) {
        const size_t head_k =
            block * p.block_stride + 2 * p.head_stride * p.shape.n_kv_heads * layer + h * p.head_stride;
        for (int tok = 0; tok < bs; ++tok) {
          for (int d = 0; d < hd; ++d) {
            t.pool[head_k + kv_tiled_k_offset(tok, d, hd)] = p.pool[head_k + static_cast<size_t>(tok) * hd + d];
          }
        }
      }
    }
  }
  return t;
}

// The block on the AMX tiles (AttentionArgs::amx): prefill sequences, and decode and multi-token
// ones where the GQA group is kAttnAmxMinGroup or more; with smaller groups the rows of decode
// and multi-token sequences in the same call keep the AVX-512 block's bits.
namespace {

// Rows of the sequences that are not prefill, where a and b differ (as a count).
int non_prefill_mismatches(const Problem& p, const std::vector<float>& a, const std::vector<float>& b) {
  int bad = 0;
  for (const AttnSeq& s : p.seqs) {
    if (classify_attention(s.q_len) == AttnClass::prefill) continue;
    for (size_t i = static_cast<size_t>(s.q_start) * p.width; i < static_cast<size_t>(s.q_start + s.q_len) * p.width;
         ++i) {
      bad += a[i] != b[i];
    }
  }
  return bad;
}

// Against the reference with P split (exact) and rounded, across thread counts, on the emulated or
// the hardware tiles; decode and multi-token rows on the tiles exactly where the shape says.
void check_amx(const Problem& p, bool emulated, const std::vector<int>& thread_counts) {
  REQUIRE(attention_amx_shape(p.shape, Isa::avx512_bf16));
  for (int threads : thread_counts) {
    for (bool round_p : {false, true}) {
      INFO((emulated ? "emulated" : "hardware") << " tiles, threads " << threads << " P rounded " << round_p);
      RunOptions o{.round_p_to_bf16 = round_p, .amx = !emulated, .amx_emulated = emulated};
      const std::vector<float> tiles = run_sequential(p, Isa::avx512_bf16, threads, o);
      CHECK(max_error(tiles, p.expected) <= (round_p ? kRoundedPTolerance : kTolerance));
      o.amx = o.amx_emulated = false;
      const std::vector<float> avx512 = run_sequential(p, Isa::avx512_bf16, threads, o);
      // Shapes whose decode rows run on the tiles too: "attention of a row does not depend on the
      // rows sharing its item" checks them against the prefill rows on the tiles, bit for bit.
      if (!attention_amx_all_classes(p.shape, Isa::avx512_bf16)) CHECK(non_prefill_mismatches(p, tiles, avx512) == 0);
    }
  }
}

}  // namespace

// CPUs without AMX (CI) run the block's tiling on the emulator: group sizes that leave a last
// tile of vectors partly empty (7 and 1 heads a KV head: 63 and 64 vectors, 9 and 64 rows; 1
// and 7 keep decode on AVX-512, 8 does not),
// head_dim from one 32-dim tile row to four, blocks of one 16-token group to four, prefill from
// an empty cache and after a prefix (the first block partly masked), beside decode and
// multi-token rows.
TEST_CASE("attention prefill on emulated AMX tiles matches the reference", "[attention]") {
  if (!avx512_bf16_or_warn("emulated AMX attention (its softmax is AVX-512)")) return;
  uint32_t seed = 3000;
  for (int hd : {32, 64, 128}) {
    for (Heads h : {Heads{1, 1}, Heads{14, 2}, Heads{32, 4}}) {
      for (int bs : {16, 32, 64}) {
        if (hd == 128 && bs == 16) continue;  // covered by the others; the emulator is slow
        INFO("head_dim " << hd << " heads " << h.n << "/" << h.kv << " block " << bs);
        const AttnShape shape{h.n, h.kv, hd, bs, 0};
        const Problem p = make_problem(shape, {{1, 17}, {9, 40}, {70, 70}, {66, 150}}, seed++);
        check_amx(p, true, {3});
      }
    }
  }
}

TEST_CASE("attention prefill on emulated AMX tiles with a sliding window", "[attention]") {
  if (!avx512_bf16_or_warn("emulated AMX attention with a window")) return;
  for (int window : {1, 33}) {
    INFO("window " << window);
    const AttnShape shape{8, 2, 64, 32, window};
    check_amx(make_problem(shape, {{1, 100}, {80, 200}}, 3100 + window), true, {2});
  }
  {
    // 16 heads a KV head: each row is a group of 16 vectors. A row whose window starts at token
    // 16 of a block sees whole 16-token groups, so the softmax writes its BF16 P rows itself,
    // from token 16, beside rows of the same tile whose windows start earlier in the block.
    INFO("window 48, 16 heads a KV head");
    check_amx(make_problem({32, 2, 64, 32, 48}, {{80, 200}}, 3150), true, {2});
  }
  // head_dim 80 (not a whole 32-dim tile row) keeps prefill on the AVX-512 block.
  const AttnShape odd{8, 2, 80, 32, 0};
  CHECK_FALSE(attention_amx_shape(odd, Isa::avx512_bf16));
  const Problem p = make_problem(odd, {{70, 90}}, 3200);
  CHECK(run_sequential(p, Isa::avx512_bf16, 2, {.amx_emulated = true}) == run_sequential(p, Isa::avx512_bf16, 2));
}

TEST_CASE("attention prefill on AMX tiles matches the reference", "[attention]") {
  if (!amx_bf16_usable()) {
    WARN("no AMX-BF16 tiles on this CPU (or no tile permission from the kernel): AMX attention was not tested ("
         << cpu_features().summary() << ")");
    return;
  }
  uint32_t seed = 3300;
  for (int hd : {64, 128}) {
    for (int bs : {16, 32}) {
      INFO("head_dim " << hd << " block " << bs);
      const Problem p = make_problem({32, 4, hd, bs, 0}, {{1, 17}, {9, 40}, {70, 70}, {130, 300}}, seed++);
      check_amx(p, false, {1, 3, 16});
      const std::vector<float> hw = run_sequential(p, Isa::avx512_bf16, 2, {.amx = true});
      const std::vector<float> emulated = run_sequential(p, Isa::avx512_bf16, 2, {.amx_emulated = true});
      // The emulator follows the SDM's TDPBF16PS; the hardware may round its sums differently.
      if (hw != emulated) WARN("AMX hardware and emulator differ by up to " << max_error(hw, emulated));
    }
  }
}

// K kept in the tiled order (AttnKvPool::k_tiled) is what the AVX-512 and AMX blocks would have
// transposed it into: the same bits as the row-major cache, for head_dim 48 (a pair row past a
// tile row), 64 and 128, GQA groups 1, 7 and 8, decode (split and not), multi-token and prefill
// rows, P split and rounded. A tiled K with a shape the AVX-512 block does not take is refused.
TEST_CASE("attention over a tiled K gives the row-major cache's bits", "[attention]") {
  if (!avx512_bf16_or_warn("tiled K (only the AVX-512 and AMX blocks read it)")) return;
  uint32_t seed = 3400;
  for (int hd : {48, 64, 128}) {
    for (Heads h : {Heads{1, 1}, Heads{14, 2}, Heads{32, 4}}) {
      for (int bs : {16, 32}) {
        INFO("head_dim " << hd << " heads " << h.n << "/" << h.kv << " block " << bs);
        const AttnShape shape{h.n, h.kv, hd, bs, 0};
        REQUIRE(attention_k_tiled(shape, Isa::avx512_bf16));
        const Problem p = make_problem(shape, {{1, 17}, {1, 1500}, {9, 40}, {70, 70}, {66, 150}}, seed++);
        const Problem tiled = with_tiled_k(p);
        for (bool round_p : {false, true}) {
          INFO("P rounded " << round_p);
          const std::vector<float> rows = run_sequential(p, Isa::avx512_bf16, 3, {.round_p_to_bf16 = round_p});
          CHECK(max_error(rows, p.expected) <= (round_p ? kRoundedPTolerance : kTolerance));
          CHECK(run_sequential(tiled, Isa::avx512_bf16, 3, {.round_p_to_bf16 = round_p, .k_tiled = true}) == rows);
          const RunOptions fp32{.round_p_to_bf16 = round_p, .fp32_products = true};
          RunOptions fp32_tiled = fp32;
          fp32_tiled.k_tiled = true;
          CHECK(run_sequential(tiled, Isa::avx512_bf16, 3, fp32_tiled) == run_sequential(p, Isa::avx512_bf16, 3, fp32));
          if (hd % 32 == 0 && h.n == 14 && bs == 32) {  // one AMX case: the emulator is slow
            const RunOptions amx{.round_p_to_bf16 = round_p, .amx_emulated = true};
            RunOptions amx_tiled = amx;
            amx_tiled.k_tiled = true;
            CHECK(run_sequential(tiled, Isa::avx512_bf16, 3, amx_tiled) == run_sequential(p, Isa::avx512_bf16, 3, amx));
          }
        }
      }
    }
  }
  const AttnShape odd{8, 2, 64, 24, 0};  // block size 24: the AVX-512 block does not take it
  CHECK_FALSE(attention_k_tiled(odd, Isa::avx512_bf16));
  CHECK_FALSE(attention_k_tiled(AttnShape{8, 2, 64, 32, 0}, Isa::avx2));
  const Problem p = make_problem(odd, {{1, 40}}, 3500);
  CHECK_THROWS_AS(run_sequential(p, Isa::avx512_bf16, 1, {.k_tiled = true}), std::invalid_argument);
}
