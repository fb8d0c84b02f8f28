#!/usr/bin/env python3
"""Writes a copy of kernels/attention_amx.cpp whose block also runs on a tile backend that does
nothing (NopTiles), as attn_block_amx_nop: what is left is the block's AVX-512 work (softmax, P
rows, alpha, V relayout). Usage: nop_tiles.py REPO OUT.cpp"""
import sys

src = open(sys.argv[1] + "/kernels/attention_amx.cpp").read()
nop = """
struct NopTiles {
  void load_config(const AmxTileConfig&) const {}
  void release() const {}
  template <int T> void zero() const {}
  template <int T> void load(const void* p, size_t) const { asm volatile("" : : "r"(p)); }
  template <int T> void store(void* p, size_t) const { asm volatile("" : : "r"(p) : "memory"); }
  template <int C, int A, int B> void dpbf16ps() const {}
};
"""
src = src.replace("constexpr int kTileRows = 16;", nop + "constexpr int kTileRows = 16;", 1)
entry = "SLAB_AMX_KERNEL void attn_block_amx(const AttnBlock& b, const AmxScratch& w, AmxTiles& tiles) {"
assert entry in src
src = src.replace(entry, """SLAB_AMX_KERNEL void attn_block_amx_nop(const AttnBlock& b, const AmxScratch& w, AmxTiles& tiles) {
  block(b, w, tiles, NopTiles{});
}
""" + entry.replace("attn_block_amx(", "attn_block_amx_unused("), 1)
open(sys.argv[2], "w").write(src)
