// BF16 linear: packing, the work split over threads, K blocking, split-K reduction, and the
// scalar tile (the portable path). The AVX-512 tile is in linear_bf16_avx512.cpp.
#include "kernels/linear_bf16.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/linear_bf16_tile.h"
#include "kernels/rowwise_bf16.h"
#include "kernels/work_split.h"

namespace slab::kern {
namespace {

using detail::Tile;

constexpr int kDecodeMaxM = 8;       // up to here every row rides along one pass over W
constexpr int kDecodeWideM = 4;      // up to here the decode tile is 64 columns wide
constexpr int kLargeMR = 6;          // large-M register tile: 6 rows x 64 columns
constexpr int kMinKBlockPairs = 32;  // smallest K block (LinearBlocking::k_block_pairs)
constexpr int kMaxKBlockPairs = 4096;
constexpr int kMinSplitPairs = 32;  // split-K chunks are at least this many pairs

constexpr int kMidMaxM = 32;  // up to here 8-row tiles (no ragged 6-row tail): M = 17..32 1.15-1.28x on Zen 5
// Every M past the decode path: at 9-15 rows the tiles ran 1.2-2.6x the AVX-512 large-M tiles
// (70-79 % of the read bandwidth against 40-55 %; bench/results/2026-11-30-xeon-2c-amx-rows).
constexpr int kAmxMinM = kDecodeMaxM + 1;
constexpr int kAmxRows = 32;         // a row tile of the AMX path: two 16-row A tiles
constexpr int kAmxK = 32;            // K step of one tdpbf16ps (16 k-pairs)
constexpr int kLargeSplitMinM = 64;  // AVX-512/AVX2/scalar tiles: rows split for balance from here
constexpr int kDecodeRunPanels = 8;  // dynamic decode share: at most 8 panels (1 MB of weights at K = 2048)

using detail::chunk;
using detail::decode_run;
using detail::for_each_share;
using detail::Range;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

// Panels of the packed weights: a SwiGLU matrix pads gate and up to 32 columns each.
int weight_panels(int n, bool swiglu) { return swiglu ? 2 * packed_panels(n / 2) : packed_panels(n); }
int weight_panels(const LinearArgs& a) { return weight_panels(a.w.n, a.swiglu); }

// Split-K factor for decode shapes with fewer panels than threads (1: no split). SwiGLU never
// splits: its activation needs the whole sums.
int decode_splits(int m, int n, int k, int n_threads, bool swiglu) {
  const int panels = packed_panels(n);
  if (swiglu || m > kDecodeMaxM || panels >= n_threads) return 1;
  const int by_threads = n_threads / panels;
  const int by_k = std::max(1, packed_pairs(k) / kMinSplitPairs);
  return std::max(1, std::min(by_threads, by_k));
}

void run_tile(const Tile& t, Isa isa) {
  switch (isa) {
    case Isa::avx512_bf16: detail::tile_avx512_bf16(t); return;
    case Isa::avx2: detail::tile_avx2(t); return;
    case Isa::scalar: break;
  }
  detail::tile_scalar(t);
}

// Fills the epilogue fields of a tile at (row, col).
void set_epilogue(Tile& t, const LinearArgs& a, int row, int col) {
  t.epilogue = true;
  t.n_valid = std::min(a.w.n - col, t.np * kPanelCols);
  t.ldo = a.ldo;
  t.out_f32 = a.out_f32 ? a.out_f32 + static_cast<size_t>(row) * a.ldo + col : nullptr;
  t.out_bf16 = a.out_bf16 ? a.out_bf16 + static_cast<size_t>(row) * a.ldo + col : nullptr;
  t.bias = a.bias ? a.bias + col : nullptr;
  t.residual = a.residual ? a.residual + static_cast<size_t>(row) * a.ldr + col : nullptr;
  t.ldr = a.ldr;
}

size_t panel_stride(int k) { return static_cast<size_t>(packed_pairs(k)) * 2 * kPanelCols; }

// SwiGLU epilogue of `rows` rows of one panel pair from their FP32 sums c [rows][ldc] (gate in
// columns 0..31, up in 32..63): out = act(gate)·up as BF16, act SiLU or GeLU-tanh (a.gated_act).
void finish_swiglu(const LinearArgs& a, const float* c, size_t ldc, int row, int rows, int pair) {
  const int col = pair * kPanelCols;
  const int n_valid = std::min(kPanelCols, a.w.n / 2 - col);
  for (int r = 0; r < rows; ++r) {
    const float* sums = c + static_cast<size_t>(r) * ldc;
    bf16_t* out = a.out_bf16 + static_cast<size_t>(row + r) * a.ldo + col;
    if (a.gated_act == GatedAct::gelu_tanh) {
      gelu_tanh_mul_to_bf16(out, sums, sums + kPanelCols, n_valid, a.isa);
    } else {
      silu_mul_to_bf16(out, sums, sums + kPanelCols, n_valid, a.isa);
    }
  }
}

// M <= 8, one panel per tile (M > kDecodeWideM): the tile streams its panel with software
// prefetches blocking.decode_prefetch_bytes ahead, both lines of each k-pair (AVX-512 only).
void set_decode_prefetch(Tile& t, const LinearArgs& a) {
  if (a.isa != Isa::avx512_bf16 || a.m <= kDecodeWideM || a.blocking.decode_prefetch_bytes == 0) return;
  t.pf = t.b + a.blocking.decode_prefetch_bytes / sizeof(bf16_t);
  t.pf_lines = 2 * (t.n_pairs + (t.half_pair ? 1 : 0));
  t.pf_per_pair = 2;
}

// M <= 8: panels a decode tile covers. Up to kDecodeWideM rows one tile is 64 columns wide;
// beyond, 32. The AVX2 tile reads 1 or 2 rows' panels as concurrent streams and takes 4
// (kernels/linear_bf16_avx2.cpp, decode_streams: one or two streams left a Zen 2 core well short
// of its read bandwidth).
int decode_tile_panels(const LinearArgs& a) {
  if (a.isa == Isa::avx2 && a.m <= 2) return 4;
  return a.m <= kDecodeWideM ? 2 : 1;
}

// M <= 8, SwiGLU: panel pairs [q0, q1) over the whole of K, sums to a stack scratch, then the
// activation: one 32-column tile per panel, one 64-column tile per pair, or (decode_tile_panels
// 4) one tile of two pairs.
void decode_swiglu_pairs(const LinearArgs& a, int q0, int q1) {
  alignas(64) float sums[kDecodeMaxM * 2 * kPanelCols];
  const size_t stride = panel_stride(a.w.k);
  const int np = decode_tile_panels(a);
  for (int q = q0; q < q1;) {
    const int pairs = np == 4 ? std::min(2, q1 - q) : 1;
    const int span = 2 * pairs;  // panels
    const size_t ldc = static_cast<size_t>(span) * kPanelCols;
    for (int part = 0; part < span; part += np) {
      Tile t;
      t.a = a.x;
      t.lda = a.ldx;
      t.b = a.w.data + static_cast<size_t>(2 * q + part) * stride;
      t.panel_stride = stride;
      t.mr = a.m;
      t.np = std::min(np, span - part);
      t.n_pairs = a.w.k / 2;
      t.half_pair = (a.w.k & 1) != 0;
      t.c = sums + part * kPanelCols;
      t.ldc = ldc;
      set_decode_prefetch(t, a);
      run_tile(t, a.isa);
    }
    for (int i = 0; i < pairs; ++i) finish_swiglu(a, sums + 2 * i * kPanelCols, ldc, 0, a.m, q + i);
    q += pairs;
  }
}

// M <= 8: this thread's panel ranges, runs of up to `run` units (decode_run) from the cursor.
template <typename Fn>
void for_each_decode_share(const LinearArgs& a, int thread, int n_threads, int units, int run, Fn&& fn) {
  for_each_share(a.work_cursor, thread, n_threads, units, decode_run(units, n_threads, run), fn);
}

// M <= 8: panels [p0, p1) over the whole of K, all rows at once.
void decode_panels(const LinearArgs& a, int p0, int p1) {
  const int np_max = decode_tile_panels(a);
  const size_t stride = panel_stride(a.w.k);
  for (int p = p0; p < p1;) {
    Tile t;
    t.a = a.x;
    t.lda = a.ldx;
    t.b = a.w.data + static_cast<size_t>(p) * stride;
    t.panel_stride = stride;
    t.mr = a.m;
    t.np = std::min(np_max, p1 - p);
    t.n_pairs = a.w.k / 2;
    t.half_pair = (a.w.k & 1) != 0;
    set_epilogue(t, a, 0, p * kPanelCols);
    set_decode_prefetch(t, a);
    run_tile(t, a.isa);
    p += t.np;
  }
}

// M <= 8 with split K: unit -> (panel, K chunk), partial sums to the workspace.
void decode_split_unit(const LinearArgs& a, int unit, int splits) {
  const int panel = unit / splits, s = unit % splits;
  const int pairs = packed_pairs(a.w.k);
  const Range r = chunk(pairs, splits, s);
  const bool has_half = (a.w.k & 1) != 0 && r.hi == pairs && r.hi > r.lo;
  Tile t;
  t.a = a.x + 2 * static_cast<size_t>(r.lo);
  t.lda = a.ldx;
  t.b = a.w.data + static_cast<size_t>(panel) * panel_stride(a.w.k) + static_cast<size_t>(r.lo) * 2 * kPanelCols;
  t.panel_stride = panel_stride(a.w.k);
  t.mr = a.m;
  t.np = 1;
  t.n_pairs = r.hi - r.lo - (has_half ? 1 : 0);
  t.half_pair = has_half;
  t.c = a.workspace + static_cast<size_t>(unit) * a.m * kPanelCols;
  t.ldc = kPanelCols;
  run_tile(t, a.isa);
}

// M > 8: the K block's weights go to FP32 once for all row tiles (the first row tile writes them
// as it computes) and the tiles multiply with FMAs: AVX2 has no BF16 dot product, and on the
// Xeons the AVX-512 FMA runs 2x vdpbf16ps's flops (LinearBlocking::fp32_products).
bool fp32_blocks(const LinearArgs& a) {
  return a.isa == Isa::avx2 || (a.isa == Isa::avx512_bf16 && a.blocking.fp32_products);
}

// M > 8: register tile of the large path.
struct LargeTile {
  int mr, np;
};
LargeTile large_tile(int m, bool swiglu, Isa isa, const LinearBlocking& b) {
  // The FP32 blocks run 6 x 64 tiles (AVX2: strips of 6 x 16 over them): an 8-row tile would
  // leave a 2-row block.
  if (isa == Isa::avx2 || (isa == Isa::avx512_bf16 && b.fp32_products)) return LargeTile{kLargeMR, 2};
  if (m <= kMidMaxM && !swiglu) return LargeTile{8, 1};
  // SwiGLU takes a gate/up pair per row tile. Up to 16 rows that is 8 rows run as one 8 × 32 tile
  // per panel (split_panels): with 6 × 64, 16 rows were three row tiles, each reading the pair.
  if (swiglu && m <= kMidMaxM && b.tile_panels == 2 && b.tile_rows == kLargeMR) return LargeTile{8, 2};
  if (swiglu) return LargeTile{b.tile_panels == 2 ? b.tile_rows : kLargeMR, 2};
  return LargeTile{b.tile_rows, b.tile_panels};
}

// M > 8: column group g (panels [g·np, g·np + np)) for row tiles [rt0, rt1), K blocked. The
// last block prefetches the first block of group next_group() (-1: none), which it asks for
// only then.
template <typename NextGroup>
void large_group(const LinearArgs& a, LargeTile lt, int g, int rt0, int rt1, float* scratch, NextGroup&& next_group) {
  const int panels = weight_panels(a);
  const int p = g * lt.np;
  const int np = std::min(lt.np, panels - p);
  const size_t stride = panel_stride(a.w.k);
  const int pairs = packed_pairs(a.w.k);
  const bool odd_k = (a.w.k & 1) != 0;
  const bf16_t* panel0 = a.w.data + static_cast<size_t>(p) * stride;
  const int block =
      fp32_blocks(a) ? std::min(a.blocking.k_block_pairs, detail::kFp32MaxBlockPairs) : a.blocking.k_block_pairs;
  for (int kb = 0; kb < pairs; kb += block) {
    const int kb_end = std::min(pairs, kb + block);
    const bool first = kb == 0, last = kb_end == pairs;
    const int following = last ? next_group() : -1;
    float* wf = fp32_blocks(a) ? detail::fp32_block_buffer(np, kb_end - kb) : nullptr;
    for (int rt = rt0; rt < rt1; ++rt) {
      const int row = rt * lt.mr;
      Tile t;
      t.a = a.x + static_cast<size_t>(row) * a.ldx + 2 * static_cast<size_t>(kb);
      t.lda = a.ldx;
      t.b = panel0 + static_cast<size_t>(kb) * 2 * kPanelCols;
      t.panel_stride = stride;
      t.mr = std::min(lt.mr, a.m - row);
      t.np = np;
      t.half_pair = last && odd_k;
      t.n_pairs = kb_end - kb - (t.half_pair ? 1 : 0);
      // The row tiles prefetch the next K block into L2, spread evenly over them, so its DRAM
      // reads overlap this block's compute. Measured on the shared 2-core Zen 5 (CPU-time
      // ratios): M = 16 from ~45 % to ~90 % of read bandwidth; with the 512-element K block and
      // L2 (not L1) as the target, M = 128 went from 73-88 % to 85-94 % of the BF16 peak.
      {
        // The next block: further down these panels, or the first block of this thread's next
        // group.
        const bool more = kb_end < pairs;
        const bf16_t* next = more ? panel0 + static_cast<size_t>(kb_end) * 2 * kPanelCols
                                  : a.w.data + static_cast<size_t>(std::max(following, 0)) * lt.np * stride;
        const int next_pairs = more ? std::min(pairs, kb_end + block) - kb_end : std::min(pairs, block);
        const int lines = 2 * next_pairs;  // per panel: a pair of a panel is 128 bytes
        const int tiles = rt1 - rt0;
        const int share = ceil_div(lines, tiles);
        const int from = std::min(lines, (rt - rt0) * share);
        t.pf = next + static_cast<size_t>(from) * kPanelCols;
        t.pf_lines = a.blocking.prefetch && (more || following >= 0) ? std::min(share, lines - from) : 0;
        t.pf_per_pair = t.n_pairs > 0 ? ceil_div(t.pf_lines, t.n_pairs) : 0;
      }
      t.c = scratch ? scratch + static_cast<size_t>(row) * 2 * kPanelCols : nullptr;
      t.ldc = 2 * kPanelCols;
      t.load_c = !first;
      t.wf = wf;
      t.wf_fill = rt == rt0 ? wf : nullptr;
      if (last && !a.swiglu) set_epilogue(t, a, row, p * kPanelCols);
      if (lt.mr > kLargeMR && t.np == 2) {
        // More rows than a 64-column tile holds (8 × 4 zmm is every register): one 32-column
        // tile per panel, the second with the second panel's share of the prefetch.
        Tile second = t;
        t.np = second.np = 1;
        second.b += stride;
        second.pf += stride;
        if (second.c) second.c += kPanelCols;
        second.wf = second.wf_fill = nullptr;  // the FP32 blocks never take 8-row tiles (large_tile)
        run_tile(t, a.isa);
        run_tile(second, a.isa);
      } else {
        run_tile(t, a.isa);
      }
      if (last && a.swiglu) finish_swiglu(a, t.c, t.ldc, row, t.mr, p / 2);
    }
  }
}

// Large-M work units: column groups, each cut into `row_parts` row ranges. Rows are split only
// when there are few column groups, since each row part reads the group's weights again: to ~4
// tasks per thread for static shares, ~8 when threads take tasks from the counter (finer tasks
// let the others absorb a slow thread's share), and for that balance only from split_min_m rows
// (below it the groups' weight stream outweighs an uneven last round; fewer groups than threads
// always split).
struct LargeSplit {
  LargeTile tile;
  int groups, row_tiles, row_parts;
  int tasks() const { return groups * row_parts; }
};
LargeSplit large_split(int m, int n, int n_threads, bool swiglu, LargeTile tile, bool dynamic, int split_min_m) {
  LargeSplit s;
  s.tile = tile;
  s.groups = ceil_div(weight_panels(n, swiglu), s.tile.np);
  s.row_tiles = ceil_div(m, s.tile.mr);
  s.row_parts = 1;
  const int want = (dynamic ? 8 : 4) * n_threads;
  if (s.groups < n_threads || (s.groups < want && m >= split_min_m)) {
    s.row_parts = std::min(s.row_tiles, ceil_div(want, s.groups));
  }
  return s;
}

bool use_amx(const LinearArgs& a) {
  return (a.amx || a.amx_emulated) && a.isa == Isa::avx512_bf16 && a.m >= kAmxMinM && a.w.k % kAmxK == 0;
}

// Panels in an AMX column group (LinearBlocking::amx_prefill_min_m says why): from
// amx_prefill_min_m rows two, so that a row tile's x (from L3 at 512 rows) serves two panel
// passes; below it one, so that there are groups enough for every thread without cutting rows.
// SwiGLU always takes its gate/up pair (the activation needs both sums).
int amx_group_panels(const LinearArgs& a) { return a.swiglu || a.m >= a.blocking.amx_prefill_min_m ? 2 : 1; }

// The end of an AMX row tile: from the FP32 sums c [rows][ldc] of panels [p, p + np), the AVX-512
// tile with no pairs (it loads c and finishes), or the SwiGLU activation (p = 2 · pair).
void amx_finish(const LinearArgs& a, const float* c, size_t ldc, int row, int rows, int p, int np) {
  if (a.swiglu) {
    finish_swiglu(a, c, ldc, row, rows, p / 2);
    return;
  }
  for (int r = 0; r < rows; r += kLargeMR) {
    Tile t;
    t.mr = std::min(kLargeMR, rows - r);
    t.np = np;
    t.n_pairs = 0;
    t.c = const_cast<float*>(c) + static_cast<size_t>(r) * ldc;  // read only: load_c without pairs
    t.ldc = ldc;
    t.load_c = true;
    set_epilogue(t, a, row + r, p * kPanelCols);
    run_tile(t, Isa::avx512_bf16);
  }
}

// AMX: column group g (panels [g·gp, g·gp + gp), gp = amx_group_panels(a)) for row tiles [rt0, rt1)
// of 32 rows, each panel over the whole of K into c, then the epilogue (the AVX-512 tile with no
// pairs: it loads c and finishes; or the SwiGLU activation on the pair's sums).
void amx_group(const LinearArgs& a, int g, int rt0, int rt1, detail::AmxTiles& tiles, const bf16_t* prefetch_end) {
  alignas(64) float c[kAmxRows * 2 * kPanelCols];
  constexpr size_t ldc = 2 * kPanelCols;
  const int gp = amx_group_panels(a);
  const int p = gp * g;
  const int np = std::min(gp, weight_panels(a) - p);
  const size_t stride = panel_stride(a.w.k);
  for (int rt = rt0; rt < rt1; ++rt) {
    const int row = rt * kAmxRows;
    const int rows = std::min(kAmxRows, a.m - row);
    const bf16_t* x = a.x + static_cast<size_t>(row) * a.ldx;
    // The first row tile streams the group's panels from memory; the others find them in L2.
    // Prefill rows (compute-bound) leave the stream to the hardware prefetcher.
    const bool streams = rt == rt0 && a.m < a.blocking.amx_prefill_min_m;
    const size_t prefetch = streams ? static_cast<size_t>(a.blocking.amx_prefetch_bytes) : 0;
    for (int q = 0; q < np; ++q) {
      detail::amx_panel_bf16(tiles, x, a.ldx, rows, a.w.data + static_cast<size_t>(p + q) * stride, a.w.k,
                             c + q * kPanelCols, ldc, prefetch, prefetch_end);
    }
    amx_finish(a, c, ldc, row, rows, p, np);
  }
}

// AMX with K blocked by a.blocking.amx_k_block: per block, each row tile's x is copied to a
// contiguous A buffer, then both panels pass over it with their weight block in L1 and the C
// tiles carried in acc ([rows][64] FP32, the thread's workspace) from block to block.
void amx_group_blocked(const LinearArgs& a, int g, int rt0, int rt1, detail::AmxTiles& tiles, float* acc) {
  constexpr int kMaxBlock = 1024;
  alignas(64) bf16_t xa[kAmxRows * kMaxBlock];
  constexpr size_t ldc = 2 * kPanelCols;
  const int gp = amx_group_panels(a);
  const int p = gp * g;
  const int np = std::min(gp, weight_panels(a) - p);
  const size_t stride = panel_stride(a.w.k);
  const int block = std::min(a.blocking.amx_k_block, kMaxBlock);
  for (int k0 = 0; k0 < a.w.k; k0 += block) {
    const int kb = std::min(block, a.w.k - k0);
    const bool first = k0 == 0, last = k0 + kb == a.w.k;
    for (int rt = rt0; rt < rt1; ++rt) {
      const int row = rt * kAmxRows;
      const int rows = std::min(kAmxRows, a.m - row);
      detail::amx_pack_x(xa, a.x + static_cast<size_t>(row) * a.ldx + k0, a.ldx, rows, kb);
      float* c = acc + static_cast<size_t>(row) * ldc;
      for (int q = 0; q < np; ++q) {
        // Pair k0/2 of the panel: (k0/2)·64 elements in.
        const bf16_t* panel = a.w.data + static_cast<size_t>(p + q) * stride + static_cast<size_t>(k0) * kPanelCols;
        detail::amx_packed_block_bf16(tiles, xa, rows, panel, kb, c + q * kPanelCols, ldc, !first);
      }
      if (last) amx_finish(a, c, ldc, row, rows, p, np);
    }
  }
}

constexpr int kAmxDecodeMaxRun = 8;  // column groups a thread takes at a time below amx_prefill_min_m

void amx_compute(const LinearArgs& a, int thread, int n_threads) {
  const LargeSplit s = large_split(a.m, a.w.n, n_threads, a.swiglu, LargeTile{kAmxRows, amx_group_panels(a)},
                                   a.work_cursor != nullptr, a.blocking.amx_prefill_min_m);
  std::optional<AmxEmulator> emulator;
  detail::AmxTiles tiles;
  if (a.amx_emulated) tiles.emulator = &emulator.emplace();
  const bool blocked = a.blocking.amx_k_block > 0 && a.w.k > a.blocking.amx_k_block && a.workspace;
  float* acc = blocked ? a.workspace + static_cast<size_t>(thread) * a.m * 2 * kPanelCols : nullptr;
  // Batched decode rows with whole groups: runs of neighbouring groups (decode_run: ~4 a thread,
  // at most 8 groups), whose panels lie one after another, so the first row tile's prefetch runs
  // on into the next panel of the run. One group at a time from the counter, every panel's first
  // 16 KB went unprefetched: on two Xeon cores the output heads (32k x 2048, 152k x 896) at 16
  // and 64 rows ran 1.04-1.10x faster in runs, Qwen2.5's gate_up at 64 rows 1.04-1.27x, the
  // down projections level (three rounds, one in reversed order).
  // Prefill rows and split groups keep tasks of one group.
  const bool runs = a.m < a.blocking.amx_prefill_min_m && s.row_parts == 1;
  const int run = runs ? decode_run(s.tasks(), n_threads, kAmxDecodeMaxRun) : 1;
  const size_t stride = panel_stride(a.w.k);
  for_each_share(a.work_cursor, thread, n_threads, s.tasks(), run, [&](int lo, int hi) {
    const bf16_t* run_end =
        runs ? a.w.data + static_cast<size_t>(std::min(hi * amx_group_panels(a), weight_panels(a))) * stride : nullptr;
    for (int task = lo; task < hi; ++task) {
      const Range rows = chunk(s.row_tiles, s.row_parts, task % s.row_parts);
      if (rows.hi <= rows.lo) continue;
      if (blocked) {
        amx_group_blocked(a, task / s.row_parts, rows.lo, rows.hi, tiles, acc);
      } else {
        amx_group(a, task / s.row_parts, rows.lo, rows.hi, tiles, run_end);
      }
    }
  });
  detail::amx_release(tiles);
}

void check_args(const LinearArgs& a) {
  check_linear_blocking(a.blocking);
  const int n_out = a.swiglu ? a.w.n / 2 : a.w.n;
  if (a.m < 0 || a.w.n <= 0 || a.w.k <= 0 || !a.w.data || (a.m > 0 && !a.x) ||
      (a.out_f32 == nullptr) == (a.out_bf16 == nullptr) || a.ldx < static_cast<size_t>(a.w.k) ||
      a.ldo < static_cast<size_t>(n_out) || (a.residual && a.ldr < static_cast<size_t>(a.w.n))) {
    throw std::invalid_argument("linear_bf16: bad arguments");
  }
  if (a.swiglu && (a.w.n % 2 != 0 || !a.out_bf16 || a.bias || a.residual)) {
    throw std::invalid_argument("linear_bf16: SwiGLU needs an even n, BF16 output, no bias or residual");
  }
}

template <typename Src>
void pack_impl(bf16_t* dst, const Src* w, int n, int k, size_t ldw) {
  const int panels = packed_panels(n), pairs = packed_pairs(k);
  for (int p = 0; p < panels; ++p) {
    for (int col = 0; col < kPanelCols; ++col) {
      const int row = p * kPanelCols + col;
      const Src* src = w + static_cast<size_t>(row) * ldw;
      bf16_t* d = dst + static_cast<size_t>(p) * pairs * 2 * kPanelCols + 2 * col;
      for (int pr = 0; pr < pairs; ++pr) {
        for (int j = 0; j < 2; ++j) {
          const int kk = 2 * pr + j;
          bf16_t v = 0;
          if (row < n && kk < k) {
            if constexpr (sizeof(Src) == 4) {
              v = f32_to_bf16(src[kk]);
            } else {
              v = src[kk];
            }
          }
          d[static_cast<size_t>(pr) * 2 * kPanelCols + j] = v;
        }
      }
    }
  }
}

}  // namespace

void check_linear_blocking(const LinearBlocking& b) {
  auto fail = [](const char* what) { throw std::invalid_argument(std::string("LinearBlocking: ") + what); };
  if (b.k_block_pairs < kMinKBlockPairs || b.k_block_pairs > kMaxKBlockPairs) {
    fail("k_block_pairs must be 32..4096");
  }
  if (b.tile_panels < 1 || b.tile_panels > 2) fail("tile_panels must be 1 or 2");
  if (b.tile_rows < 1 || b.tile_rows > (b.tile_panels == 2 ? 6 : 8)) {
    fail("tile_rows must be 1..8 with one panel, 1..6 with two");
  }
  if (b.amx_k_block != 0 && (b.amx_k_block < 64 || b.amx_k_block > 1024 || b.amx_k_block % 32 != 0)) {
    fail("amx_k_block must be 0 or a multiple of 32 in 64..1024");
  }
  if (b.amx_prefill_min_m < 1) fail("amx_prefill_min_m must be at least 1");
  if (b.amx_prefetch_bytes != 0 &&
      (b.amx_prefetch_bytes < 1024 || b.amx_prefetch_bytes > 65536 || b.amx_prefetch_bytes % 64 != 0)) {
    fail("amx_prefetch_bytes must be 0 or a multiple of 64 in 1024..65536");
  }
  if (b.decode_prefetch_bytes != 0 &&
      (b.decode_prefetch_bytes < 1024 || b.decode_prefetch_bytes > 65536 || b.decode_prefetch_bytes % 64 != 0)) {
    fail("decode_prefetch_bytes must be 0 or a multiple of 64 in 1024..65536");
  }
}

namespace detail {
float* fp32_block_buffer(int np, int pairs) {
  // Per thread, grown once to the largest block (2 · 256 k × 64 columns: 128 KB, in L2 while the
  // group's row tiles pass over it), 64-byte aligned: a k's 16 columns of a strip are then one
  // cache line. At malloc's 16-byte alignment they straddled two and every second 32-byte load
  // was split.
  constexpr size_t kLineFloats = 16;
  thread_local std::vector<float> buffer;
  buffer.resize(std::max(buffer.size(), 2 * static_cast<size_t>(pairs) * np * 32 + kLineFloats));
  const auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return buffer.data() + (kLineFloats - address / sizeof(float) % kLineFloats) % kLineFloats;
}
}  // namespace detail

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::avx512_bf16: return "avx512_bf16";
    case Isa::avx2: return "avx2";
    case Isa::scalar: break;
  }
  return "scalar";
}

