#!/usr/bin/env python3
"""Writes a Hugging Face model folder with random BF16 weights in the shape of a real model, for
benchmarks (throughput does not depend on the values). Needs numpy only: the safetensors file is
written directly (8-byte header length, JSON header, raw little-endian data), one tensor at a time.

    python3 bench/make_random_checkpoint.py --shape tinyllama /tmp/tinyllama-random
    python3 bench/make_random_checkpoint.py --shape qwen2.5-0.5b /tmp/qwen-random
    python3 bench/make_random_checkpoint.py --shape mixtral-tiny --tokenizer-from \
        ../shared/testdata/tokenizers/llama2 /tmp/mixtral-tiny          # a mixture of experts

With --gguf OUT.gguf (llama shapes; needs gguf-py and sentencepiece) the same weights go to one
GGUF file of BF16 tensors with --tokenizer-from's SentencePiece vocabulary in its metadata, which
slabserve and llama.cpp both load: a benchmark of the two then reads the same bytes, and a machine
without torch or transformers can make it (the device machine's scaling runs):

    PYTHONPATH=LLAMA_CPP/gguf-py python3 bench/make_random_checkpoint.py --shape tinyllama \
        --tokenizer-from ../shared/testdata/tokenizers/llama2 --gguf /tmp/tinyllama-random-bf16.gguf

Weights ~ N(0, 0.02), norms ~ 1 (+ small noise), biases ~ N(0, 0.02). To keep generation at disk
speed, each tensor is cut from a 64 MiB pool of random values at a random offset. No tokenizer is
written (`bench_model` uses token ids) unless `--tokenizer-from DIR` names a folder whose
tokenizer.model (SentencePiece) and tokenizer_config.json are copied in, as servers need one:

    python3 bench/make_random_checkpoint.py --shape tinyllama --tokenizer-from \
        ../shared/testdata/tokenizers/llama2 /tmp/slab-compare/tinyllama-random
"""
import argparse
import json
import os
import shutil

import numpy as np

SHAPES = {
    "tinyllama": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                      intermediate_size=5632, num_hidden_layers=22, num_attention_heads=32,
                      num_key_value_heads=4, vocab_size=32000, rope_theta=10000.0,
                      max_position_embeddings=2048, tie_word_embeddings=False, rms_norm_eps=1e-5,
                      bos_token_id=1, eos_token_id=2, qkv_bias=False),
    # TinyLlama's layers, 6 of them (0.78 GB): the same per-layer shapes in a third of the time.
    "tinyllama-6l": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                         intermediate_size=5632, num_hidden_layers=6, num_attention_heads=32,
                         num_key_value_heads=4, vocab_size=32000, rope_theta=10000.0,
                         max_position_embeddings=2048, tie_word_embeddings=False, rms_norm_eps=1e-5,
                         bos_token_id=1, eos_token_id=2, qkv_bias=False),
    # One TinyLlama layer: with --copy-cycle and the same --seed, a draft model of tinyllama-6l's
    # (the embedding, head and cycles are drawn before any layer).
    "tinyllama-1l": dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=2048,
                         intermediate_size=5632, num_hidden_layers=1, num_attention_heads=32,
                         num_key_value_heads=4, vocab_size=32000, rope_theta=10000.0,
                         max_position_embeddings=2048, tie_word_embeddings=False, rms_norm_eps=1e-5,
                         bos_token_id=1, eos_token_id=2, qkv_bias=False),
    # A small Mixtral: 8 experts of 2816, top 2 (1.3 GB; each token reads ~0.39 GB of it), so
    # served MoE throughput can be compared with llama-server on llama.cpp's conversion of it.
    "mixtral-tiny": dict(model_type="mixtral", architectures=["MixtralForCausalLM"], hidden_size=1024,
                         intermediate_size=2816, num_hidden_layers=8, num_attention_heads=16,
                         num_key_value_heads=4, vocab_size=32000, rope_theta=1000000.0,
                         max_position_embeddings=4096, tie_word_embeddings=False, rms_norm_eps=1e-5,
                         bos_token_id=1, eos_token_id=2, qkv_bias=False, num_local_experts=8,
                         num_experts_per_tok=2, sliding_window=None, router_aux_loss_coef=0.02),
    "qwen2.5-0.5b": dict(model_type="qwen2", architectures=["Qwen2ForCausalLM"], hidden_size=896,
                         intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
                         num_key_value_heads=2, vocab_size=151936, rope_theta=1000000.0,
                         max_position_embeddings=32768, tie_word_embeddings=True, rms_norm_eps=1e-6,
                         bos_token_id=151643, eos_token_id=151643, qkv_bias=True),
}


