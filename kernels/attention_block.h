#pragma once
// Internal to attention*.cpp: one KV block of one work item, described with plain pointers so
// that the scalar and AVX-512 implementations share the driver in attention.cpp.
#include <cstddef>

#include "kernels/amx_tiles.h"
#include "kernels/bf16.h"

namespace slab::kern::detail {

// The most tokens, and KV blocks, one call of the AMX block takes from a prefill item (a span).
inline constexpr int kAttnAmxSpanTokens = 128;
inline constexpr int kAttnAmxSpanMaxBlocks = kAttnAmxSpanTokens / 32;

// Online-softmax update of m query vectors with the nt tokens of one KV block:
//   s[i][t] = q[i] · k[t] for t in [lo[i], hi[i]) (other tokens are masked out),
//   mx'[i] = max(mx[i], max_t s[i][t]), p = exp(s - mx'),
//   l[i] = l[i] exp(mx[i] - mx'[i]) + sum_t p, o[i] = o[i] exp(mx[i] - mx'[i]) + sum_t p v[t].
// q is prescaled (scale folded in), [m][hd]; k, v are FP32 [nt][hd] (scalar path; rows in
// [lo, hi) are read); s is scratch [m][lds]. The AVX-512 block reads K as BF16 from kraw
// ([nt][hd], rows in [lo, hi) only) with Q split into BF16 hi + lo parts (qhl, from
// stage_q_hilo_avx512), so vdpbf16ps computes q·k to ~2^-16 relative without widening K; V
// likewise from vraw, with P split the same way. A vector with lo >= hi is left untouched; a
// vector that has seen no token yet has mx = -inf, l = 0, o = 0.
struct AttnBlock {
  const float* q = nullptr;
  const float* k = nullptr;
  const bf16_t* kraw = nullptr;
  bool k_tiled = false;          // AVX-512/AMX: kraw is the block's K in the tiled order (kv_tiled_k_offset)
  float* kt = nullptr;           // AVX-512: scratch for the transposed K, >= block_size * hd floats
  const bf16_t* vraw = nullptr;  // AVX-512: V as BF16 [nt][hd], rows in [lo, hi) only
  const float* qhl = nullptr;
  // Lines to prefetch while computing (a later block of the item): K lines then V lines. The
  // AVX-512 block spreads them over its score loop two at a time, into L1, *pf_next counting the
  // ones issued; the AVX2 blocks over their chunks of tokens and the AMX block over its vectors
  // (prefetch_stream); the scalar block gets them from the driver.
  const char* pf_k = nullptr;
  const char* pf_v = nullptr;
  int pf_lines = 0;  // of each of K and V
  int* pf_next = nullptr;
  const float* v = nullptr;
  // AVX2 one-vector block: k and v as writable scratch, which it fills from kraw / vraw (rows in
  // the vectors' [lo, hi) only) as its first vector's scores go.
  float* k_widen = nullptr;
  float* v_widen = nullptr;
  float* s = nullptr;
  int lds = 0;
  float* o = nullptr;
  float* mx = nullptr;
  float* l = nullptr;
  const int* lo = nullptr;
  const int* hi = nullptr;
  int m = 0;
  int nt = 0;
  int hd = 0;
  // AMX prefill spans (attention.cpp's kAmxSpanTokens): with span_block > 0 the block is a run of
  // KV blocks of span_block tokens each (a multiple of 32), token t of the run in block
  // t / span_block; k_span / v_span hold each block's K (tiled or not, as k_tiled says) and V
  // (null for blocks outside every vector's range: never read); kraw and vraw are then unused,
  // and a row-major K is transposed into kt, span_block · hd / 2 floats a block.
  int span_block = 0;
  const bf16_t* const* k_span = nullptr;
  const bf16_t* const* v_span = nullptr;
  bool round_p_to_bf16 = false;  // AVX-512: P as its BF16 hi part only (see attention.h)
  bool fp32_products = false;    // AVX-512: K and V widened, FP32 FMAs instead of vdpbf16ps (see attention.h)
};

// Lines [from, to) of the block's prefetch stream (pf_k's lines, then pf_v's) into L1, or with
// Locality 2 into L2; returns to. The AVX2 and AMX blocks spread the stream over their chunks of
// tokens or vectors: issued all at once at the start of a block, as the driver did, the
// prefetches did not land, and the AVX2 blocks' K/V widening waited on memory (1.3-1.45x slower
// decode attention on Zen 5).
template <int Locality = 3>
inline int prefetch_stream(const AttnBlock& b, int from, int to) {
  for (int l = from; l < to; ++l) {
    __builtin_prefetch(l < b.pf_lines ? b.pf_k + 64 * l : b.pf_v + 64 * (l - b.pf_lines), 0, Locality);
  }
  return to;
}
// The lines to issue per chunk when the stream is spread over `chunks` chunks.
inline int prefetch_share(const AttnBlock& b, int chunks) {
  return (2 * b.pf_lines + chunks - 1) / (chunks > 0 ? chunks : 1);
}

// Scratch of the AVX2 vectors-in-lanes block (attention_lanes_avx2.cpp).
struct LanesScratch {
  int width = 0;              // floats a row of Q^T, S^T and O^T: lanes_width_avx2(m)
  const float* qt = nullptr;  // Q^T from stage_qt_avx2
  float* s = nullptr;         // S^T then P: block_size rows
  float* ot = nullptr;        // O^T: hd rows, carried across the item's blocks
  // K and V of the block widened to FP32 [nt][hd] (rows [lo, hi) of the item), which the block
  // writes from AttnBlock::kraw / vraw as it goes, a chunk of tokens ahead of the scores.
  float* k = nullptr;
  float* v = nullptr;
};

// Scratch of the AMX prefill block (attention_amx.cpp). Its tiles are 16 vectors high, so the
// item's staged Q (AttnBlock::qhl), scores s and sums o hold round16(m) vectors, those past m zero.
struct AmxScratch {
  bf16_t* p = nullptr;     // P in BF16 [round16(m)][ldp] (A tiles of 16 vectors × 32 tokens), zero
  bf16_t* p_lo = nullptr;  // outside each vector's tokens; p_lo its lo part (P split, not rounded)
  int ldp = 0;             // round32(block_size)
  bf16_t* vt = nullptr;    // V as B tiles of token pairs: ldp / 32 steps × head_dim / 16 tiles of 512
};
inline int amx_attention_ldp(int block_size) { return (block_size + 31) / 32 * 32; }
inline size_t amx_attention_vt_elems(int block_size, int hd) {
  return static_cast<size_t>(amx_attention_ldp(block_size)) / 32 * static_cast<size_t>(hd / 16) * 512;
}

// The tokens some vector of the block sees: [lo, hi) over its vectors' ranges, hi = -1 if none.
struct TokenRange {
  int lo = 1 << 30, hi = -1;
};
inline TokenRange visible_tokens(const AttnBlock& b) {
  TokenRange r;
  for (int i = 0; i < b.m; ++i) {
    if (b.lo[i] >= b.hi[i]) continue;
    r.lo = r.lo < b.lo[i] ? r.lo : b.lo[i];
    r.hi = r.hi > b.hi[i] ? r.hi : b.hi[i];
  }
  return r;
}

void attn_block_scalar(const AttnBlock& b);
void attn_block_avx2(const AttnBlock& b);  // the scalar block's inputs; hd % 8 == 0
void attn_block_avx512(const AttnBlock& b);
// The same update on the AMX-BF16 tiles (attention_amx.cpp): b as for attn_block_avx512 (Q staged
// hi + lo), head_dim a multiple of 32; configures `tiles` on first use (amx_release after).
void attn_block_amx(const AttnBlock& b, const AmxScratch& w, AmxTiles& tiles);
// The same block with every tile call a no-op (NoTiles): its AVX-512 work alone, for
// bench_attention_block; its results are meaningless. Needs AVX-512 BF16, not AMX.
void attn_block_amx_avx512_work(const AttnBlock& b, const AmxScratch& w);
// The driver's widening of a K or V block for the scalar and AVX2 blocks.
void convert_bf16_to_f32_avx2(float* dst, const bf16_t* src, size_t n);
// Floats per query vector of the staged hi/lo Q.
inline size_t q_hilo_floats(int hd) { return static_cast<size_t>((hd + 31) / 32) * 32; }
// dst[v] (q_hilo_floats(hd) floats each) = BF16 hi parts of q[v] in 32-element chunks, then the
// BF16 lo parts (q - hi), zero-padded to a multiple of 32 elements.
void stage_q_hilo_avx512(float* dst, const float* q, int m, int hd);
// The AVX2 block's row width: m rounded up to its register groups (16 from 16 vectors, else 8).
inline int lanes_width_avx2(int m) { return m >= 16 ? (m + 15) / 16 * 16 : (m + 7) / 8 * 8; }
// The AVX2 vectors-in-lanes block (FP32): b.k and b.v hold the widened block as for
// attn_block_avx2; uses w.qt (from stage_qt_avx2), w.s and w.ot, rows of w.width floats; mx and
// l hold w.width entries.
void attn_block_lanes_avx2(const AttnBlock& b, const LanesScratch& w);
// qt[d · lanes_width_avx2(m) + v] = q[v · hd + d], zero for v >= m.
void stage_qt_avx2(float* qt, const float* q, int m, int hd);

}  // namespace slab::kern::detail
