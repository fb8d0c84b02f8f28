#pragma once
// out[M,N] = x[M,K] · W[N,K]ᵀ (+ bias[N]) (+ residual[M,N]) with BF16 inputs and FP32
// accumulation: the nn.Linear of every projection.
//
// Dtypes: W is packed once at load into BF16 panels (below). Activations x are BF16 rows (the
// producer writes them once per layer; kernels/bf16.h converts). The output is FP32 (the
// residual stream, logits) or BF16 (input of the next linear), with the epilogue fused.
//
// Packed layout: W is cut into panels of 32 output columns (N padded with zero columns to a
// multiple of 32). A panel stores K/2 k-pairs (K padded with a zero to even), and for each
// k-pair 32 columns × 2 BF16: element [panel][pair][col][j] = W[32·panel + col][2·pair + j].
// One k-pair of one panel is 128 bytes = two zmm, the operand of vdpbf16ps against a broadcast
// pair of x. Panels follow each other, so a thread's range of panels is one linear stream.
//
// Threads: the caller runs linear_bf16_compute(args, thread, n_threads) once on every thread
// (any pool; kernels know none); when linear_bf16_needs_reduce(m, n, k, n_threads) it then runs
// linear_bf16_reduce on every thread after all computes finished (a second dispatch). The
// template linear_bf16(args, n_threads, run_on_all) below does both.
//
// Work split: M ≤ 8 (decode) streams every weight byte once for all M rows: threads take runs
// of 8 panels from a shared counter (see work_cursor; or fixed contiguous shares), each panel
// over the whole of K with M×32 or M×64 accumulators in
// registers; with fewer panels than threads K is split and the partial sums are reduced in the
// second phase. M > 8: K blocked (args.blocking; 512 elements by default) so the block of
// weights (32 KB per panel) stays in L1/L2 while every row tile passes over it, and the row
// tiles prefetch the next block into L2 between them; 8×32 register tiles up to M = 16, 6×64
// (by default) beyond; threads take tasks of a column group × a row range (rows cut so that
// there are ~8 tasks per thread) one at a time from the counter, or fixed contiguous shares.
//
// AMX (args.amx, M >= 9, K % 32 == 0): the same split over column groups of 2 panels and row
// tiles of 32 rows; each (row tile, panel) is one pass of tdpbf16ps over the whole of K with the
// sums in the 4 C tiles (no K blocking: the group's panels stay in L2 while the thread's row
// tiles pass), then the AVX-512 epilogue. Needs no workspace.
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"