def bf16_bits(a):
    """float32 array -> uint16 BF16 bits, round to nearest even."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def tensors(s):
    h, i, v = s["hidden_size"], s["intermediate_size"], s["vocab_size"]
    hd = h // s["num_attention_heads"]
    q, kv = s["num_attention_heads"] * hd, s["num_key_value_heads"] * hd
    yield "model.embed_tokens.weight", (v, h), "w"
    for l in range(s["num_hidden_layers"]):
        p = f"model.layers.{l}."
        yield p + "input_layernorm.weight", (h,), "norm"
        yield p + "self_attn.q_proj.weight", (q, h), "w"
        yield p + "self_attn.k_proj.weight", (kv, h), "w"
        yield p + "self_attn.v_proj.weight", (kv, h), "w"
        if s["qkv_bias"]:
            yield p + "self_attn.q_proj.bias", (q,), "w"
            yield p + "self_attn.k_proj.bias", (kv,), "w"
            yield p + "self_attn.v_proj.bias", (kv,), "w"
        yield p + "self_attn.o_proj.weight", (h, q), "w"
        yield p + "post_attention_layernorm.weight", (h,), "norm"
        if s.get("num_local_experts"):  # Mixtral's per-expert tensors (w1 gate, w3 up, w2 down)
            yield p + "block_sparse_moe.gate.weight", (s["num_local_experts"], h), "w"
            for e in range(s["num_local_experts"]):
                yield p + f"block_sparse_moe.experts.{e}.w1.weight", (i, h), "w"
                yield p + f"block_sparse_moe.experts.{e}.w3.weight", (i, h), "w"
                yield p + f"block_sparse_moe.experts.{e}.w2.weight", (h, i), "w"
            continue
        yield p + "mlp.gate_proj.weight", (i, h), "w"
        yield p + "mlp.up_proj.weight", (i, h), "w"
        yield p + "mlp.down_proj.weight", (h, i), "w"
    yield "model.norm.weight", (h,), "norm"
    if not s["tie_word_embeddings"]:
        yield "lm_head.weight", (v, h), "w"


def copy_cycle_tensors(s, n, rng):
    """Embedding E (independent N(0, 1) rows) and head H with H[next(t)] = E[t], next() walking
    cycles of n ids. The residual stream after t is E[t] plus the layers' outputs (each ~0.8 per
    element with N(0, 0.02) weights: about 3 in all after 12 sublayers, whatever the context), so
    the logit of next(t) is ~|E[t]|^2 = hidden (2048) and every other ~N(0, 3 sqrt(hidden)), whose
    maximum over the vocabulary stays near 600: the argmax after t is next(t)."""
    if s["tie_word_embeddings"]:
        raise SystemExit("--copy-cycle needs an untied output head")
    v, h = s["vocab_size"], s["hidden_size"]
    emb = rng.standard_normal((v, h), dtype=np.float32)
    ids = rng.permutation(np.arange(3, v))
    ids = ids[:len(ids) - len(ids) % n]
    cycles = ids.reshape(-1, n)
    head = rng.standard_normal((v, h), dtype=np.float32)  # rows of ids 0-2 and of ids outside every cycle
    head[np.roll(cycles, -1, axis=1).ravel()] = emb[cycles.ravel()]
    return {"model.embed_tokens.weight": bf16_bits(emb), "lm_head.weight": bf16_bits(head),
            "cycles": cycles[:64].tolist()}


def copy_tokenizer(src, out_dir):
    """Only the SentencePiece model (and its config): a tokenizer.json beside it may hold another
    vocabulary (the llama2 test folder's does), and loaders prefer tokenizer.json when present."""
    model = os.path.join(src, "tokenizer.model")
    if not os.path.isfile(model):
        raise SystemExit(f"no tokenizer.model in {src}")
    os.makedirs(out_dir, exist_ok=True)
    shutil.copyfile(model, os.path.join(out_dir, "tokenizer.model"))
    cfg = os.path.join(src, "tokenizer_config.json")
    if os.path.isfile(cfg):
        shutil.copyfile(cfg, os.path.join(out_dir, "tokenizer_config.json"))
    print(f"copied the tokenizer from {src}")


# llama.cpp's names for the Hugging Face llama tensors (the q/k rows stay in HF order: the values
# are random, so llama.cpp's rotary permutation changes nothing measured).
GGUF_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
              "lm_head.weight": "output.weight", "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q",
              "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
              "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
              "mlp.down_proj": "ffn_down"}


