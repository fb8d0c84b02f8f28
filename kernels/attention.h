#pragma once
// SLAB attention: causal (optionally sliding-window) grouped-query attention of a flattened batch
// of query rows over the paged BF16 KV cache.
//
// Dtypes: K and V are BF16 in the cache's block layout (src/kv/kv_cache.h:
// [layer][kv_head][K then V][token][head_dim] per block; AttnKvPool's strides say where). Q is
// FP32 (the QKV projection's FP32 output after RoPE). Scores, softmax and the P·V accumulation are FP32; the output is FP32
// [row][n_heads * head_dim] (the O projection converts it to BF16 rows).
//
// Kernel: one work item = (sequence, KV head, range of query rows, range of KV positions). The
// item's query vectors (rows × the GQA group of query heads of that KV head, at most
// kAttnMaxVectors) share every KV block read. Blocks outside the causal / window extent of the
// item's rows are never touched (causal block skipping), and within a block only the rows of
// tokens some vector can see are read (tokens past kv_len never are). Per block (AVX-512):
//   - K is read in the tiled order (16 tokens' BF16 pairs per 64 bytes: the cache keeps it so,
//     AttnKvPool::k_tiled, or it is transposed per block by 16×16 dword transposes) so that
//     scores run with tokens in lanes:
//     vdpbf16ps of a broadcast Q pair against 16 tokens' K pairs, 4 query vectors × 32 tokens
//     per pass, no horizontal reductions;
//   - online softmax in FP32 with a vectorised exp (relative error < 2e-7), 16 vectors at a time
//     with one lane each for their maxima, rescale factors and sums (softmax16);
//   - P·V by vdpbf16ps on two V rows interleaved (unpack) against broadcast P pairs.
// Every vector is computed the same way whatever else its item holds, so a row's output does
// not depend on how many rows share its item: speculative decoding's verification rows equal
// the decode rows they stand for, bit for bit. A vectors-in-lanes AVX-512 block for prefill
// tiles (Q transposed per item, vertical softmax) measured 1.06-1.07x on 512-2048-token prefill
// attention (bench/results/2026-11-27-epyc-zen4-2c-attention) but sums in another order than
// this block, which decode rows need: a batch-dependent result for 6 %. It was removed.
// Accuracy: vdpbf16ps needs BF16 operands, so Q is split into BF16 hi + lo parts
// (x = hi + lo + O(2^-16 x)) and both parts are accumulated; K and V are BF16 already, products
// are exact in FP32. Scores are therefore those of FP32 Q over the BF16 cache to ~2^-16
// relative: they matter most, since an error in a score is multiplied by exp. The softmax
// weights P are split the same way unless AttentionArgs::round_p_to_bf16, which rounds each to
// BF16 (relative error <= 2^-8 of the weight, so |out - exact| <= 2^-8 max|v|) and halves the
// P·V work, as FlashAttention does; the model runner sets it. Measured on the transformers
// fixtures: the same logit error as the split (tests/unit/test_model_runner.cpp), where
// rounding Q as well doubled it. Without round_p_to_bf16 the result matches FP32 attention
// over the BF16 cache to ~1e-5 of max|v|; the split costs two vdpbf16ps per pair, i.e. the same
// instruction count as FP32 FMA after widening K/V (measured on Zen: widening spent ~20% of
// decode time on the conversions; this path has none). Where vdpbf16ps issues at a quarter of
// the FMA's rate (the Xeons), AttentionArgs::fp32_products widens K and V in registers instead
// and multiplies in FP32: exact products, no split.
// Isa::scalar is the same algorithm in plain C++ (K/V widened to FP32, std::exp).
//
// Dispatch (plan_attention) classifies each sequence by its query length:
//   decode (q_len = 1): one item per (sequence, KV head): the block is read once for all the
//     group's heads; split-KV (items over block-aligned KV ranges, merged after) when the
//     context is long (> kAttnSplitTokens) or there are fewer items than threads;
//   multi-token (2..64 rows): rows × group heads per item (row tiles of kAttnMaxVectors / group
//     rows), the same split-KV rule;
//   prefill (> 64 rows): query tiles × KV blocks (flash attention), never split; each tile stops
//     at its last row's position.
// Items are assigned to threads at plan time, longest first onto the least loaded thread.
//
// Threads: the caller runs attention_run(args, plan, thread, n_threads) on every thread (the
// plan's n_threads), then, only when plan.needs_merge(), attention_merge on every thread after
// every run finished (a second dispatch). attention() below does both through a run_on_all.
//
// AMX (AttentionArgs::amx, head_dim a multiple of 32): the items of prefill sequences run on
// the AMX-BF16 tiles instead (attention_amx.cpp): Q·K as tdpbf16ps of the staged Q hi and lo
// parts (A tiles, 16 vectors × 32 dims) against the transposed K (each 16 columns of
// transpose_k's layout are a B tile), the same masked softmax on AVX-512 writing P as BF16 rows,
// and P·V as tdpbf16ps of P (A tiles of 32 tokens) against V relaid once per block into token
// pairs. Same accuracy as the AVX-512 block (Q split, P rounded or split), other summation
// order. Shapes of kAttnAmxMinGroup or more query heads a KV head run decode and multi-token
// items on the tiles as well (a decode item's vectors fill half a tile or more; each tile row
// depends on its own vector only), so every row of such a shape is computed one way
// and does not depend on the rows sharing its item. Shapes with smaller groups keep decode and
// multi-token rows on AVX-512: their prefill rows differ from the same rows decoded alone in the
// last bits, as the AMX linears at M >= 9 already differ from the AVX-512 ones.
// ISA: Isa::avx512_bf16 uses the AVX-512 path (needs head_dim % 16 == 0 and block_size % 16 == 0);
// Isa::avx2, and AVX-512 shapes outside those, run the scalar algorithm on 8-lane FMAs
// (attention_avx2.cpp: K/V widened to FP32, head_dim % 8 == 0), one query vector at a time, or,
// for shapes of kAttnLanesMinGroupAvx2 or more query heads a KV head, with the vectors in the
// lanes (attention_lanes_avx2.cpp: 16 vectors × 6 tokens or 8 × 8 per register block; with
// --isa avx2 on Zen 4, batch-16 decode attention 1.1-1.5x the one-vector block, prefill
// 1.03-1.07x). Chosen per shape, never per item, for the reason above. Isa::scalar and any
// other shape run it in plain C++.
#include <cstddef>
#include <cstdint>
#include <vector>