void convert_f32_to_bf16(bf16_t* dst, const float* src, size_t n, Isa isa) {
  if (isa == Isa::avx512_bf16) {
    detail::convert_f32_to_bf16_avx512(dst, src, n);
    return;
  }
  if (isa == Isa::avx2) {
    detail::convert_f32_to_bf16_avx2(dst, src, n);
    return;
  }
  for (size_t i = 0; i < n; ++i) dst[i] = f32_to_bf16(src[i]);
}

void convert_bf16_to_f32(float* dst, const bf16_t* src, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(src[i]);
}

void pack_linear_bf16(bf16_t* dst, const float* w, int n, int k, size_t ldw) { pack_impl(dst, w, n, k, ldw); }
void pack_linear_bf16(bf16_t* dst, const bf16_t* w, int n, int k, size_t ldw) { pack_impl(dst, w, n, k, ldw); }

template <typename Src>
void pack_swiglu_impl(bf16_t* dst, const Src* gate, const Src* up, int n_out, int k, size_t ldw) {
  const size_t panel_elems = static_cast<size_t>(packed_pairs(k)) * 2 * kPanelCols;
  for (int q = 0; q < packed_panels(n_out); ++q) {
    const int cols = std::min(kPanelCols, n_out - q * kPanelCols);
    const size_t row = static_cast<size_t>(q) * kPanelCols * ldw;
    pack_impl(dst + 2 * static_cast<size_t>(q) * panel_elems, gate + row, cols, k, ldw);
    pack_impl(dst + (2 * static_cast<size_t>(q) + 1) * panel_elems, up + row, cols, k, ldw);
  }
}

