// Quantized linear: the work split over threads, the per-thread workspace, activation
// quantization (phase 1 of M > 8) and the choice of tile per shape and ISA. Formats and packing:
// linear_quant_pack.cpp; tiles: linear_quant_scalar.cpp, _avx2.cpp, _avx512.cpp, _amx.cpp and the
// K-quant ones in linear_kquant*.cpp.
#include "kernels/linear_quant.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <optional>
#include <stdexcept>
#include <vector>

#include "kernels/gated_activation.h"
#include "kernels/linear_bf16_tile.h"
#include "kernels/linear_quant_tile.h"
#include "kernels/rowwise_bf16.h"
#include "kernels/work_split.h"

namespace slab::kern {
namespace {

using detail::QuantTile;

// Dynamic decode share: at most 8 panels of 16 columns (about 140 KB of W4 at K = 2048), as in
// linear_bf16: a thread the OS or another process slows down costs at most one run at the end.
constexpr int kDecodeRunPanels = 8;

size_t round_up(size_t v, size_t to) { return (v + to - 1) / to * to; }

using detail::chunk;
using detail::decode_run;
using detail::for_each_share;
using detail::Range;

// ---- work split ----

struct Workspace {
  // Weight-only decode (per thread, quant_int16_activations): INT16 rows [m][kp], their block
  // scales and block sums [m][kp / act block] (room for blocks of kQuantActBlock, the smaller).
  int16_t* x16 = nullptr;
  float* x16scale = nullptr;
  int32_t* x16sum = nullptr;
  // INT8 activations (shared for M > 8, per thread for W4 decode): INT8 rows [m][kp], block
  // scales and block sums [kp / act block][m] (room for blocks of kQuantActBlock, the smaller).
  int8_t* xq = nullptr;
  float* xscale = nullptr;
  int32_t* xqsum = nullptr;
  int32_t* xqhalf = nullptr;
  // The AMX path (M >= quant_amx_min_m): the thread's tile state, and (but for W8) its room for a
  // panel pair's codes as bytes (amx_unpacked_bytes).
  detail::AmxQuantTiles* amx = nullptr;
  uint8_t* amx_codes = nullptr;
  // The AMX-BF16 prefill (quant_linear_uses_amx_bf16): the thread's BF16 tile state and its room
  // for a panel pair dequantized to BF16 (k · 64 bytes); Q5_K and Q6_K codes go through amx_codes
  // first (slot_has_codes: W8 reads its bytes in place, 4-bit codes their nibbles).
  detail::AmxTiles* amx_bf16 = nullptr;
  bf16_t* bf16_panel = nullptr;
  // K-quant weights on the batched AVX2 tiles (M > 8): the thread's room for a panel pair's scale
  // tables (kquant_table_bytes).
  float* kq_table = nullptr;
};

size_t int8_rows_bytes(int m, int kp) {
  const size_t block_values = static_cast<size_t>(m) * (kp / kQuantActBlock);
  return round_up(static_cast<size_t>(m) * kp, 64) + 3 * round_up(block_values * 4, 64);
}

Workspace int8_rows_at(uint8_t* base, int m, int kp) {
  const size_t block_values = static_cast<size_t>(m) * (kp / kQuantActBlock);
  Workspace ws;
  ws.xq = reinterpret_cast<int8_t*>(base);
  base += round_up(static_cast<size_t>(m) * kp, 64);
  ws.xscale = reinterpret_cast<float*>(base);
  base += round_up(block_values * 4, 64);
  ws.xqsum = reinterpret_cast<int32_t*>(base);
  base += round_up(block_values * 4, 64);
  ws.xqhalf = reinterpret_cast<int32_t*>(base);
  return ws;
}

size_t decode_region_bytes(const QuantFormat& f, int m, int kp) {
  if (quant_int8_activations(f, m)) return int8_rows_bytes(m, kp);
  const size_t block_values = static_cast<size_t>(m) * (kp / kQuantActBlock);
  return round_up(static_cast<size_t>(m) * kp * 2, 64) + 2 * round_up(block_values * 4, 64);
}

bool amx_shape(int m, const QuantFormat& f, Isa isa) { return m >= quant_amx_min_m(f) && isa == Isa::avx512_bf16; }
// Per thread on the AMX path: the codes of a panel pair unpacked to bytes (all but W8).
size_t amx_unpacked_bytes(const QuantFormat& f, int kp) {
  return f.bits == 8 && !f.k_quant ? 0 : 2 * static_cast<size_t>(kQuantPanelCols) * kp;
}

// Per thread for M > 8 with K-quant weights: a panel pair's scale tables
// (detail::kquant_scale_table_avx2; other ISAs leave the room unused).
size_t kquant_table_bytes(const QuantFormat& f, int kp) {
  return f.k_quant ? 2 * static_cast<size_t>(kp / kKQuantSuperK) * detail::kKQuantTableFloats * sizeof(float) : 0;
}

// Only formats whose INT8 path scales every 32 elements of K (groups of 32, the K-quants, per
// channel where K is not a multiple of 128): with 128-element blocks the INT8 tiles' epilogue is a
// quarter as frequent, and on two Xeon cores they ran 1.42-1.66x the BF16 tiles at M = 64 and
// level at 512 (0.88-1.17x; bench/results/2026-11-30-xeon-2c-quant-amx-wide-blocks).
bool amx_bf16_shape(int m, const QuantFormat& f, int k, Isa isa) {
  return m >= quant_amx_bf16_min_m(f) && k % 32 == 0 && quant_act_block(f, k) == kQuantActBlock &&
         isa == Isa::avx512_bf16;
}
// Whether a thread's slot holds a panel pair's codes as bytes: on the INT8 tiles (room of 0 for
// W8), and on the AMX-BF16 prefill but for 4-bit codes, whose nibbles it reads in place
// (detail::dequantizes_nibbles).
bool slot_has_codes(const QuantFormat& f, bool int8_tiles, bool bf16) { return int8_tiles || (bf16 && f.bits != 4); }
// Per thread for M > 8: [unpacked codes (AMX paths)][K-quant tables][BF16 panel (AMX-BF16)].
size_t thread_slot_bytes(const QuantFormat& f, int k, bool amx_codes, bool bf16_panel) {
  const int kp = quant_padded_k(f, k);
  return (amx_codes ? amx_unpacked_bytes(f, kp) : 0) + kquant_table_bytes(f, kp) +
         (bf16_panel ? static_cast<size_t>(k) * 2 * kQuantPanelCols * sizeof(bf16_t) : 0);
}

Workspace workspace_of(const QuantLinearArgs& a, int thread) {
  const QuantFormat& f = a.w.format;
  const int kp = quant_padded_k(f, a.w.k);
  auto* base = static_cast<uint8_t*>(a.workspace);
  if (a.m > kQuantDecodeMaxM) {
    Workspace ws = int8_rows_at(base, a.m, kp);
    // The thread's slot after the shared rows (thread_slot_bytes).
    const bool bf16 = quant_linear_uses_amx_bf16(a);
    const bool amx = bf16 || quant_linear_uses_amx(a);
    const bool codes = slot_has_codes(f, amx && !bf16, bf16);
    const size_t amx_bytes = codes ? amx_unpacked_bytes(f, kp) : 0;
    uint8_t* slot =
        base + int8_rows_bytes(a.m, kp) + static_cast<size_t>(thread) * thread_slot_bytes(f, a.w.k, codes, bf16);
    if (amx_bytes > 0) ws.amx_codes = slot;
    if (f.k_quant && !amx && a.isa == Isa::avx2) ws.kq_table = reinterpret_cast<float*>(slot + amx_bytes);
    if (bf16) ws.bf16_panel = reinterpret_cast<bf16_t*>(slot + amx_bytes + kquant_table_bytes(f, kp));
    return ws;
  }
  uint8_t* mine = base + static_cast<size_t>(thread) * decode_region_bytes(f, a.m, kp);
  if (quant_int8_activations(f, a.m)) return int8_rows_at(mine, a.m, kp);
  Workspace ws;
  ws.x16 = reinterpret_cast<int16_t*>(mine);
  mine += round_up(static_cast<size_t>(a.m) * kp * 2, 64);
  ws.x16scale = reinterpret_cast<float*>(mine);
  ws.x16sum = reinterpret_cast<int32_t*>(mine + round_up(static_cast<size_t>(a.m) * (kp / kQuantActBlock) * 4, 64));
  return ws;
}

QuantTile weight_tile(const QuantLinearArgs& a, int panel, int np) {
  const QuantFormat& f = a.w.format;
  const int kp = quant_padded_k(f, a.w.k);
  QuantTile t;
  t.panel_bytes = quant_panel_bytes(f, a.w.k);
  t.panel_stride = t.panel_bytes;
  t.next_tile_bytes = static_cast<size_t>(np) * t.panel_bytes;
  t.panel = a.w.data + static_cast<size_t>(panel) * t.panel_bytes;
  t.code_bytes = static_cast<size_t>(kp) * kQuantPanelCols * f.bits / 8;
  t.np = np;
  t.bits = f.bits;
  t.groups = quant_groups(f, a.w.k);
  t.group_steps = quant_group_size(f, a.w.k) / detail::quant_step_k(f.bits);
  t.zero_point = f.zero_point;
  t.k_quant = f.k_quant;
  if (f.k_quant) {
    t.super_blocks = kp / kKQuantSuperK;
    t.code_bytes = t.panel_bytes;  // one stream of records: no separate scales
  }
  return t;
}

// Bias, residual and the store of `rows` rows of a tile's sums at (row, col).
void finish_tile(const QuantLinearArgs& a, const float* sums, int row, int rows, int col, int cols) {
  const int n_valid = std::min(cols, a.w.n - col);
  for (int r = 0; r < rows; ++r) {
    const size_t o = static_cast<size_t>(row + r) * a.ldo + col;
    detail::finish_row(sums + static_cast<size_t>(r) * detail::kQuantTileCols, n_valid, a.bias ? a.bias + col : nullptr,
                       a.residual ? a.residual + static_cast<size_t>(row + r) * a.ldr + col : nullptr,
                       a.out_f32 ? a.out_f32 + o : nullptr, a.out_bf16 ? a.out_bf16 + o : nullptr);
  }
}

// SwiGLU: gate panel p and its up panel (n_out / 16 panels on) as the tile's two panels.
int swiglu_gate_panels(const QuantLinearArgs& a) { return a.w.n / 2 / kQuantPanelCols; }
QuantTile pair_tile(const QuantLinearArgs& a, int gate_panel) {
  QuantTile t = weight_tile(a, gate_panel, 2);
  t.panel_stride = static_cast<size_t>(swiglu_gate_panels(a)) * t.panel_bytes;
  t.next_tile_bytes = t.panel_bytes;  // the next gate (and up) panel
  return t;
}

// act(gate)·up of `rows` rows of a pair tile's sums (gate in columns 0..15, up in 16..31) at
// (row, 16 · gate_panel) of out_bf16.
void finish_swiglu_tile(const QuantLinearArgs& a, const float* sums, int row, int rows, int gate_panel) {
  const int col = gate_panel * kQuantPanelCols;
  // The activation's ISA: the AVX-512 quant kernels imply AVX-512 BF16 (linear_quant.h).
  for (int r = 0; r < rows; ++r) {
    const float* gate = sums + static_cast<size_t>(r) * detail::kQuantTileCols;
    bf16_t* out = a.out_bf16 + static_cast<size_t>(row + r) * a.ldo + col;
    if (a.gated_act == GatedAct::gelu_tanh) {
      gelu_tanh_mul_to_bf16(out, gate, gate + kQuantPanelCols, kQuantPanelCols, a.isa);
    } else {
      silu_mul_to_bf16(out, gate, gate + kQuantPanelCols, kQuantPanelCols, a.isa);
    }
  }
}

void run_decode_tile(const QuantTile& t, Isa isa) {
  switch (isa) {
    case Isa::avx512_bf16: detail::quant_decode_tile_avx512(t); return;
    case Isa::avx2: detail::quant_decode_tile_avx2(t); return;
    case Isa::scalar: break;
  }
  detail::quant_decode_tile_scalar(t);
}

void run_batch_tile(const QuantTile& t, Isa isa) {
  if (t.k_quant) {
    switch (isa) {
      case Isa::avx512_bf16: detail::kquant_tile_avx512(t); return;
      case Isa::avx2: detail::kquant_tile_avx2(t); return;
      case Isa::scalar: break;
    }
    detail::kquant_tile_scalar(t);
    return;
  }
  switch (isa) {
    case Isa::avx512_bf16: detail::quant_batch_tile_avx512(t); return;
    case Isa::avx2: detail::quant_batch_tile_avx2(t); return;
    case Isa::scalar: break;
  }
  detail::quant_batch_tile_scalar(t);
}

using QuantizeRowFn = void (*)(int8_t*, float*, int32_t*, int32_t*, size_t, const bf16_t*, int, int, int);
QuantizeRowFn quantize_row_for(Isa isa) {
  switch (isa) {
    case Isa::avx512_bf16: return detail::quantize_row_avx512;
    case Isa::avx2: return detail::quantize_row_avx2;
    case Isa::scalar: break;
  }
  return detail::quantize_row_scalar;
}

using QuantizeRowInt16Fn = void (*)(int16_t*, float*, int32_t*, const bf16_t*, int, int, int);
QuantizeRowInt16Fn quantize_row_int16_for(Isa isa) {
  // One row per thread and call: AVX2 serves the AVX-512 machines too (the same bits).
  return isa == Isa::scalar ? detail::quantize_row_int16_scalar : detail::quantize_row_int16_avx2;
}

// M <= 8: this thread's copy of x padded to kp, and its group sums; or, with INT8 activations
// (W4), its own INT8 rows (a few rows: cheaper than a barrier between two phases).
void prepare_decode_rows(const QuantLinearArgs& a, const Workspace& ws) {
  const QuantFormat& f = a.w.format;
  const int kp = quant_padded_k(f, a.w.k);
  const int act_block = quant_act_block(f, a.w.k);
  if (quant_int8_activations(f, a.m)) {
    const QuantizeRowFn quantize = quantize_row_for(a.isa);
    for (int r = 0; r < a.m; ++r) {
      quantize(ws.xq + static_cast<size_t>(r) * kp, ws.xscale + r, ws.xqsum + r, ws.xqhalf + r,
               static_cast<size_t>(a.m), a.x + static_cast<size_t>(r) * a.ldx, a.w.k, kp, act_block);
    }
    return;
  }
  const QuantizeRowInt16Fn quantize = quantize_row_int16_for(a.isa);
  const size_t blocks = static_cast<size_t>(kp / act_block);
  for (int r = 0; r < a.m; ++r) {
    quantize(ws.x16 + static_cast<size_t>(r) * kp, ws.x16scale + r * blocks, ws.x16sum + r * blocks,
             a.x + static_cast<size_t>(r) * a.ldx, a.w.k, kp, act_block);
  }
}

// Tile `w` over `rows` INT8 activation rows from `row`.
QuantTile int8_row_tile(const QuantLinearArgs& a, const Workspace& ws, const QuantTile& w, int row, int rows) {
  const int kp = quant_padded_k(a.w.format, a.w.k);
  QuantTile t = w;
  t.mr = rows;
  t.xq = ws.xq + static_cast<size_t>(row) * kp;
  t.ldxq = static_cast<size_t>(kp);
  t.act_block = quant_act_block(a.w.format, a.w.k);
  t.blocks = kp / t.act_block;
  t.ldxs = static_cast<size_t>(a.m);
  t.xscale = ws.xscale + row;
  t.xqsum = ws.xqsum + row;
  t.xqhalf = ws.xqhalf + row;
  return t;
}

// The AMX tiles read codes as bytes: a W8 panel's own, others unpacked to amx_codes once for
// every row tile.
void byte_codes(const QuantLinearArgs& a, const Workspace& ws, const QuantTile& w, const uint8_t* out[2]) {
  const int kp = quant_padded_k(a.w.format, a.w.k);
  for (int q = 0; q < w.np; ++q) {
    const uint8_t* codes = w.panel + static_cast<size_t>(q) * w.panel_stride;
    if (w.bits == 8 && !w.k_quant) {
      out[q] = codes;
      continue;
    }
    uint8_t* bytes = ws.amx_codes + static_cast<size_t>(q) * kQuantPanelCols * kp;
    if (w.k_quant) {
      detail::unpack_kquant_codes(bytes, codes, w.bits, w.super_blocks);
    } else {
      detail::unpack_w4_codes(bytes, codes, kp);
    }
    out[q] = bytes;
  }
}

// The AMX-BF16 prefill (linear_quant_amx_bf16.cpp): the tile's panels dequantized to one BF16
// panel, then every 32-row tile of the BF16 activations over it on the BF16 tiles.
template <typename Finish>
void bf16_rows(const QuantLinearArgs& a, const Workspace& ws, const QuantTile& w, float* sums, Finish&& finish) {
  const uint8_t* bytes[2] = {};
  if (!detail::dequantizes_nibbles(w)) byte_codes(a, ws, w, bytes);
  detail::dequantize_pair_bf16(ws.bf16_panel, w, bytes, a.w.k);
  for (int row = 0; row < a.m; row += detail::kQuantAmxRows) {
    const int rows = std::min(detail::kQuantAmxRows, a.m - row);
    detail::amx_panel_bf16(*ws.amx_bf16, a.x + static_cast<size_t>(row) * a.ldx, a.ldx, rows, ws.bf16_panel, a.w.k,
                           sums, detail::kQuantTileCols);
    finish(sums, row, rows);
  }
}

// The weights of tile `w`, rows in tiles of the batched kernel over INT8 activations; the first
// row tile streams the panels from memory (prefetching up to stream_end), the others find them
// in L1/L2. finish(sums, row, rows) stores each row tile.
template <typename Finish>
void int8_rows(const QuantLinearArgs& a, const Workspace& ws, const QuantTile& w, const uint8_t* stream_end,
               float* sums, Finish&& finish) {
  if (ws.amx_bf16) {
    bf16_rows(a, ws, w, sums, finish);
    return;
  }
  const int tile_rows = ws.amx ? detail::kQuantAmxRows : detail::batch_tile_rows(a.w.format, a.isa);
  QuantTile amx_w = w;
  if (ws.amx) byte_codes(a, ws, w, amx_w.byte_codes);
  if (ws.kq_table && w.k_quant) {
    for (int q = 0; q < w.np; ++q) {
      detail::kquant_scale_table_avx2(
          ws.kq_table + static_cast<size_t>(q) * w.super_blocks * detail::kKQuantTableFloats,
          w.panel + static_cast<size_t>(q) * w.panel_stride, w.bits, w.super_blocks);
    }
    amx_w.kq_table = ws.kq_table;
  }
  for (int row = 0; row < a.m; row += tile_rows) {
    QuantTile t = int8_row_tile(a, ws, amx_w, row, std::min(tile_rows, a.m - row));
    // Batched (M > 8) the first row tile streams too where that was measured faster: it reads
    // the panels from memory. On AVX2, with kquant_scale_table_avx2's tail prefetches, Q4_K at
    // M = 16 ran 1.14-1.17x faster on a Zen 2 core, Q4_K_M decode of 16 sequences 1.14-1.16x
    // (bench/results/2026-11-30-epyc-zen2-2c-batched-prefetch). On AVX-512 (one Xeon core) the
    // K-quant tiles gained 1.20-1.30x at M = 16 (Q4_K) and 1.05-1.17x (Q6_K), W4/W8 were level
    // to 0.85x (bench/results/2026-11-30-xeon-2c-fp32-products, batched-stream), so only the
    // K-quant tiles stream there.
    t.stream = row == 0 && (a.m <= kQuantDecodeMaxM || a.isa == Isa::avx2 || a.w.format.k_quant);
    t.stream_end = stream_end;
    t.out = sums;
    if (ws.amx) {
      detail::quant_batch_tile_amx(t, *ws.amx);
    } else {
      run_batch_tile(t, a.isa);
    }
    finish(sums, row, t.mr);
  }
}

// Where a streaming tile's prefetches run on to past its own panels: the next tile the thread
// reads starts next_tile_bytes after the tile's first panel, and none go past `end`.
struct StreamOn {
  size_t next_tile_bytes;
  const uint8_t* end;
};

// Decode runs (M <= 8) of units [u0, u1) from the thread's TaskStream; a unit is a panel, or with
// SwiGLU a gate panel and its up panel. The tile of units [u, u + n) runs on into the next tile,
// and the run's last one into the thread's next run, claimed then: a run that started cold read
// its first prefetch distance with no prefetches in flight, and Q4_K linears at M = 1 on one
// Zen 2 core read 5-20 % faster with 8x longer runs before this (the cursor's runs are 8 panels).
struct DecodeRun {
  int u0, u1;
  detail::TaskStream* runs;  // null: batched (M > 8), nothing streams
};
StreamOn stream_on(const QuantLinearArgs& a, const DecodeRun& r, int u, int n, size_t unit_bytes, size_t end_offset) {
  const uint8_t* base = a.w.data + end_offset;
  if (u + n >= r.u1 && r.runs) {
    const int next = r.runs->next();
    if (next >= 0)
      return {static_cast<size_t>(next - u) * unit_bytes, base + static_cast<size_t>(r.runs->end(next)) * unit_bytes};
  }
  return {static_cast<size_t>(n) * unit_bytes, base + static_cast<size_t>(r.u1) * unit_bytes};
}

// Panels [p, p + np) over INT8 activations, stored with the epilogue.
void int8_panels(const QuantLinearArgs& a, const Workspace& ws, int p, int np, const StreamOn& on, float* sums) {
  QuantTile w = weight_tile(a, p, np);
  w.next_tile_bytes = on.next_tile_bytes;
  int8_rows(a, ws, w, on.end, sums, [&](const float* s, int row, int rows) {
    finish_tile(a, s, row, rows, p * kQuantPanelCols, np * kQuantPanelCols);
  });
}

// A weight-only decode tile's activation rows: the thread's INT16 rows, block scales and sums.
void set_decode_rows(QuantTile& t, const QuantLinearArgs& a, const Workspace& ws) {
  const int kp = quant_padded_k(a.w.format, a.w.k);
  t.mr = a.m;
  t.x16 = ws.x16;
  t.ldx16 = static_cast<size_t>(kp);
  t.x16_block = quant_act_block(a.w.format, a.w.k);
  t.ldx16s = static_cast<size_t>(kp / t.x16_block);
  t.x16scale = ws.x16scale;
  t.x16sum = ws.x16sum;
}

// W8 decode of one row with blocks of 32 (Q8_0) on AVX2 takes four panels a tile and reads them
// as four streams (decode_row_panels in linear_quant_avx2.cpp); elsewhere tiles hold one or two
// panels. Two rows read four panels no faster than one at a time (Zen 2): their tile is bound by
// its multiplies.
bool four_panel_decode(const QuantLinearArgs& a) {
  return a.isa == Isa::avx2 && a.m == 1 && quant_int16_activations(a.w.format, a.m) &&
         quant_act_block(a.w.format, a.w.k) == kQuantActBlock;
}

// K-quant decode of one row on AVX2 takes four panels a tile from four places in the thread's run
// (kquant_quad), so that each of its four streams runs forward through consecutive panels, and
// leaves them to the hardware prefetcher. Panel pairs (the tile's two panels side by side) read
// streams that leapfrog each other every panel (18-75 KB), and Zen 2's prefetcher picks each up
// anew; with software prefetches the L1 miss buffers cap a core at ~16-17 GB/s. On one Zen 2 core
// Q4_K at M = 1 read 1.04-1.13x faster, Q4_K_M decode ran 1.03-1.09x and Q5_K_M 1.03-1.07x; Q6_K,
// bound by its unpacking, level (bench/results/2026-11-29-epyc-zen2-2c-kquant-four-streams). Q5_K
// and Q6_K records keep each code block's high bits right after its nibbles (kquant_layout) for
// this: with the high bits 1-2 KB after all the nibbles, a second stream in every record, they read
// at half speed.
bool four_stream_kquant(const QuantLinearArgs& a) { return a.isa == Isa::avx2 && a.m == 1 && a.w.format.k_quant; }

// One row over panels p, p + s, p + 2s and p + 3s (SwiGLU: gate panels p and p + s with their up
// panels), stored with the epilogue. A run [u0, u1) takes tiles p = u0 .. u0 + s - 1 with s a
// quarter of its panels (SwiGLU: half its gate panels): every panel a stream reads follows the
// one before it in memory. No software prefetches (the tile's `stream` stays off).
void kquant_quad(const QuantLinearArgs& a, const Workspace& ws, int p, int s, float* sums) {
  const size_t pb = quant_panel_bytes(a.w.format, a.w.k);
  QuantTile w = a.swiglu ? pair_tile(a, p) : weight_tile(a, p, 2);
  if (!a.swiglu) w.panel_stride = static_cast<size_t>(s) * pb;
  w.np = 4;
  w.pair_stride = static_cast<size_t>(a.swiglu ? s : 2 * s) * pb;
  QuantTile t = int8_row_tile(a, ws, w, 0, 1);
  t.out = sums;
  run_batch_tile(t, a.isa);
  if (a.swiglu) {
    finish_swiglu_tile(a, sums, 0, 1, p);
    finish_swiglu_tile(a, sums + 2 * kQuantPanelCols, 0, 1, p + s);
    return;
  }
  for (int q = 0; q < 4; ++q) {
    finish_tile(a, sums + q * kQuantPanelCols, 0, 1, (p + q * s) * kQuantPanelCols, kQuantPanelCols);
  }
}

// Rows of the per-thread sums of a tile: decode, batched register or AMX tiles.
constexpr int kSumsRows = std::max({detail::kQuantDecodeTileRows, detail::kQuantBatchTileRows, detail::kQuantAmxRows});

// SwiGLU: gate panels [u0, u1) with their up panels, over INT8 activations (M > 8, W4 decode) or
// BF16 ones (W8 decode: one tile of both panels for 1-2 rows, else one tile per panel).
void swiglu_units(const QuantLinearArgs& a, const Workspace& ws, const DecodeRun& r) {
  alignas(64) float sums[kSumsRows * detail::kQuantTileCols];
  const int gate_panels = swiglu_gate_panels(a);
  const size_t pb = quant_panel_bytes(a.w.format, a.w.k);
  const int u0 = r.u0, u1 = r.u1;
  int first = u0;
  if (four_stream_kquant(a)) {
    const int half = (u1 - u0) / 2;
    for (int i = 0; i < half; ++i) kquant_quad(a, ws, u0 + i, half, sums);
    first = u0 + 2 * half;
  }
  for (int u = first; u < u1; ++u) {
    if (four_panel_decode(a) && u + 1 < u1) {  // units u and u + 1: gate, up, next gate, next up
      QuantTile t = pair_tile(a, u);
      t.np = 4;
      t.pair_stride = pb;
      t.next_tile_bytes = 2 * pb;
      set_decode_rows(t, a, ws);
      t.out = sums;
      run_decode_tile(t, a.isa);
      finish_swiglu_tile(a, sums, 0, 1, u);
      finish_swiglu_tile(a, sums + 2 * kQuantPanelCols, 0, 1, ++u);
      continue;
    }
    if (quant_int8_activations(a.w.format, a.m)) {
      // Both streams end with the up panels: gate panel u's up panel is gate_panels on.
      const StreamOn on = stream_on(a, r, u, 1, pb, static_cast<size_t>(gate_panels) * pb);
      QuantTile w = pair_tile(a, u);
      w.next_tile_bytes = on.next_tile_bytes;
      int8_rows(a, ws, w, on.end, sums,
                [&](const float* s, int row, int rows) { finish_swiglu_tile(a, s, row, rows, u); });
      continue;
    }
    QuantTile t = pair_tile(a, u);
    set_decode_rows(t, a, ws);
    t.out = sums;
    if (a.m <= 2) {
      run_decode_tile(t, a.isa);
    } else {  // the decode tiles take two panels for 1-2 rows only
      t.np = 1;
      run_decode_tile(t, a.isa);
      t.panel += t.panel_stride;
      t.out = sums + kQuantPanelCols;
      run_decode_tile(t, a.isa);
    }
    finish_swiglu_tile(a, sums, 0, a.m, u);
  }
}

// M <= 8: panels [p0, p1), every row over the whole of K in one pass over the weights.
void decode_panels(const QuantLinearArgs& a, const Workspace& ws, const DecodeRun& r) {
  const int p0 = r.u0, p1 = r.u1;
  alignas(64) float sums[detail::kQuantDecodeTileRows * detail::kQuantTileCols];
  const bool int8_x = quant_int8_activations(a.w.format, a.m);
  // 1-2 rows: two panels give the multiply-add chains more independent work.
  const int np_max = a.m <= 2 || int8_x ? 2 : 1;
  int p = p0;
  if (four_stream_kquant(a)) {
    const int quarter = (p1 - p0) / 4;
    for (int i = 0; i < quarter; ++i) kquant_quad(a, ws, p0 + i, quarter, sums);
    p = p0 + 4 * quarter;
  }
  while (p < p1) {
    const int np = four_panel_decode(a) && p1 - p >= 4 ? 4 : std::min(np_max, p1 - p);
    if (int8_x) {
      int8_panels(a, ws, p, np, stream_on(a, r, p, np, quant_panel_bytes(a.w.format, a.w.k), 0), sums);
    } else {
      QuantTile t = weight_tile(a, p, np);
      t.pair_stride = 2 * t.panel_bytes;
      set_decode_rows(t, a, ws);
      t.out = sums;
      run_decode_tile(t, a.isa);
      finish_tile(a, sums, 0, t.mr, p * kQuantPanelCols, np * kQuantPanelCols);
    }
    p += np;
  }
}

// The thread's share of the weights as units: panels, or with SwiGLU gate panels (each with its
// up panel); M <= 8 runs every row over them in one pass.
void decode_units(const QuantLinearArgs& a, const Workspace& ws, const DecodeRun& r) {
  if (a.swiglu) {
    swiglu_units(a, ws, r);
  } else {
    decode_panels(a, ws, r);
  }
}

// M > 8: panel pairs [u0, u1) (SwiGLU: gate panels with their up panels), every row tile over the
// whole of K (the pair, 2 x 16 columns, stays in L2 while the row tiles pass over it).
void batch_panels(const QuantLinearArgs& a, const Workspace& ws, int u0, int u1) {
  if (a.swiglu) {
    swiglu_units(a, ws, {u0, u1, nullptr});
    return;
  }
  const int panels = quant_panels(a.w.n);
  alignas(64) float sums[kSumsRows * detail::kQuantTileCols];
  // The first row tile's prefetches (AVX2, int8_rows) stop at the end of the share: the
  // counter's next unit may go to another thread.
  const size_t pb = quant_panel_bytes(a.w.format, a.w.k);
  for (int u = u0; u < u1; ++u) {
    const int np = std::min(2, panels - 2 * u);
    int8_panels(a, ws, 2 * u, np, stream_on(a, {2 * u0, std::min(2 * u1, panels), nullptr}, 2 * u, np, pb, 0), sums);
  }
}

void check_args(const QuantLinearArgs& a) {
  check_quant_format(a.w.format);
  if (a.m < 0 || a.w.n <= 0 || a.w.k <= 0 || !a.w.data || (a.m > 0 && (!a.x || !a.workspace)) ||
      (a.out_f32 == nullptr) == (a.out_bf16 == nullptr) || a.ldx < static_cast<size_t>(a.w.k) ||
      a.ldo < static_cast<size_t>(a.swiglu ? a.w.n / 2 : a.w.n) || (a.residual && a.ldr < static_cast<size_t>(a.w.n))) {
    throw std::invalid_argument("quant_linear: bad arguments");
  }
  if (a.swiglu && (!quant_swiglu_fusable(a.w.n) || !a.out_bf16 || a.bias || a.residual)) {
    throw std::invalid_argument("quant_linear: SwiGLU needs n a multiple of 32, BF16 output, no bias or residual");
  }
}

}  // namespace

size_t quant_linear_workspace_bytes(int m, const PackedQuant& w, int n_threads, bool amx, bool amx_bf16) {
  const int kp = quant_padded_k(w.format, w.k);
  if (m <= kQuantDecodeMaxM) return static_cast<size_t>(n_threads) * decode_region_bytes(w.format, m, kp);
  // The largest slot either path may take (the call decides by its isa; the AMX-BF16 prefill, where
  // asked and its shape, takes precedence over the INT8 tiles).
  const bool bf16 = amx_bf16 && amx_bf16_shape(m, w.format, w.k, Isa::avx512_bf16);
  const bool codes = slot_has_codes(w.format, !bf16 && amx && amx_shape(m, w.format, Isa::avx512_bf16), bf16);
  return int8_rows_bytes(m, kp) + static_cast<size_t>(n_threads) * thread_slot_bytes(w.format, w.k, codes, bf16);
}

int quant_amx_min_m(const QuantFormat& f) { return f.bits == 8 && !f.k_quant ? 16 : 32; }

int quant_amx_bf16_min_m(const QuantFormat& f) {
  if (f.bits == 8 && !f.k_quant) return 64;
  return f.k_quant && f.bits == 4 ? 40 : 20;
}

bool quant_linear_uses_amx_bf16(const QuantLinearArgs& a) {
  return a.amx_bf16 && amx_bf16_shape(a.m, a.w.format, a.w.k, a.isa);
}

bool quant_linear_uses_amx(const QuantLinearArgs& a) {
  return (a.amx || a.amx_emulated) && amx_shape(a.m, a.w.format, a.isa) && !quant_linear_uses_amx_bf16(a);
}

void quant_linear_prepare(const QuantLinearArgs& a, int thread, int n_threads) {
  check_args(a);
  if (!quant_linear_needs_prepare(a.m) || quant_linear_uses_amx_bf16(a)) return;  // BF16 rows as they are
  const Workspace ws = workspace_of(a, thread);
  const int kp = quant_padded_k(a.w.format, a.w.k);
  const Range rows = chunk(a.m, n_threads, thread);
  const QuantizeRowFn quantize = quantize_row_for(a.isa);
  const int act_block = quant_act_block(a.w.format, a.w.k);
  for (int r = rows.lo; r < rows.hi; ++r) {
    quantize(ws.xq + static_cast<size_t>(r) * kp, ws.xscale + r, ws.xqsum + r, ws.xqhalf + r, static_cast<size_t>(a.m),
             a.x + static_cast<size_t>(r) * a.ldx, a.w.k, kp, act_block);
  }
}

void quant_linear_compute(const QuantLinearArgs& a, int thread, int n_threads) {
  check_args(a);
  if (a.m == 0) return;
  const Workspace ws = workspace_of(a, thread);
  const int panels = a.swiglu ? swiglu_gate_panels(a) : quant_panels(a.w.n);  // decode units
  if (a.m <= kQuantDecodeMaxM) {
    // Runs of units from the counter, or the thread's static share as one run (DecodeRun).
    const int run = a.work_cursor ? decode_run(panels, n_threads, kDecodeRunPanels) : panels;
    detail::TaskStream runs(a.work_cursor, thread, n_threads, panels, run);
    if (runs.current() < 0) return;
    prepare_decode_rows(a, ws);
    for (int lo = runs.current(); lo >= 0; lo = runs.advance()) decode_units(a, ws, {lo, runs.end(lo), &runs});
    return;
  }
  // M > 8: units of a panel pair (or a gate/up pair) over every row, one at a time from the
  // counter (a unit is M × 32 columns × K of work), or this thread's contiguous share.
  const int units = a.swiglu ? panels : (panels + 1) / 2;
  if (quant_linear_uses_amx_bf16(a)) {
    std::optional<AmxEmulator> emulator;
    detail::AmxTiles tiles;
    if (a.amx_emulated) tiles.emulator = &emulator.emplace();
    Workspace bf16_ws = ws;
    bf16_ws.amx_bf16 = &tiles;
    for_each_share(a.work_cursor, thread, n_threads, units, 1,
                   [&](int lo, int hi) { batch_panels(a, bf16_ws, lo, hi); });
    detail::amx_release(tiles);
    return;
  }
  if (!quant_linear_uses_amx(a)) {
    for_each_share(a.work_cursor, thread, n_threads, units, 1, [&](int lo, int hi) { batch_panels(a, ws, lo, hi); });
    return;
  }
  std::optional<AmxEmulator> emulator;
  detail::AmxQuantTiles tiles;
  if (a.amx_emulated) tiles.emulator = &emulator.emplace();
  Workspace amx_ws = ws;
  amx_ws.amx = &tiles;
  for_each_share(a.work_cursor, thread, n_threads, units, 1, [&](int lo, int hi) { batch_panels(a, amx_ws, lo, hi); });
  detail::quant_amx_release(tiles);  // so that context switches stop saving the tile state
}

}  // namespace slab::kern
