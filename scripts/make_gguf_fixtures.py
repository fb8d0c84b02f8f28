#!/usr/bin/env python3
"""Fixtures for the GGUF quantized-block decoders and loader (tests/fixtures/gguf/).

  pip install gguf numpy
  scripts/make_gguf_fixtures.py

Writes:
  blocks.json   For each of Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K: a few blocks (hex) and
                the floats gguf-py's own numpy dequantizer makes of them. The 32-element formats
                are quantized from random data by gguf-py; gguf-py cannot quantize the K formats,
                so their blocks are random bytes with sane (finite, small) half-float scales.
  tiny_llama_q8_0_q4_k.gguf
                A one-layer random llama (hidden 256, MLP 256, 4 heads of 64, 2 KV heads, vocab 64)
                whose attention and output matrices are Q8_0 (gguf-py's quantizer) and whose MLP
                matrices are Q4_K (the simple quantizer below, checked against gguf-py's
                dequantizer). Its FP32 weights come from weight_values(), a counter hash the C++
                test recomputes bit for bit, so the test can build the FP32 twin itself.
"""
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import GGUFWriter, quants

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf"

# Model shape, mirrored in tests/unit/test_gguf_quantized.cpp.
VOCAB, HIDDEN, FFN, HEADS, KV_HEADS = 64, 256, 256, 4, 2
HEAD_DIM = HIDDEN // HEADS


def weight_values(seed: int, count: int, scale: float, offset: float = 0.0) -> np.ndarray:
    """offset + scale * (u - 0.5), u from a 32-bit murmur3-style finaliser of (index + seed * golden)."""
    m = np.uint64(0xFFFFFFFF)
    h = (np.arange(count, dtype=np.uint64) + np.uint64(seed) * np.uint64(0x9E3779B9)) & m
    h ^= h >> np.uint64(16)
    h = (h * np.uint64(0x85EBCA6B)) & m
    h ^= h >> np.uint64(13)
    h = (h * np.uint64(0xC2B2AE35)) & m
    h ^= h >> np.uint64(16)
    u = h.astype(np.float64) / 4294967296.0 - 0.5
    return (u * scale + offset).astype(np.float32)


def quantize_q4_k(x: np.ndarray) -> np.ndarray:
    """Rows of x (length a multiple of 256) to Q4_K blocks: per group of 32 an affine 4-bit code
    (scale, min), the eight scales and mins stored as 6-bit multiples of the block's d and dmin."""
    rows = x.reshape(-1, 256).astype(np.float32)
    out = np.zeros((rows.shape[0], 144), dtype=np.uint8)
    for b, block in enumerate(rows):
        groups = block.reshape(8, 32)
        gmin = np.minimum(groups.min(axis=1), 0.0)
        gscale = (groups.max(axis=1) - gmin) / 15.0
        gmin = -gmin
        d = np.float16(gscale.max() / 63.0 if gscale.max() > 0 else 0.0)
        dmin = np.float16(gmin.max() / 63.0 if gmin.max() > 0 else 0.0)
        sc = np.clip(np.rint(gscale / np.float32(d)) if d > 0 else 0, 0, 63).astype(np.uint8)
        mn = np.clip(np.rint(gmin / np.float32(dmin)) if dmin > 0 else 0, 0, 63).astype(np.uint8)
        q = np.zeros((8, 32), dtype=np.uint8)
        for g in range(8):
            step = np.float32(d) * sc[g]
            if step > 0:
                q[g] = np.clip(np.rint((groups[g] + np.float32(dmin) * mn[g]) / step), 0, 15)
        scales = np.zeros(12, dtype=np.uint8)
        for j in range(4):
            scales[j] = sc[j] | ((sc[j + 4] >> 4) << 6)
            scales[j + 4] = mn[j] | ((mn[j + 4] >> 4) << 6)
            scales[j + 8] = (sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4)
        flat = q.reshape(256)
        qs = np.zeros(128, dtype=np.uint8)
        for r in range(4):
            qs[32 * r:32 * r + 32] = flat[64 * r:64 * r + 32] | (flat[64 * r + 32:64 * r + 64] << 4)
        out[b, 0:2] = np.frombuffer(np.float16(d).tobytes(), dtype=np.uint8)
        out[b, 2:4] = np.frombuffer(np.float16(dmin).tobytes(), dtype=np.uint8)
        out[b, 4:16] = scales
        out[b, 16:144] = qs
    return out.reshape(x.shape[0], -1)