void pack_swiglu_bf16(bf16_t* dst, const float* gate, const float* up, int n_out, int k, size_t ldw) {
  pack_swiglu_impl(dst, gate, up, n_out, k, ldw);
}
void pack_swiglu_bf16(bf16_t* dst, const bf16_t* gate, const bf16_t* up, int n_out, int k, size_t ldw) {
  pack_swiglu_impl(dst, gate, up, n_out, k, ldw);
}

size_t linear_bf16_workspace_floats(int m, int n, int k, int n_threads, bool swiglu) {
  if (m <= kDecodeMaxM) {
    const int splits = decode_splits(m, n, k, n_threads, swiglu);
    if (splits == 1) return 0;
    return static_cast<size_t>(packed_panels(n)) * splits * m * kPanelCols;
  }
  // Large M: per thread, FP32 sums of every row of one column group, kept across K blocks (and
  // for SwiGLU, the sums its activation reads).
  // Sized for the smallest K block any LinearBlocking may choose (AMX blocks too).
  if (packed_pairs(k) <= kMinKBlockPairs && !swiglu) return 0;
  return static_cast<size_t>(n_threads) * m * 2 * kPanelCols;
}

bool linear_bf16_uses_amx(const LinearArgs& args) { return use_amx(args); }

bool linear_bf16_needs_reduce(int m, int n, int k, int n_threads, bool swiglu) {
  return m <= kDecodeMaxM && decode_splits(m, n, k, n_threads, swiglu) > 1;
}

