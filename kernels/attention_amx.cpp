// AMX-BF16 block of SLAB attention: Q·K and P·V as tdpbf16ps on 16-vector tiles, the online
// softmax between them on AVX-512 (see attention.h for which items run here).
//
// Per KV block of an item (m ≤ 64 query vectors, padded to whole 16-row tiles):
//   - K in the tiled order (the cache's, or transpose_k's copy; KTiles): 16 consecutive pair
//     rows of a token group, 16 × 64 bytes, are one B tile (k-pairs of head_dim × 16 tokens) as
//     they stand. The A tiles are the staged Q's hi and lo parts (16 vectors × 32 dims each),
//     both accumulated into the same C tile, so scores are FP32 Q over the BF16 cache to ~2^-16
//     as on AVX-512. C tiles go straight to the score rows s.
//   - The masked softmax (softmax16, the vectorised exp) writes P as BF16 rows, zero outside
//     each vector's tokens, over whole 32-token steps: each 16-vector stretch of a step is an A
//     tile. With AttentionArgs::round_p_to_bf16 P is rounded, else split hi + lo like Q.
//   - V is relaid once per block into B tiles of token pairs (row k: v[2k][d], v[2k + 1][d] for 16
//     dims), rows outside the block's visible tokens zero so that 0 · V never meets a NaN.
//   - O (FP32, in the item's scratch) is scaled by the softmax's alpha on AVX-512, then loaded as
//     C tiles, accumulated over the steps and stored back.
// Tiles: one configuration for everything, all 8 tiles 16 rows × 64 bytes; the 2 × 2 block of
// amx_backend.h is (2 row tiles of vectors) × (2 token groups) for scores and × (2 16-dim
// chunks) for P·V. Each row of a tile product depends only on its own A row, so a vector's
// result does not depend on the others in its item.
//
// Written against the tile backend (kernels/amx_backend.h): the hardware, or AmxEmulator in the
// tests of CPUs without AMX. Only called after cpu_features() reported amx_bf16 and
// enable_amx_tiles() got the kernel's permission (AttentionArgs::amx), or on the emulator.
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/amx_backend.h"
#include "kernels/amx_tiles.h"
#include "kernels/attention.h"
#include "kernels/attention_avx512_ops.h"
#include "kernels/attention_block.h"
#include "kernels/exp_avx512.h"

