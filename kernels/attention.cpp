// SLAB attention: planning (classification, split-KV, thread assignment), the work-item driver
// (Q staging, block pointers, masks, finalisation), the split-KV merge, and the scalar block
// (the portable path). The AVX-512 block is in attention_avx512.cpp.
#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <stdexcept>

#include "kernels/amx_tiles.h"
#include "kernels/attention_block.h"
#include "kernels/kv_block.h"
#include "kernels/work_split.h"

namespace slab::kern {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

size_t round16(size_t n) { return (n + 15) / 16 * 16; }
int ceil_div(int a, int b) { return (a + b - 1) / b; }

int group_of(const AttnShape& s) { return s.n_heads / s.n_kv_heads; }
int rows_per_tile(const AttnShape& s) { return std::max(1, kAttnMaxVectors / group_of(s)); }

// AMX prefill items take their KV blocks in spans of up to kAttnAmxSpanTokens: one softmax and one load and store of O per span instead of
// per block. Blocks of 128 tokens made a 2048-token prefill's AMX attention 1.26-1.27x faster
// than blocks of 32 on two Xeon cores (bench/results/2026-12-01-xeon-2c-amx-64-rows). Only on
// shapes whose decode rows do not run on the tiles (GQA group below kAttnAmxMinGroup): their
// prefill rows already differ in bits from decode rows (AVX-512), while on the others a prompt's
// rows must equal its rows decoded one by one, which run one block at a time.
// KV blocks of a span for this shape: 1 where spans do not apply (block size not a multiple of 32).
int amx_span_blocks(const AttnShape& sh) {
  return sh.block_size % 32 == 0 ? std::max(1, detail::kAttnAmxSpanTokens / sh.block_size) : 1;
}

// Per-thread scratch, in floats, carved from the start of the workspace. Vectors are counted in
// whole registers of 16 where the AVX2 vectors-in-lanes block needs them (mx, l, s, qt, ot).
// The AMX block's tiles are 16 vectors high: its o, s, qhl and P rows are mv16.
struct ScratchLayout {
  size_t q, o, s, k, v, mx, l, qhl, qt, ot, p, vt, total;
};
ScratchLayout scratch_layout(const AttnShape& sh) {
  const size_t mv = static_cast<size_t>(rows_per_tile(sh)) * group_of(sh);
  const size_t mv16 = round16(mv);
  const size_t hd = static_cast<size_t>(sh.head_dim);
  const size_t bs = round16(static_cast<size_t>(sh.block_size));
  const int span = sh.block_size * amx_span_blocks(sh);  // an AMX span's tokens (s, P, V tiles)
  const auto ldp = static_cast<size_t>(detail::amx_attention_ldp(span));
  ScratchLayout l{};
  l.q = 0;
  l.o = l.q + round16(mv * hd);
  l.s = l.o + mv16 * hd;
  l.k = l.s + mv16 * std::max(bs, static_cast<size_t>(span));
  l.v = l.k + round16(std::max(bs, static_cast<size_t>(span) / 2) * hd);  // an AMX span's K tiles: span · hd / 2
  l.mx = l.v + round16(bs * hd);
  l.l = l.mx + mv16;
  l.qhl = l.l + mv16;
  l.qt = l.qhl + mv16 * detail::q_hilo_floats(sh.head_dim);
  l.ot = l.qt + mv16 * hd;
  l.p = l.ot + mv16 * hd;  // P hi then lo, BF16: mv16 · ldp floats
  l.vt = l.p + mv16 * ldp;
  l.total = l.vt + round16(detail::amx_attention_vt_elems(span, sh.head_dim) / 2);
  return l;
}

size_t partial_floats(int vectors, int head_dim) {
  const size_t m = static_cast<size_t>(vectors);
  return round16(m * static_cast<size_t>(head_dim) + 2 * m);
}

bool use_avx512(const AttnShape& sh, Isa isa) {
  return isa == Isa::avx512_bf16 && sh.head_dim % 16 == 0 && sh.block_size % 16 == 0;
}
// The FP32 block on 8-lane FMAs: Isa::avx2, and AVX-512 shapes its block does not take.
bool use_avx2(const AttnShape& sh, Isa isa) {
  return (isa == Isa::avx2 || isa == Isa::avx512_bf16) && !use_avx512(sh, isa) && sh.head_dim % 8 == 0;
}
// The AVX2 block with the vectors in the lanes, chosen per shape and never per item: a row's
// result must not depend on how many rows share its item (speculative decoding's verification
// rows must equal, bit for bit, the decode rows they stand for; each block computes every
// vector the same way whatever the item holds, but the two blocks sum in different orders).
// A shape qualifies when its decode row, the GQA group, fills an 8-lane register.
bool use_avx2_lanes(const AttnShape& sh, Isa isa) {
  return use_avx2(sh, isa) && group_of(sh) >= kAttnLanesMinGroupAvx2;
}

// The AMX block: the AVX-512 block's shapes with head_dim in whole 32-element tile rows.
bool use_amx(const AttnShape& sh, Isa isa) { return use_avx512(sh, isa) && sh.head_dim % 32 == 0; }
// Whether decode and multi-token items go to the tiles too: from kAttnAmxMinGroup query heads a
// KV head (a decode item's vectors). The block's AVX-512 work alone (softmax, V relayout, P and
// O passes) measured 0.6-0.7x of the whole AVX-512 block's time on batch-1/16 decode with 8
// heads a KV head (Zen 4, tile calls made no-ops); with fewer heads that work stays while the
// AVX-512 block's products shrink, so smaller groups keep decode on AVX-512. Per shape, never per
// item: with every class on one block a row's result does not depend on the rows sharing its item.
bool amx_all_classes(const AttnShape& sh) { return group_of(sh) >= kAttnAmxMinGroup; }
bool amx_item(const AttnShape& sh, AttnClass cls) { return cls == AttnClass::prefill || amx_all_classes(sh); }

}  // namespace