void linear_bf16_compute(const LinearArgs& a, int thread, int n_threads) {
  check_args(a);
  if (a.m == 0) return;
  const int panels = packed_panels(a.w.n);
  if (a.m <= kDecodeMaxM && a.swiglu) {
    for_each_decode_share(a, thread, n_threads, weight_panels(a) / 2, kDecodeRunPanels / 2,
                          [&a](int lo, int hi) { decode_swiglu_pairs(a, lo, hi); });
    return;
  }
  if (a.m <= kDecodeMaxM) {
    const int splits = decode_splits(a.m, a.w.n, a.w.k, n_threads, false);
    if (splits == 1) {
      for_each_decode_share(a, thread, n_threads, panels, kDecodeRunPanels,
                            [&a](int lo, int hi) { decode_panels(a, lo, hi); });
    } else if (thread < panels * splits) {
      decode_split_unit(a, thread, splits);
    }
    return;
  }
  if (use_amx(a)) {
    amx_compute(a, thread, n_threads);
    return;
  }
  const LargeSplit s = large_split(a.m, a.w.n, n_threads, a.swiglu, large_tile(a.m, a.swiglu, a.isa, a.blocking),
                                   a.work_cursor != nullptr, kLargeSplitMinM);
  float* scratch = nullptr;
  if (packed_pairs(a.w.k) > std::min(a.blocking.k_block_pairs, detail::kFp32MaxBlockPairs) || a.swiglu) {
    scratch = a.workspace + static_cast<size_t>(thread) * a.m * 2 * kPanelCols;
  }
  detail::TaskStream tasks(a.work_cursor, thread, n_threads, s.tasks());
  const auto next_group = [&] {
    const int next = tasks.next();
    return next < 0 ? -1 : next / s.row_parts;
  };
  for (int task = tasks.current(); task >= 0; task = tasks.advance()) {
    const Range rows = chunk(s.row_tiles, s.row_parts, task % s.row_parts);
    if (rows.hi > rows.lo) large_group(a, s.tile, task / s.row_parts, rows.lo, rows.hi, scratch, next_group);
  }
}

