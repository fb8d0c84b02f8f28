#pragma once
// out[M,N] = x[M,K] · W[N,K]ᵀ (+ bias[N]) (+ residual[M,N]) with W quantized to INT8 or INT4:
// the quantized sibling of kernels/linear_bf16.h (same activations, outputs and epilogue).
//
// Formats (QuantFormat): W8 = 8-bit weights, W4 = 4-bit weights; a scale per output column and
// per group of `group` elements along K (32 or 128), or one group for the whole row (group 0,
// per output channel); either symmetric (zero implied: 128 for W8, 8 for W4) or with a stored
// zero point per group (AWQ-style). Every weight is held as an unsigned code, so that
//   W[n][k] = scale[n][g] · (code[n][k] − zero[n][g]),  g = k / group,
// W8 codes are int8 values + 128 (0..255), W4 codes 0..15. Scales and zeros are BF16. Zeros are
// any finite real: integers in [0, top code] for RTN/AWQ, fractional (and anywhere) for GGUF's
// Q4_1/Q5_1/Q4_K/Q5_K, whose w = d·q − m is scale d, zero m/d. The unsigned code is what makes
// INT8 activations cheap: vpdpbusd multiplies unsigned bytes by signed ones, codes are the
// unsigned side and the activations (symmetric INT8) the signed side, and the zero becomes
// zero · Σx per group.
//
// Packed layout: panels of 16 output columns (N padded with zero-code columns), K padded to a
// multiple of the group (32 for per-channel) with codes equal to the zero, rounded (activations
// there are zero, so only the code's validity matters). A panel is
//   codes: Kp/4 (W8) or Kp/8 (W4) steps of 64 bytes; step s holds, for column c, the 32-bit
//          lane c: W8 bytes j = code[c][4s + j]; W4 byte j low nibble = code[c][8s + j], high
//          nibble = code[c][8s + 4 + j] (j = 0..3). One step is one zmm, the u8 operand of
//          vpdpbusd against a broadcast of 4 activation bytes.
//   scales: [groups][16] BF16; then, with zero points, zeros: [groups][16] BF16;
//   padded to 64 bytes, so every panel starts on a cache line.
// Panels follow each other: a thread's range of panels is one linear stream, read once per call.
//
// Kernels: W8 at M <= 8 (decode) is weight-only: each thread turns its few activation rows into
// INT16 per activation block (quant_int16_activations: a power-of-two scale per block, every
// value within 2^-15 of the block's max, quantize_row_int16_* in linear_quant_tile.h), the codes
// are widened to 16 bits and multiplied into exact INT32 block sums (vpdpwssd, vpmaddwd), and one
// FP32 epilogue per block scales them: every ISA gives the same bits.
// Everything else (M > 8, and W4 at any M: quant_int8_activations) quantizes each activation
// row to INT8 in blocks along K (dynamic, symmetric, one scale per block: max|x| / 127 over the
// block, as llama.cpp's Q8_0 activations; one scale per row cost 2-3x the KL divergence,
// bench/README), in a first phase for M > 8 and by each thread for its own use at M <= 8, then
// multiplies with vpdpbusd (AVX-512 VNNI; vpmaddubsw/vpmaddwd on AVX2) into INT32 block sums.
// The block (quant_act_block) is 32 elements, or 128 where the weights' own scale spans 128 or
// more (g128, and per-channel with the padded K a multiple of 128): the FP32 epilogue runs once
// per block, and at 32 it was the tiles' main cost beside vpdpbusd. Measured on the random
// TinyLlama (bench/README): w4g128's KL is unchanged (0.2060 vs 0.2065, within its ± 0.0008),
// w8's rises from 0.0025 to 0.0029; prefill 512 ran 1.10x (w8) and 1.16-1.30x (w4g128) faster. W4 decode does so because expanding nibbles to BF16 or FP32 made it
// compute-bound (AVX2: 37 % of the read bandwidth at M = 1) while its INT8 rounding is far below
// the 4-bit weights' (KL of a Q4_0 file 0.1834 vs 0.1829 weight-only); W8 decode takes INT16 ones,
// where INT8 would be a visible share of its error. The integer part
//   d[r][n][b] = Σ_{k in b} xq[r][k] · code[n][k] − zero[n][g(b)] · Σ_{k in b} xq[r][k]
// is exact for integer zeros up to 255 (and the one rounding of the exact value for others: the
// zero term is applied in FP32, fma(−zero, float(Σxq), float(Σ xq·code)), both sums below 2^24),
// and the epilogue accumulates FP32 totals block by block:
//   per output channel (one weight group): out = scale[n] · Σ_b fma(xscale[r][b], float(d), ·)
//   grouped weights:                       out = Σ_b fma(scale[n][g(b)] · xscale[r][b], float(d), ·)
// Every ISA does that same arithmetic in the same order, so batched results are bit-identical
// across ISAs.
//
// Fused gated MLP (swiglu below): a tile takes gate panel p and up panel p + n_out / 16 as its two
// panels (QuantTile::panel_stride) and the epilogue writes act(gate)·up as BF16; threads then split
// gate panels instead of panels (pairs).
//
// Threads: M > 8 first runs quant_linear_prepare on every thread (each quantizes a share of the
// rows into the shared workspace), then quant_linear_compute on every thread; M <= 8 needs only
// the second phase (each thread copies or quantizes the few activation rows it reads into its
// own part of the workspace). The template quant_linear(args, run_on_all) below does both. Work
// split: M <= 8 runs of 8 panels from a shared counter (or fixed contiguous shares), each panel
// over the whole of K for all rows at once; M > 8 pairs of panels (32 columns) over the whole of
// K, the row tiles (6 rows W8, 4 rows W4) passing over the pair while it stays in L2.
//
// K-quant formats (QuantFormat::k_quant): GGUF's Q4_K, Q5_K and Q6_K kept in their own structure,
// so a file's bytes per weight stay what they are (4.625, 5.625 and 6.625 packed, against 4.5, 5.5
// and 6.5625 in the file; repacked as W4/W8 g32 they took 5, 9 and 8.5). Codes and scales live in
// super-blocks of kKQuantSuperK elements of K with FP16 super-scales (exact: the file's halves):
//   4-bit (Q4_K), 5-bit (Q5_K): w = d·sc[g]·code − dmin·m[g], sc and m 0..63 per group of 32,
//                               code 0..15 / 0..31;
//   6-bit (Q6_K): w = d·sc[j]·(code − 32), sc int8 per sub-group of 16, code 0..63.
// A panel is its super-blocks' records one after another (one stream; detail::kquant_layout):
//   8 code blocks of 4 steps (32 k), each the 4 steps' nibbles and then their high bits, so that a
//   record reads forward (a second stream of high bits in every record defeated Zen 2's hardware
//   prefetcher, bench/results/2026-11-29-epyc-zen2-2c-kquant-four-streams):
//     nibbles: 4 steps of 64 bytes, as W4 (low nibble k = 8s + j, high nibble 8s + 4 + j);
//     5-bit only, fifth bits: 4 steps of 16 bytes; byte i holds the top bits of lane bytes i,
//       i + 16, i + 32, i + 48 (bits 0-3 their low-nibble codes', 4-7 their high-nibble codes'):
//       a shift per 128-bit lane puts each at bit 4 (AVX-512: vpsllvd / vpsrlvd with a count
//       per lane; AVX2: the upper lane's copy shifted right by one once a step, then one
//       immediate shift per 32 lane bytes), then one and; 64-bit masks in lane order took five
//       operations per 32 lane bytes on AVX2 (bench/results/2026-11-30-epyc-zen2-2c-q5k-fifth-bits);
//     6-bit only, high bits: 4 steps of 32 bytes; byte i holds the top two bits of lane byte i
//       (bits 0-1 its low-nibble code, 2-3 its high-nibble code) and of lane byte i + 32 (4-7);
//   d[16] FP16, 4/5-bit: dmin[16] FP16; sub-scales [groups][16]; 4/5-bit: mins [8][16]; padding
//   to 64.
// They always take INT8 activations (the blocks of 32 above), at every M. Per block b of 32,
// with dot = Σ xq·code over the block (integers, exact):
//   4/5-bit: total = fma(xscale, fma(−dmin·m, Σxq, (d·sc)·dot), total)
//   6-bit: per half j of the block (16 elements, dot_j − 32·Σxq_j exact):
//          total = fma(xscale·(d·sc[j]), dot_j − 32·Σxq_j, total), first half first.
// The products d·sc and dmin·m are exact in FP32; every ISA rounds the same operations.
//
// AMX (QuantLinearArgs::amx, M >= quant_amx_min_m(format), every format): the same integer sums on the
// AMX INT8 tiles in 32-row tiles and the same FP32 epilogue (linear_quant_amx.cpp).
//
// Isa::avx512_bf16 here needs AVX-512 VNNI as well (CpuFeatures::has_avx512_quant_kernels()).
#include <cstddef>
#include <cstdint>