bool attention_amx_shape(const AttnShape& shape, Isa isa) { return use_amx(shape, isa); }
bool attention_amx_all_classes(const AttnShape& shape, Isa isa) {
  return use_amx(shape, isa) && amx_all_classes(shape);
}
bool attention_k_tiled(const AttnShape& shape, Isa isa) { return use_avx512(shape, isa); }

AttnClass classify_attention(int q_len) {
  if (q_len <= kAttnDecodeMaxRows) return AttnClass::decode;
  if (q_len <= kAttnMultiMaxRows) return AttnClass::multi;
  return AttnClass::prefill;
}

AttentionPlan plan_attention(const AttnShape& shape, const AttnSeq* seqs, int n_seqs, int n_threads) {
  if (shape.n_heads <= 0 || shape.n_kv_heads <= 0 || shape.n_heads % shape.n_kv_heads != 0 ||
      group_of(shape) > kAttnMaxVectors || shape.head_dim <= 0 || shape.head_dim > kAttnMaxHeadDim ||
      shape.block_size <= 0 || shape.block_size > kAttnMaxBlockSize || n_threads <= 0) {
    throw std::invalid_argument("plan_attention: unsupported shape");
  }
  AttentionPlan plan;
  plan.shape = shape;
  plan.n_threads = n_threads;
  const int group = group_of(shape);
  const int tile_rows = rows_per_tile(shape);
  const int bs = shape.block_size;

  // Base items: (sequence, row tile, KV head) over the tile's visible KV range.
  struct Base {
    int seq, row0, row1, lo, hi;
    AttnClass cls;
  };
  std::vector<Base> bases;
  for (int s = 0; s < n_seqs; ++s) {
    const AttnSeq& sq = seqs[s];
    if (sq.q_len <= 0) continue;
    if (sq.kv_len < sq.q_len) throw std::invalid_argument("plan_attention: kv_len < q_len");
    const AttnClass cls = classify_attention(sq.q_len);
    if (cls == AttnClass::decode) ++plan.n_decode;
    if (cls == AttnClass::multi) ++plan.n_multi;
    if (cls == AttnClass::prefill) ++plan.n_prefill;
    const int pos0 = sq.kv_len - sq.q_len;
    for (int r0 = 0; r0 < sq.q_len; r0 += tile_rows) {
      const int r1 = std::min(sq.q_len, r0 + tile_rows);
      const int lo = shape.window > 0 ? std::max(0, pos0 + r0 - shape.window + 1) : 0;
      bases.push_back({s, r0, r1, lo, pos0 + r1, cls});
    }
  }
  const int base_items = static_cast<int>(bases.size()) * shape.n_kv_heads;

  std::vector<double> cost;
  size_t partials = 0;  // floats of split partials so far
  for (const Base& b : bases) {
    const int vectors = (b.row1 - b.row0) * group;
    const int blk_lo = b.lo / bs, blk_hi = (b.hi - 1) / bs;  // inclusive
    const int n_blocks = blk_hi - blk_lo + 1;
    int splits = 1;
    if (b.cls != AttnClass::prefill) {
      splits = ceil_div(b.hi - b.lo, kAttnSplitTokens);
      if (base_items < n_threads) splits = std::max(splits, ceil_div(n_threads, base_items));
      splits = std::max(1, std::min(splits, n_blocks));
    }
    const size_t pstride = partial_floats(vectors, shape.head_dim);
    for (int h = 0; h < shape.n_kv_heads; ++h) {
      if (splits > 1) {
        plan.merges.push_back({b.seq, h, b.row0, b.row1, static_cast<int64_t>(partials), splits, pstride});
      }
      for (int sp = 0; sp < splits; ++sp) {
        AttnWorkItem it;
        it.seq = b.seq;
        it.kv_head = h;
        it.row0 = b.row0;
        it.row1 = b.row1;
        const int c0 = blk_lo + static_cast<int>(static_cast<int64_t>(n_blocks) * sp / splits);
        const int c1 = blk_lo + static_cast<int>(static_cast<int64_t>(n_blocks) * (sp + 1) / splits);
        it.kv0 = std::max(b.lo, c0 * bs);
        it.kv1 = std::min(b.hi, c1 * bs);
        if (splits > 1) {
          it.partial = static_cast<int64_t>(partials);
          partials += pstride;
        }
        // Work estimate: vectors × tokens, prefill tiles see about half their diagonal block.
        const double tokens = (it.kv1 - it.kv0) - (b.cls == AttnClass::prefill ? 0.5 * (b.row1 - b.row0) : 0.0);
        cost.push_back(static_cast<double>(vectors) * (tokens + 16.0));
        plan.items.push_back(it);
      }
    }
  }

  // Longest first onto the least loaded thread.
  std::vector<int>& by_cost = plan.by_cost;
  by_cost.resize(plan.items.size());
  std::iota(by_cost.begin(), by_cost.end(), 0);
  std::stable_sort(by_cost.begin(), by_cost.end(), [&](int a, int b) { return cost[a] > cost[b]; });
  std::vector<double> load(static_cast<size_t>(n_threads), 0.0);
  std::vector<std::vector<int>> per_thread(static_cast<size_t>(n_threads));
  for (int i : by_cost) {
    const auto t = static_cast<size_t>(std::min_element(load.begin(), load.end()) - load.begin());
    load[t] += cost[static_cast<size_t>(i)];
    per_thread[t].push_back(i);
  }
  plan.thread_begin.push_back(0);
  for (const auto& v : per_thread) {
    plan.order.insert(plan.order.end(), v.begin(), v.end());
    plan.thread_begin.push_back(static_cast<int>(plan.order.size()));
  }

  plan.scratch_floats = scratch_layout(shape).total;
  plan.workspace_floats = plan.scratch_floats * static_cast<size_t>(n_threads) + partials;
  return plan;
}