void linear_bf16_reduce(const LinearArgs& a, int thread, int n_threads) {
  const int splits = decode_splits(a.m, a.w.n, a.w.k, n_threads, a.swiglu);
  if (a.m == 0 || a.m > kDecodeMaxM || splits == 1) return;
  const int panels = packed_panels(a.w.n);
  const Range r = chunk(panels * a.m, n_threads, thread);  // units of (panel, row)
  float acc[kPanelCols];
  for (int unit = r.lo; unit < r.hi; ++unit) {
    const int p = unit / a.m, row = unit % a.m;
    std::fill(acc, acc + kPanelCols, 0.0f);
    for (int s = 0; s < splits; ++s) {
      const float* part = a.workspace + (static_cast<size_t>(p) * splits + s) * a.m * kPanelCols +
                          static_cast<size_t>(row) * kPanelCols;
      for (int j = 0; j < kPanelCols; ++j) acc[j] += part[j];
    }
    const int col = p * kPanelCols;
    const size_t o = static_cast<size_t>(row) * a.ldo + col;
    detail::finish_row(acc, std::min(kPanelCols, a.w.n - col), a.bias ? a.bias + col : nullptr,
                       a.residual ? a.residual + static_cast<size_t>(row) * a.ldr + col : nullptr,
                       a.out_f32 ? a.out_f32 + o : nullptr, a.out_bf16 ? a.out_bf16 + o : nullptr);
  }
}