def random_k_blocks(rng, qtype, count: int) -> np.ndarray:
    """Random K-quant blocks whose half-float scales are finite and small."""
    size = {Q.Q4_K: 144, Q.Q5_K: 176, Q.Q6_K: 210}[qtype]
    blocks = rng.integers(0, 256, size=(count, size), dtype=np.uint8)
    halves = rng.uniform(1e-4, 2e-2, size=(count, 2)).astype(np.float16).view(np.uint8).reshape(count, 4)
    if qtype == Q.Q6_K:
        blocks[:, 208:210] = halves[:, 0:2]
    else:
        blocks[:, 0:4] = halves
    return blocks


def make_blocks(rng) -> dict:
    result = {}
    for qtype in (Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1):
        # Rows with different ranges, one all-positive (exercises the _1 formats' minimum).
        x = np.concatenate([rng.normal(0, 1, 96), rng.uniform(0.5, 3.0, 64), rng.normal(0, 1e-3, 32)])
        x = x.astype(np.float32).reshape(1, -1)
        blocks = quants.quantize(x, qtype)
        result[qtype.name] = {"blocks": blocks.tobytes().hex(),
                              "expected": [float(v) for v in quants.dequantize(blocks, qtype).reshape(-1)]}
    for qtype in (Q.Q4_K, Q.Q5_K, Q.Q6_K):
        blocks = random_k_blocks(rng, qtype, 3)
        result[qtype.name] = {"blocks": blocks.tobytes().hex(),
                              "expected": [float(v) for v in quants.dequantize(blocks, qtype).reshape(-1)]}
    # Our Q4_K quantizer's blocks, read back by gguf-py: proves the packing the model file uses.
    x = weight_values(999, 512, 0.2).reshape(2, 256)
    mine = quantize_q4_k(x)
    back = quants.dequantize(mine, Q.Q4_K)
    assert np.abs(back - x).max() < 0.2 / 15, np.abs(back - x).max()
    return result


def model_tensors():
    """(name, ggml dims innermost first as numpy shape reversed, values, quant type) in file order."""
    seed = iter(range(1, 100))
    t = []

    def add(name, shape, scale, qtype, offset=0.0):
        count = int(np.prod(shape))
        t.append((name, shape, weight_values(next(seed), count, scale, offset).reshape(shape), qtype))

    add("token_embd.weight", (VOCAB, HIDDEN), 2.0, Q.Q8_0)
    add("blk.0.attn_norm.weight", (HIDDEN,), 0.2, Q.F32, 1.0)
    add("blk.0.attn_q.weight", (HEADS * HEAD_DIM, HIDDEN), 0.25, Q.Q8_0)
    add("blk.0.attn_k.weight", (KV_HEADS * HEAD_DIM, HIDDEN), 0.25, Q.Q8_0)
    add("blk.0.attn_v.weight", (KV_HEADS * HEAD_DIM, HIDDEN), 0.25, Q.Q8_0)
    add("blk.0.attn_output.weight", (HIDDEN, HEADS * HEAD_DIM), 0.25, Q.Q8_0)
    add("blk.0.ffn_norm.weight", (HIDDEN,), 0.2, Q.F32, 1.0)
    add("blk.0.ffn_gate.weight", (FFN, HIDDEN), 0.25, Q.Q4_K)
    add("blk.0.ffn_up.weight", (FFN, HIDDEN), 0.25, Q.Q4_K)
    add("blk.0.ffn_down.weight", (HIDDEN, FFN), 0.25, Q.Q4_K)
    add("output_norm.weight", (HIDDEN,), 0.2, Q.F32, 1.0)
    add("output.weight", (VOCAB, HIDDEN), 0.5, Q.Q8_0)
    return t


def make_model(path: pathlib.Path):
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(HIDDEN)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_dimension_count(HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, _, values, qtype in model_tensors():
        if qtype == Q.F32:
            w.add_tensor(name, values)
        elif qtype == Q.Q4_K:
            w.add_tensor(name, quantize_q4_k(values), raw_dtype=qtype)
        else:
            w.add_tensor(name, quants.quantize(values, qtype), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(12)
    (OUT / "blocks.json").write_text(json.dumps(make_blocks(rng)) + "\n")
    make_model(OUT / "tiny_llama_q8_0_q4_k.gguf")
    print("wrote", OUT)


if __name__ == "__main__":
    main()