namespace {

// KV blocks of an item prefetched ahead: by the AVX-512, AVX2 and AMX blocks into L1, spread over
// their work (AVX-512: 1.09-1.24x on decode against L2 with the softmax change beside it,
// 2026-11-27-epyc-zen5-2c-avx512-decode-attention; AVX2: see prefetch_stream), by
// prefetch_block into L2 for the scalar block.
constexpr int kPrefetchBlocks = 2;

// Prefetches the first n elements of K and V of one KV head of a block into L2 (locality 2: prefetcht1).
void prefetch_block(const AttentionArgs& a, int32_t block, int kv_head, size_t n) {
  const char* k = reinterpret_cast<const char*>(
      a.kv.pool + kv_block_offset(block, a.kv.block_stride, a.kv.k_offset, kv_head, a.kv.head_stride, 0, 0));
  const char* v = reinterpret_cast<const char*>(
      a.kv.pool + kv_block_offset(block, a.kv.block_stride, a.kv.v_offset, kv_head, a.kv.head_stride, 0, 0));
  for (size_t i = 0; i < n * sizeof(bf16_t); i += 64) {
    __builtin_prefetch(k + i, 0, 2);
    __builtin_prefetch(v + i, 0, 2);
  }
}

// An AMX prefill item's KV blocks in spans of n blocks from its first, each span one call of the AMX block; set_ranges(base, t0, t1) fills the vectors' ranges.
template <typename SetRanges>
void run_item_spans(const AttentionArgs& a, const AttnWorkItem& it, int bs, int n, detail::AttnBlock& blk,
                    const detail::AmxScratch& aw, detail::AmxTiles& tiles, const SetRanges& set_ranges) {
  const AttnSeq& sq = a.seqs[it.seq];
  const bf16_t* k_span[detail::kAttnAmxSpanMaxBlocks] = {};
  const bf16_t* v_span[detail::kAttnAmxSpanMaxBlocks] = {};
  blk.span_block = bs;
  blk.k_span = k_span;
  blk.v_span = v_span;
  blk.lds = bs * n;
  blk.pf_lines = 0;
  const int b_lo = it.kv0 / bs, b_hi = (it.kv1 + bs - 1) / bs;  // the item's blocks
  for (int first = b_lo; first < b_hi; first += n) {
    const int base = first * bs;
    for (int j = 0; j < n; ++j) {
      const int b = first + j;
      const bool in = b >= b_lo && b < b_hi;
      k_span[j] = in ? a.kv.pool + kv_block_offset(sq.block_table[b], a.kv.block_stride, a.kv.k_offset, it.kv_head,
                                                   a.kv.head_stride, 0, 0)
                     : nullptr;
      v_span[j] = in ? a.kv.pool + kv_block_offset(sq.block_table[b], a.kv.block_stride, a.kv.v_offset, it.kv_head,
                                                   a.kv.head_stride, 0, 0)
                     : nullptr;
    }
    const int t0 = std::max(it.kv0, base) - base;
    const int t1 = std::min(it.kv1, base + n * bs) - base;
    set_ranges(base, t0, t1);
    blk.nt = t1;
    detail::attn_block_amx(blk, aw, tiles);
  }
  blk.span_block = 0;
  blk.k_span = blk.v_span = nullptr;
}

// tiles: the thread's AMX state where prefill items run on the tiles, else null.
void run_item(const AttentionArgs& a, const AttentionPlan& plan, const AttnWorkItem& it, float* scratch,
              const ScratchLayout& lay, bool avx, bool avx2, detail::AmxTiles* tiles) {
  const AttnShape& sh = plan.shape;
  const int group = group_of(sh);
  const int hd = sh.head_dim;
  const int bs = sh.block_size;
  const auto uhd = static_cast<size_t>(hd);
  const AttnSeq& sq = a.seqs[it.seq];
  const int pos0 = sq.kv_len - sq.q_len;
  const int vectors = (it.row1 - it.row0) * group;

  float* qs = scratch + lay.q;
  float* o = scratch + lay.o;
  float* mx = scratch + lay.mx;
  float* l = scratch + lay.l;
  for (int r = 0; r < it.row1 - it.row0; ++r) {
    const float* src =
        a.q + static_cast<size_t>(sq.q_start + it.row0 + r) * a.ldq + static_cast<size_t>(it.kv_head) * group * uhd;
    float* dst = qs + static_cast<size_t>(r) * group * uhd;
    for (size_t d = 0; d < static_cast<size_t>(group) * uhd; ++d) dst[d] = src[d] * a.scale;
  }
  const bool lanes = a.vectors_in_lanes && use_avx2_lanes(sh, a.isa);
  const size_t lane_width = static_cast<size_t>(detail::lanes_width_avx2(vectors));
  detail::LanesScratch lw;
  const bool amx = tiles && avx && amx_item(sh, classify_attention(sq.q_len));
  const int span_blocks =
      amx && classify_attention(sq.q_len) == AttnClass::prefill && !amx_all_classes(sh) ? amx_span_blocks(sh) : 1;
  // The hi/lo Q of vdpbf16ps and the AMX tiles; the FP32-products block reads qs itself.
  if (avx && (amx || !a.fp32_products)) detail::stage_q_hilo_avx512(scratch + lay.qhl, qs, vectors, hd);
  if (lanes) {
    detail::stage_qt_avx2(scratch + lay.qt, qs, vectors, hd);
    lw.width = static_cast<int>(lane_width);
    lw.qt = scratch + lay.qt;
    lw.s = scratch + lay.s;
    lw.ot = scratch + lay.ot;
    lw.k = scratch + lay.k;
    lw.v = scratch + lay.v;
    std::fill(lw.ot, lw.ot + lane_width * uhd, 0.0f);
  }
  const size_t tile_vectors = amx ? round16(static_cast<size_t>(vectors)) : static_cast<size_t>(vectors);
  detail::AmxScratch aw;
  if (amx) {  // the rows past the item's vectors in its last tiles: zero, never NaN
    const size_t qf = detail::q_hilo_floats(hd);
    std::fill(scratch + lay.qhl + static_cast<size_t>(vectors) * qf, scratch + lay.qhl + tile_vectors * qf, 0.0f);
    aw.ldp = detail::amx_attention_ldp(bs * span_blocks);
    aw.p = reinterpret_cast<bf16_t*>(scratch + lay.p);
    aw.p_lo = aw.p + tile_vectors * static_cast<size_t>(aw.ldp);
    aw.vt = reinterpret_cast<bf16_t*>(scratch + lay.vt);
    std::fill(aw.p, aw.p + 2 * tile_vectors * static_cast<size_t>(aw.ldp), bf16_t{0});
  }
  std::fill(o, o + tile_vectors * uhd, 0.0f);
  std::fill(mx, mx + lane_width, kNegInf);
  std::fill(l, l + lane_width, 0.0f);

  int lo[kAttnMaxVectors], hi[kAttnMaxVectors];
  detail::AttnBlock blk;
  blk.q = qs;
  blk.k = scratch + lay.k;
  blk.qhl = scratch + lay.qhl;
  blk.kt = scratch + lay.k;
  blk.v = scratch + lay.v;
  blk.s = scratch + lay.s;
  blk.lds = static_cast<int>(round16(static_cast<size_t>(bs)));
  blk.o = o;
  blk.mx = mx;
  blk.l = l;
  blk.lo = lo;
  blk.hi = hi;
  blk.m = vectors;
  blk.hd = hd;
  blk.round_p_to_bf16 = a.round_p_to_bf16;
  blk.fp32_products = a.fp32_products;
  blk.k_tiled = a.kv.k_tiled;

  // Each vector's visible tokens among [t0, t1) of the run of KV tokens starting at `base`.
  const auto set_ranges = [&](int base, int t0, int t1) {
    for (int r = 0; r < it.row1 - it.row0; ++r) {
      const int p = pos0 + it.row0 + r;
      const int vis_lo = sh.window > 0 ? p - sh.window + 1 : 0;
      const int rlo = std::max(t0, vis_lo - base);
      const int rhi = std::min(t1, p + 1 - base);
      for (int g = 0; g < group; ++g) {
        lo[r * group + g] = rlo;
        hi[r * group + g] = rhi;
      }
    }
  };
  if (span_blocks > 1) {
    run_item_spans(a, it, bs, span_blocks, blk, aw, *tiles, set_ranges);
  }
  for (int b = it.kv0 / bs; span_blocks == 1 && b * bs < it.kv1; ++b) {
    const int base = b * bs;
    const int t0 = std::max(it.kv0, base) - base;
    const int t1 = std::min(it.kv1, base + bs) - base;
    const int32_t block = sq.block_table[b];
    const bf16_t* kb =
        a.kv.pool + kv_block_offset(block, a.kv.block_stride, a.kv.k_offset, it.kv_head, a.kv.head_stride, 0, 0);
    const bf16_t* vb =
        a.kv.pool + kv_block_offset(block, a.kv.block_stride, a.kv.v_offset, it.kv_head, a.kv.head_stride, 0, 0);
    int pf_next = 0;
    blk.pf_lines = 0;
    blk.pf_next = &pf_next;
    if (b == it.kv0 / bs) {  // the first blocks at once
      for (int nb = b + 1; nb < b + kPrefetchBlocks && nb * bs < it.kv1; ++nb) {
        prefetch_block(a, sq.block_table[nb], it.kv_head, static_cast<size_t>(std::min(bs, it.kv1 - nb * bs)) * uhd);
      }
    }
    if (const int nb = b + kPrefetchBlocks; nb * bs < it.kv1) {
      // Later blocks are random pages: their DRAM reads go out while this block computes.
      blk.pf_k =
          reinterpret_cast<const char*>(a.kv.pool + kv_block_offset(sq.block_table[nb], a.kv.block_stride,
                                                                    a.kv.k_offset, it.kv_head, a.kv.head_stride, 0, 0));
      blk.pf_v =
          reinterpret_cast<const char*>(a.kv.pool + kv_block_offset(sq.block_table[nb], a.kv.block_stride,
                                                                    a.kv.v_offset, it.kv_head, a.kv.head_stride, 0, 0));
      blk.pf_lines =
          static_cast<int>((static_cast<size_t>(std::min(bs, it.kv1 - nb * bs)) * uhd * sizeof(bf16_t) + 63) / 64);
      if (!avx && !avx2) prefetch_block(a, sq.block_table[nb], it.kv_head, static_cast<size_t>(bs) * uhd);
    }
    if (avx || avx2) {
      blk.kraw = kb;  // read as BF16 by vdpbf16ps, or widened by the AVX2 blocks as they go
      blk.vraw = vb;
      if (avx2 && !lanes) {
        blk.k_widen = scratch + lay.k;
        blk.v_widen = scratch + lay.v;
      }
    } else {
      const size_t off = static_cast<size_t>(t0) * uhd, n = static_cast<size_t>(t1 - t0) * uhd;
      convert_bf16_to_f32(scratch + lay.k + off, kb + off, n);
      convert_bf16_to_f32(scratch + lay.v + off, vb + off, n);
    }
    set_ranges(base, t0, t1);
    blk.nt = t1;
    if (amx) {
      detail::attn_block_amx(blk, aw, *tiles);
    } else if (avx) {
      detail::attn_block_avx512(blk);
    } else if (lanes) {
      detail::attn_block_lanes_avx2(blk, lw);
    } else if (avx2) {
      detail::attn_block_avx2(blk);
    } else {
      detail::attn_block_scalar(blk);
    }
  }

  if (lanes) {  // O^T back to a row per vector
    for (size_t v = 0; v < static_cast<size_t>(vectors); ++v) {
      for (size_t d = 0; d < uhd; ++d) o[v * uhd + d] = lw.ot[d * lane_width + v];
    }
  }
  if (it.partial < 0) {
    for (int r = 0; r < it.row1 - it.row0; ++r) {
      float* dst =
          a.out + static_cast<size_t>(sq.q_start + it.row0 + r) * a.ldo + static_cast<size_t>(it.kv_head) * group * uhd;
      for (int g = 0; g < group; ++g) {
        const int v = r * group + g;
        const float inv = l[v] > 0.0f ? 1.0f / l[v] : 0.0f;
        const float* src = o + static_cast<size_t>(v) * uhd;
        for (size_t d = 0; d < uhd; ++d) dst[static_cast<size_t>(g) * uhd + d] = src[d] * inv;
      }
    }
  } else {
    float* p = a.workspace + it.partial + plan.scratch_floats * static_cast<size_t>(plan.n_threads);
    const size_t ov = static_cast<size_t>(vectors) * uhd;
    std::memcpy(p, o, ov * sizeof(float));
    std::memcpy(p + ov, mx, static_cast<size_t>(vectors) * sizeof(float));
    std::memcpy(p + ov + vectors, l, static_cast<size_t>(vectors) * sizeof(float));
  }
}

}  // namespace