#include "kernels/bf16.h"
#include "kernels/linear_bf16.h"  // GatedAct

namespace slab::kern {

inline constexpr int kQuantPanelCols = 16;
inline constexpr int kQuantDecodeMaxM = 8;      // up to here: weight-only, one pass over W for all rows
inline constexpr int kQuantActBlock = 32;       // elements of K per INT8 activation scale (quant_act_block)
inline constexpr int kQuantWideActBlock = 128;  // the same for per-channel and g128 weights
inline constexpr int kKQuantSuperK = 256;       // K-quant formats: elements of K per super-block

struct QuantFormat {
  int bits = 8;             // 8 or 4; 4, 5 or 6 with k_quant
  int group = 0;            // 32 or 128 along K; 0: one group per output channel (k_quant: 32 or 16)
  bool zero_point = false;  // a stored zero per group; else 128 (W8) / 8 (W4); k_quant: the mins
  bool k_quant = false;     // super-block layout (above): {4|5, 32, true} Q4_K/Q5_K, {6, 16, false} Q6_K
};
inline QuantFormat kquant4_format() { return {4, 32, true, true}; }
inline QuantFormat kquant5_format() { return {5, 32, true, true}; }
inline QuantFormat kquant6_format() { return {6, 16, false, true}; }

// Shape helpers of the packed form.
int quant_padded_k(const QuantFormat& f, int k);
// Elements of K per INT8 activation scale for weights of format f (above).
int quant_act_block(const QuantFormat& f, int k);
int quant_groups(const QuantFormat& f, int k);
int quant_group_size(const QuantFormat& f, int k);  // elements of K per group (padded K if 0)
inline int quant_panels(int n) { return (n + kQuantPanelCols - 1) / kQuantPanelCols; }
size_t quant_panel_bytes(const QuantFormat& f, int k);
inline size_t packed_quant_bytes(const QuantFormat& f, int n, int k) {
  return static_cast<size_t>(quant_panels(n)) * quant_panel_bytes(f, k);
}
// Throws std::invalid_argument unless bits is 4 or 8 and group 0, 32 or 128, or the format is one
// of the two K-quant ones.
void check_quant_format(const QuantFormat& f);

// Round-to-nearest quantization of W[n][k] (row stride ldw) into dst (packed_quant_bytes,
// 64-byte alignment recommended). Symmetric W8: scale = max|w| / 127, q = round(w / scale)
// clamped to [-128, 127]. Symmetric W4: scale = -w_extreme / 8 (w_extreme the group's weight of
// largest |w|, so it gets q = -8 and the scale may be negative), q = round(w / scale) clamped to
// [-8, 7]. With zero points:
// scale = (max − min) / (2^bits − 1) over the group (min ≤ 0 ≤ max), zero = round(−min / scale).
// Scales are rounded to BF16 before the codes are computed from them.
void pack_quant_linear(uint8_t* dst, const QuantFormat& f, const float* w, int n, int k, size_t ldw);
void pack_quant_linear(uint8_t* dst, const QuantFormat& f, const bf16_t* w, int n, int k, size_t ldw);

// From already-quantized weights (a checkpoint's int values and scales). codes[n][k] (row stride
// ldc): W8 the unsigned code (int8 value + 128), W4 0..15 one per byte. scales[n][groups] and
// zeros[n][groups] (zeros only with f.zero_point: any finite reals, else std::invalid_argument).
// Scales and zeros are rounded to BF16.
void pack_quant_linear_codes(uint8_t* dst, const QuantFormat& f, const uint8_t* codes, size_t ldc, const float* scales,
                             const float* zeros, int n, int k);

// K-quant weights from a checkpoint's fields (GGUF Q4_K / Q6_K blocks). k a multiple of
// kKQuantSuperK, else std::invalid_argument; so are codes or scales out of range.
struct KQuantSource {
  const uint8_t* codes = nullptr;  // [n][ldc]: 0..15, 0..31 or 0..63 (4, 5 or 6 bits)
  size_t ldc = 0;
  const uint16_t* d = nullptr;     // [n][k / 256] FP16 bits: the super-block scale
  const uint16_t* dmin = nullptr;  // [n][k / 256] FP16 bits (4/5-bit): the super-block min scale
  const int8_t* scales = nullptr;  // [n][k / group]: 0..63 (4/5-bit) or any int8 (6-bit)
  const uint8_t* mins = nullptr;   // [n][k / 32] 0..63 (4/5-bit)
};
void pack_kquant_linear(uint8_t* dst, const QuantFormat& f, const KQuantSource& src, int n, int k);

// W[n][k] back from the packed form (row stride ldw): scale · (code − zero), in FP32.
void dequantize_quant_linear(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int n, int k);
// Rows [first, first + rows) of W only (an embedding row looked up in a quantized table).
void dequantize_quant_rows(float* w, size_t ldw, const uint8_t* packed, const QuantFormat& f, int k, int first,
                           int rows);

struct PackedQuant {
  const uint8_t* data = nullptr;
  QuantFormat format;
  int n = 0;
  int k = 0;
};

struct QuantLinearArgs {
  const bf16_t* x = nullptr;  // [m][k], row stride ldx elements
  size_t ldx = 0;
  PackedQuant w;
  int m = 0;
  float* out_f32 = nullptr;  // exactly one of out_f32 / out_bf16; row stride ldo elements
  bf16_t* out_bf16 = nullptr;
  size_t ldo = 0;
  const float* bias = nullptr;      // [n] or null
  const float* residual = nullptr;  // [m][n] row stride ldr, or null; may equal out_f32 (in place)
  size_t ldr = 0;
  void* workspace = nullptr;  // quant_linear_workspace_bytes(...) bytes, 64-byte aligned
  Isa isa = Isa::scalar;
  // When set (to 0 before phase 2), threads take runs of panels from this shared counter instead
  // of a fixed contiguous share, as linear_bf16 does. quant_linear() below sets it when
  // dynamic_split (packed_linear copies LinearBlocking::dynamic_split).
  int* work_cursor = nullptr;
  bool dynamic_split = true;
  // Fused gated MLP: w holds [gate; up] stacked (n = 2 · n_out rows, n_out a multiple of 16, see
  // quant_swiglu_fusable) and out_bf16[m][n_out] = act(x·gateᵀ)·(x·upᵀ), act SiLU or GeLU-tanh.
  // Each tile pairs gate panel p with up panel p + n_out / 16, so the activation runs on the sums
  // while they are in L1 and no FP32 [m][2 · n_out] ever exists. Needs out_bf16, no bias or residual.
  bool swiglu = false;
  GatedAct gated_act = GatedAct::silu;
  // M >= quant_amx_min_m and isa avx512_bf16, any format: the INT8 activations multiply on the AMX
  // tiles (TDPBSUD, 32-row tiles) instead of the AVX-512 register tiles, with identical results
  // (linear_quant_amx.cpp). Set only where amx_int8_usable() (runtime/cpu_features.h); other
  // shapes ignore it.
  bool amx = false;
  // Tests: the AMX path with its tile instructions run on kern::AmxEmulator (kernels/amx_tiles.h),
  // on any CPU with the AVX-512 quantized kernels; takes precedence over amx. With either set, the
  // workspace must come from quant_linear_workspace_bytes(..., amx = true).
  bool amx_emulated = false;
  // Prefill (M >= quant_amx_bf16_min_m, K a multiple of 32, isa avx512_bf16, weights whose
  // quant_act_block is kQuantActBlock: groups of 32, the K-quants) on the AMX-BF16 tiles: each
  // panel pair is dequantized once per call to a BF16 panel and the BF16 activations multiply on
  // it with TDPBF16PS (linear_quant_amx_bf16.cpp), 2.5-3x the INT8 tiles' rate where their
  // 32-element blocks' epilogue binds (128-element blocks stay on the INT8 tiles, faster there). Takes precedence over amx for those shapes; with amx_emulated
  // the tiles run on the emulator. Not bit-identical to the INT8 paths: each weight is rounded to
  // BF16 (≤ 2^-9 of itself) and the activations are not quantized. Set only where
  // amx_bf16_usable(); the workspace then comes from quant_linear_workspace_bytes(..., amx_bf16 =
  // true).
  bool amx_bf16 = false;
};

// The fewest rows the AMX-BF16 prefill takes (QuantLinearArgs::amx_bf16), measured with the
// weights streaming from memory as in decode (bench_linear_quant --cycle-x 1 on two Xeon cores,
// bench/results/2026-11-30-xeon-2c-quant-amx-bf16-rows; the best other path's time ÷ this one's):
// W4 g32, Q5_K and Q6_K from 20 rows (1.10-1.25 at 24), Q4_K from 40 (0.81-1.06 at 24-32,
// 1.07-1.28 at 40), W8 from 64 (0.69-0.81 at 32,
// 0.93-1.04 at 48, 1.12-1.23 at 64: the INT8 tiles read its codes as they are, while this path
// writes twice their bytes as BF16). With the weights in L2/L3 (--one-copy) every format gained
// from 32 rows.
int quant_amx_bf16_min_m(const QuantFormat& f);

// The fewest rows that run on the AMX tiles; fewer: one pass of the AVX-512 register tiles keeps
// up. W8 from 16: its codes are the tiles' bytes. W4 and the K-quants from 32: their codes are
// unpacked to bytes per panel pair first, and on two Xeon cores batch-16 decode ran 1.10-1.21x
// faster on the register tiles (Q4_0, Q4_K_M; Q8_0 0.88x), batch 32 1.04-1.06x faster on AMX
// (bench/results/2026-11-30-xeon-2c-fp32-products/batched-stream).
int quant_amx_min_m(const QuantFormat& f);
// Whether a call with these arguments runs on the AMX INT8 tiles (args.amx or amx_emulated, an
// AMX shape and format, and not the AMX-BF16 prefill).
bool quant_linear_uses_amx(const QuantLinearArgs& args);
// Whether it runs the AMX-BF16 prefill (args.amx_bf16 and its shape).
bool quant_linear_uses_amx_bf16(const QuantLinearArgs& args);

// Whether a [gate; up] matrix of n rows can run fused (swiglu above): its halves start on panels.
inline bool quant_swiglu_fusable(int n) { return n % (2 * kQuantPanelCols) == 0; }

// Scratch a call needs: the activations in the kernels' form (decode: per thread its K-padded
// INT16 rows with block scales and sums, or INT8 ones for W4; batched: INT8 rows, their block
// scales and block sums, shared); with amx, room per thread for a panel pair's codes unpacked to
// bytes (32 × padded K; not for W8); with amx_bf16 also room per thread for a panel pair in BF16
// (64 × K bytes).
size_t quant_linear_workspace_bytes(int m, const PackedQuant& w, int n_threads, bool amx = false,
                                    bool amx_bf16 = false);
// M > 8 quantizes the activations in a first phase.
inline bool quant_linear_needs_prepare(int m) { return m > kQuantDecodeMaxM; }
// Whether a call multiplies INT8 activations (else INT16 ones: W8 decode).
inline bool quant_int8_activations(const QuantFormat& f, int m) { return m > kQuantDecodeMaxM || f.bits != 8; }
// Else (W8 decode) the activations become INT16 (the Kernels paragraph above).
inline bool quant_int16_activations(const QuantFormat& f, int m) { return !quant_int8_activations(f, m); }

// Phase 1 (only when quant_linear_needs_prepare), on every thread t in [0, n_threads).
void quant_linear_prepare(const QuantLinearArgs& args, int thread, int n_threads);
// Phase 2, on every thread after every phase 1 finished. Writes out.
void quant_linear_compute(const QuantLinearArgs& args, int thread, int n_threads);

// Both phases through the caller's pool (see linear_bf16 for the run_on_all contract).
template <typename RunOnAll>
void quant_linear(const QuantLinearArgs& args, RunOnAll&& run_on_all) {
  if (quant_linear_needs_prepare(args.m) && !quant_linear_uses_amx_bf16(args)) {
    run_on_all([&args](int thread, int threads) { quant_linear_prepare(args, thread, threads); });
  }
  int cursor = 0;
  QuantLinearArgs a = args;
  if (args.dynamic_split) a.work_cursor = &cursor;
  run_on_all([&a](int thread, int threads) { quant_linear_compute(a, thread, threads); });
}

}  // namespace slab::kern
