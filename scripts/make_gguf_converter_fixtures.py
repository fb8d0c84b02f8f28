#!/usr/bin/env python3
"""GGUF files written by llama.cpp's own converter from the Hugging Face fixtures
(tests/fixtures/gguf/converted/).

  scripts/make_gguf_converter_fixtures.py --llama-cpp PATH/TO/llama.cpp [--python /tmp/venv-hf/bin/python]
      [--llama-quantize PATH/TO/llama-quantize]

For each of tests/fixtures/models/{gemma3_gguf, gemma3_text, phi3_sliding_window, phi3_longrope,
mixtral_gguf, qwen3_moe_gguf}: the folder's config.json and model.safetensors are copied to a
temporary folder with a tiny SentencePiece tokenizer.model (the fixtures have none and the
converter needs one), and convert_hf_to_gguf.py --outtype f32 (bf16 for mixtral_gguf, whose
weights are BF16) writes <name>.gguf; the converter stacks each MoE layer's experts into 3-D
ffn_gate_exps / ffn_up_exps / ffn_down_exps tensors. The tokenizer is trained here (BPE, on
CORPUS below) with exactly the model's vocab_size pieces, so the converter neither pads nor cuts
the vocabulary (the Gemma 3 converter drops embedding rows past the tokenizer's size). As in
Llama 2's and Gemma's own tokenizer.model, no normalization and no whitespace squeezing; for the
Gemma files no dummy space prefix either.

tokenizer.json records, per file, what the sentencepiece library itself encodes for STRINGS (no
BOS), so the C++ test checks the GGUF vocabulary the converter wrote against the reference
tokenizer. With --llama-quantize, gemma3_gguf, phi3_longrope and the two MoE files are also
quantized to Q8_0 and Q4_K_M (<name>_<type>.gguf; rows narrower than 256 take llama.cpp's
fallbacks Q8_0/Q5_0/Q4_0 inside Q4_K_M, mixtral_gguf's 256-wide rows real Q4_K/Q6_K blocks), so
fused Phi-3 projections, Gemma norms and stacked experts are read from real quantized files. The C++ test (tests/unit/test_gguf_converted.cpp) checks the files' logits against
the folders' expected_logits.json (made by scripts/make_fixtures.py with transformers).
Needs: torch, transformers, safetensors, sentencepiece, and the llama.cpp tree's gguf-py.
"""
import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile

import sentencepiece as spm

REPO = pathlib.Path(__file__).resolve().parent.parent
MODELS = REPO / "tests" / "fixtures" / "models"
OUT = REPO / "tests" / "fixtures" / "gguf" / "converted"
NAMES = ["gemma3_gguf", "gemma3_text", "phi3_sliding_window", "phi3_longrope", "mixtral_gguf", "qwen3_moe_gguf"]
QUANTIZED = {"gemma3_gguf": ["Q8_0", "Q4_K_M"], "phi3_longrope": ["Q8_0", "Q4_K_M"],
             "mixtral_gguf": ["Q8_0", "Q4_K_M"], "qwen3_moe_gguf": ["Q8_0", "Q4_K_M"]}
# --outtype per file (default f32): mixtral_gguf's weights are BF16 on disk, which BF16 keeps exactly
# at half the size.
OUTTYPE = {"mixtral_gguf": "bf16"}
# llama.cpp writes a Qwen vocabulary only from a byte-level BPE tokenizer.json whose pre-tokenizer
# it recognises by a hash of its encodings; a tiny trained one matches none. For these files the
# converter's model class is run with the SentencePiece vocabulary path its Llama class takes: the
# tensors and architecture metadata are still the converter's own.
SENTENCEPIECE_VOCAB = {"qwen3_moe_gguf": ("conversion.qwen", "Qwen3MoeModel")}
RUN_WITH_SENTENCEPIECE_VOCAB = """\
import importlib, runpy, sys
sys.path.insert(0, sys.argv[1])
module, cls = sys.argv[2].split(":")
getattr(importlib.import_module(module), cls).set_vocab = lambda self: self._set_vocab_sentencepiece()
sys.argv = sys.argv[3:]
runpy.run_path(sys.argv[0], run_name="__main__")
"""
CORPUS = """\
The server reads a model file, maps its tensors and answers requests one token at a time.
Each layer normalizes its input, attends to the tokens before it and runs a small network.
A sliding window keeps only the most recent keys; a global layer sees the whole prompt.
Quantized weights are smaller and faster to read, and the kernels decode them as they go.
We tested the tokenizer on short strings, long strings, numbers like 1234 and punctuation!
Hello world. Hello there, world? The quick brown fox jumps over the lazy dog again and again.
"""
STRINGS = ["Hello world", "The quick brown fox", " leading space", "numbers 1234 and punctuation!",
           "a sliding window keeps the recent keys"]