void attention_run(const AttentionArgs& args, const AttentionPlan& plan, int thread, int n_threads) {
  if (n_threads != plan.n_threads) throw std::invalid_argument("attention_run: thread count");
  if (args.kv.k_tiled && !use_avx512(plan.shape, args.isa)) {
    throw std::invalid_argument("attention_run: a tiled K needs a shape the AVX-512 block takes (attention_k_tiled)");
  }
  const ScratchLayout lay = scratch_layout(plan.shape);
  float* scratch = args.workspace + plan.scratch_floats * static_cast<size_t>(thread);
  const bool avx = use_avx512(plan.shape, args.isa);
  const bool avx2 = use_avx2(plan.shape, args.isa);
  std::optional<AmxEmulator> emulator;
  detail::AmxTiles amx_tiles;
  const bool amx = (args.amx || args.amx_emulated) && use_amx(plan.shape, args.isa) &&
                   (plan.n_prefill > 0 || amx_all_classes(plan.shape));
  if (args.amx_emulated) amx_tiles.emulator = &emulator.emplace();
  detail::AmxTiles* tiles = amx ? &amx_tiles : nullptr;
  if (args.item_cursor) {
    // Costliest first; thread t's first item is the t-th (detail::RunCounter).
    detail::for_each_share(args.item_cursor, thread, n_threads, static_cast<int>(plan.by_cost.size()), 1,
                           [&](int i, int) {
                             run_item(args, plan, plan.items[static_cast<size_t>(plan.by_cost[static_cast<size_t>(i)])],
                                      scratch, lay, avx, avx2, tiles);
                           });
  } else {
    const int b = plan.thread_begin[static_cast<size_t>(thread)];
    const int e = plan.thread_begin[static_cast<size_t>(thread) + 1];
    for (int i = b; i < e; ++i) {
      run_item(args, plan, plan.items[static_cast<size_t>(plan.order[static_cast<size_t>(i)])], scratch, lay, avx, avx2,
               tiles);
    }
  }
  detail::amx_release(amx_tiles);
}