namespace slab::kern::detail {
namespace {

constexpr int kTileRows = 16;
constexpr size_t kTileRowBytes = 64;
constexpr int kStep = 32;                // tokens of one P·V step (a row of a P tile)
constexpr size_t kVTileElems = 16 * 32;  // a V tile: 16 token pairs × 16 dims × 2

template <typename Tiles>
SLAB_AMX_KERNEL void configure(AmxTiles& state, const Tiles& tiles) {
  if (state.rows == kTileRows) return;
  AmxTileConfig cfg;
  for (int t = 0; t < kAmxTiles; ++t) cfg.set(t, kTileRows, kTileRowBytes);
  tiles.load_config(cfg);
  state.rows = kTileRows;
}

// Scores of the vectors v0.. (16, or 32 with two_rows) × the token groups g.. (16 tokens, or 32
// with two_groups) into s: per 32 dims, Q's hi then lo part against the group's K tile, group kg
// of the tiles at kt (g itself outside spans).
template <typename Tiles>
SLAB_AMX_KERNEL void score_tiles(const Tiles& tiles, const AttnBlock& b, const float* kt, int v0, int g, int kg,
                                 bool two_rows, bool two_groups) {
  const int np = b.hd / 32;
  const size_t q_floats = static_cast<size_t>(32 * np);  // a staged vector: hi parts, then lo
  const size_t q_stride = q_floats * sizeof(float);
  const float* q0 = b.qhl + static_cast<size_t>(v0) * q_floats;
  const float* q1 = q0 + kTileRows * q_floats;
  const size_t group_floats = static_cast<size_t>(np) * 16 * 16;  // a group of 16 tokens (KTiles)
  const float* k0 = kt + static_cast<size_t>(kg) * group_floats;
  const float* k1 = k0 + group_floats;
  tiles.template zero<0>();
  if (two_groups) tiles.template zero<1>();
  if (two_rows) tiles.template zero<2>();
  if (two_rows && two_groups) tiles.template zero<3>();
  for (int h = 0; h < np; ++h) {
    tiles.template load<6>(k0 + 256 * static_cast<size_t>(h), kTileRowBytes);
    if (two_groups) tiles.template load<7>(k1 + 256 * static_cast<size_t>(h), kTileRowBytes);
    for (int part = 0; part < 2; ++part) {
      const size_t at = static_cast<size_t>(16 * (part * np + h));
      tiles.template load<4>(q0 + at, q_stride);
      tiles.template dpbf16ps<0, 4, 6>();
      if (two_groups) tiles.template dpbf16ps<1, 4, 7>();
      if (two_rows) {
        tiles.template load<5>(q1 + at, q_stride);
        tiles.template dpbf16ps<2, 5, 6>();
        if (two_groups) tiles.template dpbf16ps<3, 5, 7>();
      }
    }
  }
  const auto lds = static_cast<size_t>(b.lds);
  float* s = b.s + static_cast<size_t>(v0) * lds + 16 * static_cast<size_t>(g);
  tiles.template store<0>(s, lds * sizeof(float));
  if (two_groups) tiles.template store<1>(s + 16, lds * sizeof(float));
  if (two_rows) tiles.template store<2>(s + kTileRows * lds, lds * sizeof(float));
  if (two_rows && two_groups) tiles.template store<3>(s + kTileRows * lds + 16, lds * sizeof(float));
}

// V row t's 32 dims from 32c, zero outside [t_lo, t_hi).
SLAB_AMX_KERNEL inline __m512i v_row(const AttnBlock& b, int t, size_t c, int t_lo, int t_hi) {
  if (t < t_lo || t >= t_hi) return _mm512_setzero_si512();
  const auto hd = static_cast<size_t>(b.hd);
  if (b.span_block > 0) {
    return _mm512_loadu_si512(b.v_span[t / b.span_block] + static_cast<size_t>(t % b.span_block) * hd + 32 * c);
  }
  return _mm512_loadu_si512(b.vraw + static_cast<size_t>(t) * hd + 32 * c);
}

// V rows [t0, t1) as B tiles of token pairs: the tile of step s and dims 16j..16j+15 at
// w.vt + (s·hd/16 + j)·512, its row k = (v[t0 + 32s + 2k][d], v[t0 + 32s + 2k + 1][d]) for its 16
// d. Rows outside [t_lo, t_hi) are zero and not read.
SLAB_AMX_KERNEL void relayout_v(const AttnBlock& b, const AmxScratch& w, int t0, int t1, int t_lo, int t_hi) {
  alignas(64) static constexpr uint16_t kPairIdx[2][32] = {
      {0, 32, 1, 33, 2,  34, 3,  35, 4,  36, 5,  37, 6,  38, 7,  39,
       8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47},
      {16, 48, 17, 49, 18, 50, 19, 51, 20, 52, 21, 53, 22, 54, 23, 55,
       24, 56, 25, 57, 26, 58, 27, 59, 28, 60, 29, 61, 30, 62, 31, 63}};
  const __m512i lo_dims = _mm512_load_si512(kPairIdx[0]);
  const __m512i hi_dims = _mm512_load_si512(kPairIdx[1]);
  const auto hd = static_cast<size_t>(b.hd);
  const size_t tiles_per_step = hd / 16;
  for (int t = t0; t < t1; t += 2) {
    const auto step = static_cast<size_t>((t - t0) / kStep);
    const auto pair = static_cast<size_t>((t - t0) % kStep / 2);
    for (size_t c = 0; c < hd / 32; ++c) {
      const __m512i a = v_row(b, t, c, t_lo, t_hi), n = v_row(b, t + 1, c, t_lo, t_hi);
      bf16_t* dst = w.vt + (step * tiles_per_step + 2 * c) * kVTileElems + 32 * pair;
      _mm512_storeu_si512(dst, _mm512_permutex2var_epi16(a, lo_dims, n));
      _mm512_storeu_si512(dst + kVTileElems, _mm512_permutex2var_epi16(a, hi_dims, n));
    }
  }
}

// o[v0.. (16 or 32 vectors)][16j, 16j + 32) += P · V over the steps from t0.
template <typename Tiles>
SLAB_AMX_KERNEL void pv_tiles(const Tiles& tiles, const AttnBlock& b, const AmxScratch& w, int v0, int j, int t0,
                              int steps, bool two_rows) {
  const auto hd = static_cast<size_t>(b.hd);
  const size_t so = hd * sizeof(float);
  float* o = b.o + static_cast<size_t>(v0) * hd + 16 * static_cast<size_t>(j);
  tiles.template load<0>(o, so);
  tiles.template load<1>(o + 16, so);
  if (two_rows) {
    tiles.template load<2>(o + kTileRows * hd, so);
    tiles.template load<3>(o + kTileRows * hd + 16, so);
  }
  const auto ldp = static_cast<size_t>(w.ldp);
  const size_t sp = ldp * sizeof(bf16_t);
  for (int s = 0; s < steps; ++s) {
    const bf16_t* v = w.vt + (static_cast<size_t>(s) * (hd / 16) + static_cast<size_t>(j)) * kVTileElems;
    tiles.template load<6>(v, kTileRowBytes);
    tiles.template load<7>(v + kVTileElems, kTileRowBytes);
    for (const bf16_t* part : {w.p, b.round_p_to_bf16 ? nullptr : w.p_lo}) {
      if (!part) continue;
      const bf16_t* p = part + static_cast<size_t>(v0) * ldp + static_cast<size_t>(t0 + kStep * s);
      tiles.template load<4>(p, sp);
      tiles.template dpbf16ps<0, 4, 6>();
      tiles.template dpbf16ps<1, 4, 7>();
      if (two_rows) {
        tiles.template load<5>(p + kTileRows * ldp, sp);
        tiles.template dpbf16ps<2, 5, 6>();
        tiles.template dpbf16ps<3, 5, 7>();
      }
    }
  }
  tiles.template store<0>(o, so);
  tiles.template store<1>(o + 16, so);
  if (two_rows) {
    tiles.template store<2>(o + kTileRows * hd, so);
    tiles.template store<3>(o + kTileRows * hd + 16, so);
  }
}

// The block's K as KTiles (head_dim a multiple of 32: group_cols = head_dim / 2 either way).
SLAB_AMX_KERNEL KTiles k_tiles_any(const AttnBlock& b, int t_lo, int t_hi) {
  switch (b.hd / 32) {
    case 1: return block_k_tiles<2>(b, t_lo, t_hi);
    case 2: return block_k_tiles<4>(b, t_lo, t_hi);
    case 3: return block_k_tiles<6>(b, t_lo, t_hi);
    case 4: return block_k_tiles<8>(b, t_lo, t_hi);
    case 5: return block_k_tiles<10>(b, t_lo, t_hi);
    case 6: return block_k_tiles<12>(b, t_lo, t_hi);
    case 7: return block_k_tiles<14>(b, t_lo, t_hi);
    default: return block_k_tiles<16>(b, t_lo, t_hi);
  }
}

template <typename Tiles>
SLAB_AMX_KERNEL void block(const AttnBlock& b, const AmxScratch& w, AmxTiles& state, const Tiles& tiles) {
  const auto [t_lo, t_hi] = visible_tokens(b);
  if (t_hi < 0) return;
  const KTiles kts = b.span_block > 0 ? KTiles{nullptr, 0} : k_tiles_any(b, t_lo, t_hi);
  // A span's K tiles per KV block: the cache's, or each block transposed into its part of kt.
  const float* k_bases[kAttnAmxSpanMaxBlocks] = {};
  if (b.span_block > 0) {
    for (int j = 0; j * b.span_block < t_hi; ++j) {
      const int lo = std::max(t_lo - j * b.span_block, 0), hi = std::min(t_hi - j * b.span_block, b.span_block);
      if (lo >= hi) continue;
      AttnBlock kb = b;
      kb.kraw = b.k_span[j];
      kb.kt = b.kt + static_cast<size_t>(j) * static_cast<size_t>(b.span_block * b.hd / 2);
      k_bases[j] = k_tiles_any(kb, lo, hi).base;
    }
  }
  configure(state, tiles);
  const int m16 = (b.m + 15) / 16 * 16;
  const int g_lo = t_lo / 16, g_hi = (t_hi + 15) / 16;
  for (int v0 = 0; v0 < m16; v0 += 2 * kTileRows) {
    for (int g = g_lo; g < g_hi;) {
      // In a span, K from the tiles of the KV block holding group g, a pair only within one block.
      const float* kt = kts.base;
      int kg = g;
      bool two_groups = g + 1 < g_hi;
      if (b.span_block > 0) {
        const int groups = b.span_block / 16;
        kt = k_bases[g / groups];
        kg = g % groups;
        two_groups = two_groups && kg + 1 < groups;
      }
      score_tiles(tiles, b, kt, v0, g, kg, v0 + kTileRows < m16, two_groups);
      g += two_groups ? 2 : 1;
    }
  }

  const int t0 = t_lo / kStep * kStep, t1 = (t_hi + kStep - 1) / kStep * kStep;
  const auto hd = static_cast<size_t>(b.hd);
  float alphas[kAttnMaxVectors];
  // P as BF16 A-tile rows, written by the softmax itself (a second pass converting it from s took
  // ~190 of ~770 ns of a 64-vector prefill block's AVX-512 work on Zen 5).
  const PRows rows{w.p, w.p_lo, w.ldp, t0, t1, !b.round_p_to_bf16};
  for (int i = 0; i < b.m; i += 16) softmax16<true>(b, i, std::min(16, b.m - i), alphas, &rows);
  // A later block of the item, spread over the vectors (prefetch_stream): the AVX-512 and AVX2
  // blocks ran 1.1-1.45x slower on Zen 5 when they sent such a stream in bursts. Not measured on
  // an AMX machine yet.
  const int pf_share = prefetch_share(b, b.m);
  int pf = 0;
  for (int i = 0; i < b.m; ++i) {
    pf = prefetch_stream(b, pf, std::min(pf + pf_share, 2 * b.pf_lines));
    const float alpha = alphas[i];
    if (alpha == 1.0f) continue;
    const __m512 va = _mm512_set1_ps(alpha);
    float* o = b.o + static_cast<size_t>(i) * hd;
    for (size_t d = 0; d < hd; d += 16) _mm512_storeu_ps(o + d, _mm512_mul_ps(va, _mm512_loadu_ps(o + d)));
  }
  relayout_v(b, w, t0, t1, t_lo, t_hi);
  for (int v0 = 0; v0 < m16; v0 += 2 * kTileRows) {
    for (int j = 0; j < b.hd / 16; j += 2) pv_tiles(tiles, b, w, v0, j, t0, (t1 - t0) / kStep, v0 + kTileRows < m16);
  }
}

}  // namespace

SLAB_AMX_KERNEL void attn_block_amx_avx512_work(const AttnBlock& b, const AmxScratch& w) {
  AmxTiles state;
  block(b, w, state, NoTiles{});
}

SLAB_AMX_KERNEL void attn_block_amx(const AttnBlock& b, const AmxScratch& w, AmxTiles& tiles) {
  if (tiles.emulator) {
    block(b, w, tiles, EmulatedTiles{*tiles.emulator});
  } else {
    block(b, w, tiles, HardwareTiles{});
  }
}

}  // namespace slab::kern::detail