def train_tokenizer(folder: pathlib.Path, vocab: int, dummy_prefix: bool, tmp: pathlib.Path):
    corpus = tmp / "corpus.txt"
    corpus.write_text(CORPUS * 4)
    prefix = tmp / f"sp{vocab}{int(dummy_prefix)}"
    spm.SentencePieceTrainer.train(input=str(corpus), model_prefix=str(prefix), vocab_size=vocab,
                                   model_type="bpe", character_coverage=1.0, unk_id=0, bos_id=1,
                                   eos_id=2, pad_id=-1, add_dummy_prefix=dummy_prefix,
                                   normalization_rule_name="identity", remove_extra_whitespaces=False,
                                   num_threads=1, minloglevel=2)
    shutil.copy(f"{prefix}.model", folder / "tokenizer.model")
    sp = spm.SentencePieceProcessor(model_file=f"{prefix}.model")
    assert sp.vocab_size() == vocab, (sp.vocab_size(), vocab)
    return {s: sp.encode(s) for s in STRINGS}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-cpp", required=True, type=pathlib.Path, help="llama.cpp source tree")
    ap.add_argument("--python", default=sys.executable, help="python with torch and transformers")
    ap.add_argument("--llama-quantize", help="llama.cpp's llama-quantize binary (optional)")
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=str(args.llama_cpp / "gguf-py"))
    version = subprocess.run(["git", "-C", str(args.llama_cpp), "describe", "--tags", "--always"],
                             capture_output=True, text=True).stdout.strip() or "unknown"
    expected = {"llama_cpp": version, "strings": STRINGS, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        for name in NAMES:
            folder = tmp / name
            folder.mkdir()
            for f in ("config.json", "model.safetensors"):
                shutil.copy(MODELS / name / f, folder / f)
            config = json.loads((folder / "config.json").read_text())
            encodings = train_tokenizer(folder, config["vocab_size"], "gemma" not in name, tmp)
            out = OUT / f"{name}.gguf"
            convert = [str(args.llama_cpp / "convert_hf_to_gguf.py"), str(folder),
                       "--outtype", OUTTYPE.get(name, "f32"), "--outfile", str(out)]
            if name in SENTENCEPIECE_VOCAB:
                convert = ["-c", RUN_WITH_SENTENCEPIECE_VOCAB, str(args.llama_cpp),
                           ":".join(SENTENCEPIECE_VOCAB[name])] + convert
            subprocess.run([args.python] + convert, check=True, env=env, stdout=subprocess.DEVNULL)
            expected["files"][out.name] = {"model": name, "encodings": encodings}
            print(f"{out.name}: {out.stat().st_size / 1024:.0f} KB")
            for qtype in QUANTIZED.get(name, []) if args.llama_quantize else []:
                qout = OUT / f"{name}_{qtype}.gguf"
                subprocess.run([args.llama_quantize, str(out), str(qout), qtype], check=True,
                               capture_output=True)
                print(f"{qout.name}: {qout.stat().st_size / 1024:.0f} KB")
    (OUT / "tokenizer.json").write_text(json.dumps(expected) + "\n")


if __name__ == "__main__":
    main()