namespace slab::kern {

inline constexpr int kPanelCols = 32;

inline int packed_panels(int n) { return (n + kPanelCols - 1) / kPanelCols; }
inline int packed_pairs(int k) { return (k + 1) / 2; }
// Elements (bf16) of the packed form of an [n, k] matrix.
inline size_t packed_bf16_elems(int n, int k) {
  return static_cast<size_t>(packed_panels(n)) * static_cast<size_t>(packed_pairs(k)) * 2 * kPanelCols;
}

// Packs W[n][k] (row stride ldw elements) into dst (packed_bf16_elems(n, k) elements; 64-byte
// alignment recommended). FP32 sources are rounded to nearest even.
void pack_linear_bf16(bf16_t* dst, const float* w, int n, int k, size_t ldw);
void pack_linear_bf16(bf16_t* dst, const bf16_t* w, int n, int k, size_t ldw);

// Fused SwiGLU (the MLP's gate and up projections followed by SiLU(gate)·up): gate[n][k] and
// up[n][k] are packed as alternating panels, gate columns [32i, 32i + 32) in panel 2i and the
// same up columns in panel 2i + 1 (each padded with zero columns to 32), so one 64-column tile
// holds both operands of 32 outputs and the activation runs on its sums while they are in L1.
// The packed matrix has logical n = 2 · n_out (PackedBf16{data, 2 * n_out, k}).
inline size_t packed_swiglu_elems(int n_out, int k) { return 2 * packed_bf16_elems(n_out, k); }
void pack_swiglu_bf16(bf16_t* dst, const float* gate, const float* up, int n_out, int k, size_t ldw);
void pack_swiglu_bf16(bf16_t* dst, const bf16_t* gate, const bf16_t* up, int n_out, int k, size_t ldw);

// Cache blocking and register tile of the M > 8 paths. The defaults are what every CPU measured
// so far runs well with; runtime/cpu_features.h (linear_blocking_for) picks per
// microarchitecture, and bench_linear_bf16 --sweep measures the candidates on a machine.
struct LinearBlocking {
  // AVX-512 / AVX2 / scalar: K block (k-pairs) whose weights stay in L1/L2 while every row tile
  // of the thread passes over them; 32..4096.
  int k_block_pairs = 256;
  // Register tile for M > 16 (AVX-512 and scalar): 6 × 64 (tile_rows 6, tile_panels 2), 4 × 64,
  // 8 × 32, ...: tile_panels 1 takes 1..8 rows, 2 takes 1..6. SwiGLU needs both halves of a pair in
  // one tile and uses 2 panels (6 rows when tile_panels is 1). AVX2 keeps 6 × 64 and K blocks of
  // at most 256 pairs (its FP32 blocks).
  int tile_rows = 6;
  int tile_panels = 2;
  bool prefetch = true;  // the row tiles prefetch the next K block into L2
  // AMX: 0 passes each (32-row tile, panel) over the whole of K with x read in place. Else K is
  // blocked by this many elements (a multiple of 32, >= 64): the group's weight block stays in L1
  // while the row tiles pass, each row tile's x block is first copied to a contiguous buffer
  // (one 2 KB A-tile pair per 32 elements: rows of x 4 KB apart all fall in one L1 set), and the
  // C tiles go to the per-thread workspace between blocks.
  int amx_k_block = 0;
  // AMX work split. From this many rows, as prefill: column groups of two panels (a row tile's x,
  // from L3 at 512 rows, serves both panels' passes) with a group's rows cut over threads when
  // there are under ~8 tasks a thread, as the AVX-512 tiles split. Below it, as a batched decode
  // step: groups of one panel over every row, rows cut only where there are fewer groups than
  // threads, since each row part streams the group's weights again. On two Xeon cores 64-row O
  // and down projections of Qwen2.5-0.5B ran 1.3-1.4x slower with their rows cut in two
  // (bench/results/2026-12-01-xeon-2c-amx-groups), the cut the prefill rule made of TinyLlama's
  // QKV, O and down at 64 rows on 16 threads.
  int amx_prefill_min_m = 128;
  // AMX below amx_prefill_min_m rows (K not blocked): the first row tile's pass over each panel
  // of a task prefetches the panel this many bytes ahead into L2, 0 for none (the hardware
  // prefetcher alone). A multiple of 64 in 1024..65536. On two Xeon cores with one-panel groups,
  // 16 KB ahead ran TinyLlama's linears at 32 and 64 rows 1.03-1.14x faster and left 12-16 rows
  // level (bench/results/2026-12-01-xeon-2c-amx-groups; with two-panel groups, 2026-11-30's
  // amx-streaming study had found nothing).
  int amx_prefetch_bytes = 16384;
  // Threads take their work from a shared counter (work_cursor; kernels/work_split.h says why),
  // or, false, fixed contiguous shares: the baseline the dynamic split is measured against.
  bool dynamic_split = true;
  // AVX-512 decode of 5..8 rows (one 32-column panel per tile): software prefetch of the panel
  // this many bytes ahead into L2, 0 for none (the hardware prefetcher alone). Up to 4 rows the
  // two-panel tile keeps the memory stream full without it. A multiple of 64 in 1024..65536.
  int decode_prefetch_bytes = 0;
  // AVX-512, M > 8 without AMX: widen the K block's weights to FP32 once (the first row tile
  // writes them to a per-thread buffer) and multiply with 512-bit FMAs, as the AVX2 path does,
  // instead of vdpbf16ps on the packed pairs. Where vdpbf16ps issues one every two cycles and the
  // FMA two a cycle (the Xeons measured: 64 against 32 flops a cycle), FP32 products double the
  // peak; on Zen 4/5 the dot product is the faster. Tiles are 6 x 64 in this form. The runner
  // runs attention's AVX-512 block on FP32 products where this is set (AttentionArgs::fp32_products).
  bool fp32_products = false;
};
// Throws std::invalid_argument naming the field that is out of range.
void check_linear_blocking(const LinearBlocking& b);

// A packed matrix: plain pointer and its logical shape.
struct PackedBf16 {
  const bf16_t* data = nullptr;
  int n = 0;
  int k = 0;
};

// The activation of a fused gated MLP (swiglu below): SiLU (Llama, Qwen, Phi) or GeLU-tanh (Gemma).
enum class GatedAct { silu, gelu_tanh };

struct LinearArgs {
  const bf16_t* x = nullptr;  // [m][k], row stride ldx elements
  size_t ldx = 0;
  PackedBf16 w;
  int m = 0;
  float* out_f32 = nullptr;  // exactly one of out_f32 / out_bf16; row stride ldo elements
  bf16_t* out_bf16 = nullptr;
  size_t ldo = 0;
  const float* bias = nullptr;      // [n] or null
  const float* residual = nullptr;  // [m][n] row stride ldr, or null; may equal out_f32 (in place)
  size_t ldr = 0;
  float* workspace = nullptr;  // linear_bf16_workspace_floats(...) floats, 64-byte aligned
  Isa isa = Isa::scalar;
  // W packed by pack_swiglu_bf16: out_bf16[m][w.n / 2] = SiLU(x·gateᵀ)·(x·upᵀ). Needs out_bf16
  // and no bias or residual. Never split over K; M > 8 uses the 6×64 tile for every M.
  bool swiglu = false;
  GatedAct gated_act = GatedAct::silu;  // with swiglu: the activation applied to gate
  // When set (to 0 before the call), threads take runs of panels (M <= 8 without split K) or
  // tasks (M > 8) from this shared counter instead of a fixed contiguous share, so a thread that
  // the OS, a co-tenant or the memory system slows down costs at most one run of waiting at the
  // end. linear_bf16() below sets it when blocking.dynamic_split; a caller running the phases
  // itself may leave it null (static shares).
  int* work_cursor = nullptr;
  // M >= 9 with K a multiple of 32 and isa avx512_bf16: run on the AMX tiles (tdpbf16ps) instead
  // of the AVX-512 register tiles. Set only where cpu_features() has amx_bf16 and
  // enable_amx_tiles() (runtime/cpu_features.h) returned true; other shapes ignore it.
  bool amx = false;
  // Tests: the AMX path with its tile instructions run on kern::AmxEmulator (kernels/amx_tiles.h),
  // on any CPU with the AVX-512 BF16 kernels (the epilogue is AVX-512); takes precedence over amx.
  bool amx_emulated = false;
  LinearBlocking blocking;
};

// Scratch the call needs (0 for many shapes; then workspace may be null). Depends on the
// thread count, so size it for the pool that runs the call.
size_t linear_bf16_workspace_floats(int m, int n, int k, int n_threads, bool swiglu = false);
bool linear_bf16_needs_reduce(int m, int n, int k, int n_threads, bool swiglu = false);

// Whether a call with these arguments runs on the AMX tiles (args.amx and an AMX shape).
bool linear_bf16_uses_amx(const LinearArgs& args);

// Phase 1, on every thread t in [0, n_threads). Writes out (or, split-K, partial sums).
void linear_bf16_compute(const LinearArgs& args, int thread, int n_threads);
// Phase 2 (only when linear_bf16_needs_reduce), on every thread after every phase 1 finished.
void linear_bf16_reduce(const LinearArgs& args, int thread, int n_threads);

// Both phases through the caller's pool: run_on_all(f) must call f(thread, n_threads) once on
// each of n_threads threads and return when all have (ThreadPool::run_on_all does).
template <typename RunOnAll>
void linear_bf16(const LinearArgs& args, int n_threads, RunOnAll&& run_on_all) {
  int cursor = 0;
  LinearArgs a = args;
  if (args.blocking.dynamic_split) a.work_cursor = &cursor;
  run_on_all([&a](int thread, int threads) { linear_bf16_compute(a, thread, threads); });
  if (linear_bf16_needs_reduce(args.m, args.w.n, args.w.k, n_threads, args.swiglu)) {
    run_on_all([&args](int thread, int threads) { linear_bf16_reduce(args, thread, threads); });
  }
}

}  // namespace slab::kern