namespace detail {

void finish_row(const float* acc, int n_valid, const float* bias, const float* residual, float* out_f32,
                bf16_t* out_bf16) {
  for (int j = 0; j < n_valid; ++j) {
    float v = acc[j];
    if (bias) v += bias[j];
    if (residual) v += residual[j];
    if (out_f32) {
      out_f32[j] = v;
    } else {
      out_bf16[j] = f32_to_bf16(v);
    }
  }
}

void tile_scalar(const Tile& t) {
  constexpr int kCols = 2 * kPanelCols;
  float acc[8][kCols];
  const int cols = t.np * kPanelCols;
  for (int r = 0; r < t.mr; ++r) {
    for (int j = 0; j < cols; ++j) {
      acc[r][j] = t.load_c ? t.c[static_cast<size_t>(r) * t.ldc + j] : 0.0f;
    }
  }
  const int pairs = t.n_pairs + (t.half_pair ? 1 : 0);
  for (int p = 0; p < pairs; ++p) {
    for (int r = 0; r < t.mr; ++r) {
      const bf16_t* xr = t.a + static_cast<size_t>(r) * t.lda + 2 * static_cast<size_t>(p);
      const float x0 = bf16_to_f32(xr[0]);
      const float x1 = p < t.n_pairs ? bf16_to_f32(xr[1]) : 0.0f;
      for (int q = 0; q < t.np; ++q) {
        const bf16_t* w = t.b + q * t.panel_stride + static_cast<size_t>(p) * 2 * kPanelCols;
        float* ar = acc[r] + q * kPanelCols;
        for (int col = 0; col < kPanelCols; ++col) {
          ar[col] += x0 * bf16_to_f32(w[2 * col]) + x1 * bf16_to_f32(w[2 * col + 1]);
        }
      }
    }
  }
  for (int r = 0; r < t.mr; ++r) {
    if (!t.epilogue) {
      std::copy(acc[r], acc[r] + cols, t.c + static_cast<size_t>(r) * t.ldc);
      continue;
    }
    const size_t o = static_cast<size_t>(r) * t.ldo;
    finish_row(acc[r], t.n_valid, t.bias, t.residual ? t.residual + static_cast<size_t>(r) * t.ldr : nullptr,
               t.out_f32 ? t.out_f32 + o : nullptr, t.out_bf16 ? t.out_bf16 + o : nullptr);
  }
}

}  // namespace detail
}  // namespace slab::kern