def gguf_name(hf):
    if hf in GGUF_NAMES:
        return GGUF_NAMES[hf]
    _, _, layer, rest = hf.split(".", 3)  # model.layers.N.<module>.weight
    module, suffix = rest.rsplit(".", 1)
    return f"blk.{layer}.{GGUF_NAMES[module]}.{suffix}"


def write_gguf(path, s, tensor_data, tokenizer_dir):
    import gguf
    import sentencepiece as spm
    if s["model_type"] != "llama" or s.get("num_local_experts") or s["qkv_bias"]:
        raise SystemExit("--gguf writes dense llama shapes only")
    if not tokenizer_dir:
        raise SystemExit("--gguf needs --tokenizer-from (llama.cpp loads no model without a vocabulary)")
    sp = spm.SentencePieceProcessor(model_file=os.path.join(tokenizer_dir, "tokenizer.model"))
    if sp.get_piece_size() != s["vocab_size"]:
        raise SystemExit(f"the tokenizer has {sp.get_piece_size()} pieces, the shape {s['vocab_size']} rows")
    h, heads = s["hidden_size"], s["num_attention_heads"]
    w = gguf.GGUFWriter(path, "llama")
    w.add_name("random " + s["model_type"])
    w.add_context_length(s["max_position_embeddings"])
    w.add_embedding_length(h)
    w.add_block_count(s["num_hidden_layers"])
    w.add_feed_forward_length(s["intermediate_size"])
    w.add_rope_dimension_count(h // heads)
    w.add_head_count(heads)
    w.add_head_count_kv(s["num_key_value_heads"])
    w.add_layer_norm_rms_eps(s["rms_norm_eps"])
    w.add_rope_freq_base(s["rope_theta"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)
    tokens, scores, types = [], [], []
    for i in range(sp.get_piece_size()):
        tokens.append(sp.id_to_piece(i).encode("utf-8"))
        scores.append(sp.get_score(i))
        types.append(gguf.TokenType.UNKNOWN if sp.is_unknown(i) else gguf.TokenType.CONTROL if sp.is_control(i)
                     else gguf.TokenType.BYTE if sp.is_byte(i) else gguf.TokenType.NORMAL)
    w.add_tokenizer_model("llama")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(s["bos_token_id"])
    w.add_eos_token_id(s["eos_token_id"])
    for name, shape, bits in tensor_data:
        if len(shape) == 1:  # norms stay F32, as llama.cpp's converter writes them (its adds need F32)
            f32 = (bits.astype(np.uint32) << 16).view(np.float32)
            w.add_tensor(gguf_name(name), f32)
        else:
            w.add_tensor(gguf_name(name), bits.reshape(shape), raw_dtype=gguf.GGMLQuantizationType.BF16)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir")
    ap.add_argument("--shape", choices=sorted(SHAPES), default="tinyllama")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tokenizer-from", metavar="DIR",
                    help="copy tokenizer.model (+ tokenizer_config.json) from DIR; its vocabulary must match")
    ap.add_argument("--copy-cycle", type=int, default=0, metavar="N",
                    help="make the output head the embedding with its rows permuted in cycles of N ids (from 3 "
                         "on): greedy decoding from id t then repeats t's cycle, a model that copies a passage "
                         "(speculative decoding benchmarks); the cycles go to copy_cycles.json")
    ap.add_argument("--tokenizer-only", action="store_true",
                    help="with --tokenizer-from: only add the tokenizer to an existing checkpoint")
    ap.add_argument("--gguf", action="store_true",
                    help="write out_dir as one BF16 GGUF file (llama shapes; needs gguf-py and sentencepiece)")
    args = ap.parse_args()
    if args.tokenizer_only:
        if not args.tokenizer_from:
            ap.error("--tokenizer-only needs --tokenizer-from")
        copy_tokenizer(args.tokenizer_from, args.out_dir)
        return
    s = SHAPES[args.shape]
    rng = np.random.default_rng(args.seed)
    pool = bf16_bits(rng.standard_normal(32 << 20, dtype=np.float32) * 0.02)
    fixed = copy_cycle_tensors(s, args.copy_cycle, rng) if args.copy_cycle else {}

    plan = list(tensors(s))
    if args.gguf:
        def values(name, shape, kind):
            n = int(np.prod(shape))
            if name in fixed:
                return fixed[name]
            if kind == "norm":
                return bf16_bits(1.0 + 0.02 * rng.standard_normal(n, dtype=np.float32))
            pieces = []
            while n > 0:
                take = min(n, len(pool) // 2)
                start = int(rng.integers(0, len(pool) - take + 1))
                pieces.append(pool[start:start + take])
                n -= take
            return pieces[0] if len(pieces) == 1 else np.concatenate(pieces)
        write_gguf(args.out_dir, s, [(name, shape, values(name, shape, kind)) for name, shape, kind in plan],
                   args.tokenizer_from)
        print(f"wrote {args.out_dir}: {args.shape} as GGUF BF16")
        return
    header, offset = {}, 0
    for name, shape, _ in plan:
        n = int(np.prod(shape)) * 2
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    hj = json.dumps(header, separators=(",", ":")).encode()
    hj += b" " * (-len(hj) % 8)

    os.makedirs(args.out_dir, exist_ok=True)
    with open(os.path.join(args.out_dir, "model.safetensors"), "wb") as f:
        f.write(len(hj).to_bytes(8, "little"))
        f.write(hj)
        for name, shape, kind in plan:
            n = int(np.prod(shape))
            if name in fixed:
                f.write(fixed[name].tobytes())
                continue
            if kind == "norm":
                f.write(bf16_bits(1.0 + 0.02 * rng.standard_normal(n, dtype=np.float32)).tobytes())
                continue
            while n > 0:  # random offsets into the pool, in pieces of at most the pool's size
                take = min(n, len(pool) // 2)
                start = int(rng.integers(0, len(pool) - take + 1))
                f.write(pool[start:start + take].tobytes())
                n -= take

    cfg = {k: v for k, v in s.items() if k != "qkv_bias"}
    cfg.update(hidden_act="silu", torch_dtype="bfloat16", rope_scaling=None, attention_bias=s["qkv_bias"],
               use_cache=True, transformers_version="4.46.0")
    with open(os.path.join(args.out_dir, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    with open(os.path.join(args.out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": s["bos_token_id"], "eos_token_id": s["eos_token_id"], "do_sample": False}, f, indent=2)
    if args.copy_cycle:
        with open(os.path.join(args.out_dir, "copy_cycles.json"), "w") as f:
            json.dump(fixed["cycles"], f)
    if args.tokenizer_from:
        copy_tokenizer(args.tokenizer_from, args.out_dir)
    print(f"wrote {args.out_dir}: {args.shape}, {offset / 1e9:.2f} GB of BF16 weights")


if __name__ == "__main__":
    main()