void attention_merge(const AttentionArgs& args, const AttentionPlan& plan, int thread, int n_threads) {
  const AttnShape& sh = plan.shape;
  const int group = group_of(sh);
  const auto uhd = static_cast<size_t>(sh.head_dim);
  const float* partials = args.workspace + plan.scratch_floats * static_cast<size_t>(plan.n_threads);
  for (size_t i = static_cast<size_t>(thread); i < plan.merges.size(); i += static_cast<size_t>(n_threads)) {
    const AttnMergeItem& mi = plan.merges[i];
    const AttnSeq& sq = args.seqs[mi.seq];
    const int vectors = (mi.row1 - mi.row0) * group;
    const size_t ov = static_cast<size_t>(vectors) * uhd;
    for (int v = 0; v < vectors; ++v) {
      float gmax = kNegInf;
      for (int s = 0; s < mi.n_splits; ++s) {
        const float* p = partials + mi.first_partial + static_cast<size_t>(s) * mi.partial_stride;
        gmax = std::max(gmax, p[ov + static_cast<size_t>(v)]);
      }
      const int r = v / group, g = v % group;
      float* dst = args.out + static_cast<size_t>(sq.q_start + mi.row0 + r) * args.ldo +
                   (static_cast<size_t>(mi.kv_head) * group + static_cast<size_t>(g)) * uhd;
      std::fill(dst, dst + uhd, 0.0f);
      if (gmax == kNegInf) continue;
      float total = 0.0f;
      for (int s = 0; s < mi.n_splits; ++s) {
        const float* p = partials + mi.first_partial + static_cast<size_t>(s) * mi.partial_stride;
        const float m = p[ov + static_cast<size_t>(v)];
        if (m == kNegInf) continue;
        const float w = std::exp(m - gmax);
        total += w * p[ov + static_cast<size_t>(vectors + v)];
        const float* o = p + static_cast<size_t>(v) * uhd;
        for (size_t d = 0; d < uhd; ++d) dst[d] += w * o[d];
      }
      const float inv = total > 0.0f ? 1.0f / total : 0.0f;
      for (size_t d = 0; d < uhd; ++d) dst[d] *= inv;
    }
  }
}