#include "kernels/bf16.h"

namespace slab::kern {

inline constexpr int kAttnMaxVectors = 64;        // query vectors sharing one KV block read
inline constexpr int kAttnLanesMinGroupAvx2 = 8;  // AVX2: vectors in the lanes from this GQA group
inline constexpr int kAttnAmxMinGroup = 8;        // AMX: decode and multi-token items too from this group
inline constexpr int kAttnMaxHeadDim = 256;
inline constexpr int kAttnMaxBlockSize = 128;
inline constexpr int kAttnDecodeMaxRows = 1;
inline constexpr int kAttnMultiMaxRows = 64;   // above: prefill
inline constexpr int kAttnSplitTokens = 1024;  // decode/multi contexts above this are split

// One layer's K and V in the BF16 block pool. Offsets and strides are in bf16 elements (the same
// numbers as KvGeometry's strides).
struct AttnKvPool {
  const bf16_t* pool = nullptr;
  int block_size = 0;
  size_t block_stride = 0;  // block -> block
  size_t k_offset = 0;      // layer's K inside a block (layer * layer_stride)
  size_t v_offset = 0;      // layer's V inside a block (k_offset + kv_stride)
  size_t head_stride = 0;   // KV head -> KV head (KvGeometry: 2 * block_size * head_dim)
  // K in the tiled order (kernels/kv_block.h, kv_tiled_k_offset), as kv_write writes it when its
  // layout says so: the AVX-512 and AMX blocks then read it as it is instead of transposing each
  // block at every read. Only for shapes where attention_k_tiled holds.
  bool k_tiled = false;
};

// One sequence of the flattened batch. Its query rows are [q_start, q_start + q_len) of q and
// out; query row i sits at position kv_len - q_len + i, and sees keys j with
// pos - window < j <= pos (window > 0) or j <= pos. Its K/V for positions [0, kv_len) are in the
// cache already (including those of its new tokens).
struct AttnSeq {
  int q_start = 0;
  int q_len = 0;
  int kv_len = 0;
  const int32_t* block_table = nullptr;  // ceil(kv_len / block_size) block ids
};

struct AttnShape {
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int block_size = 0;
  int window = 0;  // 0: no sliding window
};

enum class AttnClass : uint8_t { decode, multi, prefill };
AttnClass classify_attention(int q_len);

struct AttnWorkItem {
  int seq = 0;
  int kv_head = 0;
  int row0 = 0, row1 = 0;  // query rows of the sequence, relative to q_start
  int kv0 = 0, kv1 = 0;    // KV positions this item covers (block-aligned unless the ends)
  int64_t partial = -1;    // split-KV: offset (floats) of its partial result in the workspace
};

// Combines the n_splits partials (consecutive, partial_stride floats apart) of one row range.
struct AttnMergeItem {
  int seq = 0;
  int kv_head = 0;
  int row0 = 0, row1 = 0;
  int64_t first_partial = 0;
  int n_splits = 0;
  size_t partial_stride = 0;
};

struct AttentionPlan {
  AttnShape shape;
  int n_threads = 1;
  std::vector<AttnWorkItem> items;
  std::vector<int> order;         // item indices grouped by thread
  std::vector<int> thread_begin;  // thread t runs order[thread_begin[t] .. thread_begin[t + 1])
  std::vector<int> by_cost;       // every item, longest first: the order threads take items from
                                  // AttentionArgs::item_cursor in
  std::vector<AttnMergeItem> merges;
  size_t scratch_floats = 0;                     // per thread, at the start of the workspace
  size_t workspace_floats = 0;                   // total; the caller provides this many, 64-byte aligned
  int n_decode = 0, n_multi = 0, n_prefill = 0;  // sequences per class
  bool needs_merge() const { return !merges.empty(); }
};

// Plans one call for n_threads threads. seqs must stay valid only during the call (the plan
// copies what it needs); the same seqs are passed again in AttentionArgs.
AttentionPlan plan_attention(const AttnShape& shape, const AttnSeq* seqs, int n_seqs, int n_threads);
inline size_t attention_workspace_floats(const AttentionPlan& plan) { return plan.workspace_floats; }

struct AttentionArgs {
  const float* q = nullptr;  // [rows][n_heads * head_dim], row stride ldq floats
  size_t ldq = 0;
  float* out = nullptr;  // [rows][n_heads * head_dim], row stride ldo floats
  size_t ldo = 0;
  AttnKvPool kv;
  const AttnSeq* seqs = nullptr;
  int n_seqs = 0;
  float scale = 1.0f;
  float* workspace = nullptr;  // plan.workspace_floats floats, 64-byte aligned
  Isa isa = Isa::scalar;
  // AVX-512: P enters P·V as BF16 instead of BF16 hi + lo (see Accuracy above). The scalar and
  // AVX2 blocks compute P·V in FP32 either way.
  bool round_p_to_bf16 = false;
  // AVX-512: scores and P·V as FP32 FMAs of the FP32 Q and P against K and V widened in
  // registers, instead of vdpbf16ps (Q and P split into BF16 hi + lo): for CPUs where vdpbf16ps
  // runs at a quarter of the FMA's instruction rate (LinearBlocking::fp32_products' Intel cores).
  // Exact products; P is rounded to BF16 first where round_p_to_bf16 says so. Decode and
  // multi-token rows on the AMX tiles are not affected.
  bool fp32_products = false;
  // AVX2: shapes of kAttnLanesMinGroupAvx2 or more run the vectors-in-lanes block; false keeps
  // them on the one-vector block (tests and bench_attention --no-lanes compare the two).
  bool vectors_in_lanes = true;
  // Threads take items, longest first, from a shared counter (the template below points
  // item_cursor at one) instead of running the plan's fixed per-thread lists: a thread slowed by
  // a co-tenant or the OS then costs the others at most one item (kernels/work_split.h).
  bool dynamic_split = true;
  int* item_cursor = nullptr;  // 0 before phase 1; null: the plan's per-thread lists
  // AMX-BF16: the items of prefill sequences (AttnClass::prefill) run on the tile unit, for
  // shapes where attention_amx_shape holds, and decode and multi-token ones as well where
  // attention_amx_all_classes does (else they stay on AVX-512). Set only where cpu_features()
  // has amx_bf16 and enable_amx_tiles() returned true.
  bool amx = false;
  // Tests: the same on kern::AmxEmulator (kernels/amx_tiles.h), on any AVX-512 BF16 CPU.
  bool amx_emulated = false;
};

// Whether this shape's K may be kept in the tiled order (AttnKvPool::k_tiled): the shapes the
// AVX-512 block takes (head_dim and block_size multiples of 16) with Isa::avx512_bf16.
bool attention_k_tiled(const AttnShape& shape, Isa isa);

// Whether prefill items of this shape run on the AMX tiles when AttentionArgs::amx is set: the
// AVX-512 block's shapes with head_dim a multiple of 32.
bool attention_amx_shape(const AttnShape& shape, Isa isa);
// Whether decode and multi-token items of this shape run on the tiles too: an AMX shape with at
// least kAttnAmxMinGroup query heads a KV head.
bool attention_amx_all_classes(const AttnShape& shape, Isa isa);

// Phase 1 on every thread t in [0, plan.n_threads).
void attention_run(const AttentionArgs& args, const AttentionPlan& plan, int thread, int n_threads);
// Phase 2 (only when plan.needs_merge()) on every thread after every phase 1 finished.
void attention_merge(const AttentionArgs& args, const AttentionPlan& plan, int thread, int n_threads);

// Both phases through the caller's pool: run_on_all(f) calls f(thread, n_threads) once on each
// thread and returns when all have (ThreadPool::run_on_all does).
template <typename RunOnAll>
void attention(const AttentionArgs& args, const AttentionPlan& plan, RunOnAll&& run_on_all) {
  int cursor = 0;
  AttentionArgs a = args;
  if (args.dynamic_split) a.item_cursor = &cursor;
  run_on_all([&](int thread, int threads) { attention_run(a, plan, thread, threads); });
  if (plan.needs_merge()) {
    run_on_all([&](int thread, int threads) { attention_merge(args, plan, thread, threads); });
  }
}

}  // namespace slab::kern