namespace detail {

void attn_block_scalar(const AttnBlock& b) {
  const auto hd = static_cast<size_t>(b.hd);
  for (int i = 0; i < b.m; ++i) {
    const int lo = b.lo[i], hi = b.hi[i];
    if (lo >= hi) continue;
    const float* q = b.q + static_cast<size_t>(i) * hd;
    float* s = b.s + static_cast<size_t>(i) * static_cast<size_t>(b.lds);
    float local = kNegInf;
    for (int t = lo; t < hi; ++t) {
      const float* k = b.k + static_cast<size_t>(t) * hd;
      float dot = 0.0f;
      for (size_t d = 0; d < hd; ++d) dot += q[d] * k[d];
      s[t] = dot;
      local = std::max(local, dot);
    }
    const float mnew = std::max(b.mx[i], local);
    const float alpha = std::exp(b.mx[i] - mnew);  // 0 when nothing was seen yet
    float sum = 0.0f;
    for (int t = lo; t < hi; ++t) {
      s[t] = std::exp(s[t] - mnew);
      sum += s[t];
    }
    b.l[i] = b.l[i] * alpha + sum;
    b.mx[i] = mnew;
    float* o = b.o + static_cast<size_t>(i) * hd;
    for (size_t d = 0; d < hd; ++d) o[d] *= alpha;
    for (int t = lo; t < hi; ++t) {
      const float p = s[t];
      const float* v = b.v + static_cast<size_t>(t) * hd;
      for (size_t d = 0; d < hd; ++d) o[d] += p * v[d];
    }
  }
}

}  // namespace detail

}  // namespace slab::kern
