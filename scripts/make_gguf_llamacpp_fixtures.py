#!/usr/bin/env python3
"""GGUF files quantized by llama.cpp's own llama-quantize (tests/fixtures/gguf/llamacpp/).

  pip install gguf numpy
  scripts/make_gguf_llamacpp_fixtures.py --llama-quantize PATH/TO/llama-quantize

The one-layer random llama of make_gguf_fixtures.py (same weight_values(), so the C++ test can
rebuild its FP32 weights), written as F32 GGUF and quantized by llama-quantize to Q8_0, Q4_0,
Q4_K_M, Q5_K_M and Q6_K: with llama.cpp's own type choices per tensor (Q4_0 keeps output.weight
Q6_K; Q4_K_M and Q5_K_M make attn_v and ffn_down Q6_K), so the files hold real Q8_0, Q4_0, Q4_K,
Q5_K and Q6_K blocks as llama.cpp writes them. expected.json records, per file and tensor, the
ggml type and gguf-py's dequantized values at every 127th element plus their float64 sum and sum
of squares; tests/unit/test_gguf_llamacpp.cpp checks slabserve's decoders against them and the
served model against a dequantize-then-compute reference. The llama.cpp build used is recorded.
bench/compare_peers.py's build_llama_cpp() builds llama-quantize from the llama-cpp-python sdist.
"""
import argparse
import json
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
from gguf import GGUFReader, GGUFWriter, quants

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import make_gguf_fixtures as tiny  # noqa: E402  (the model's shape and weight_values)

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "gguf" / "llamacpp"
TYPES = ["Q8_0", "Q4_0", "Q4_K_M", "Q5_K_M", "Q6_K"]
STRIDE = 127


def write_f32_model(path: pathlib.Path):
    w = GGUFWriter(str(path), "llama")
    w.add_block_count(1)
    w.add_context_length(128)
    w.add_embedding_length(tiny.HIDDEN)
    w.add_feed_forward_length(tiny.FFN)
    w.add_head_count(tiny.HEADS)
    w.add_head_count_kv(tiny.KV_HEADS)
    w.add_rope_dimension_count(tiny.HEAD_DIM)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_freq_base(10000.0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    for name, _, values, _ in tiny.model_tensors():
        w.add_tensor(name, values)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def describe(path: pathlib.Path) -> dict:
    tensors = {}
    for t in GGUFReader(str(path)).tensors:
        values = quants.dequantize(t.data, t.tensor_type).astype(np.float32).reshape(-1)
        tensors[t.name] = {
            "type": t.tensor_type.name,
            "numel": int(values.size),
            "samples": [float(v) for v in values[::STRIDE]],
            "sum": float(values.astype(np.float64).sum()),
            "sum_sq": float((values.astype(np.float64) ** 2).sum()),
        }
    return tensors


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--llama-quantize", required=True)
    args = ap.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    expected = {"llama_quantize": "unknown", "stride": STRIDE, "files": {}}
    with tempfile.TemporaryDirectory() as tmp:
        source = pathlib.Path(tmp) / "f32.gguf"
        write_f32_model(source)
        for qtype in TYPES:
            out = OUT / f"tiny_llama_{qtype}.gguf"
            run = subprocess.run([args.llama_quantize, str(source), str(out), qtype], check=True,
                                 capture_output=True, text=True)
            lines = (run.stdout + run.stderr).splitlines()
            expected["llama_quantize"] = next((ln.split(":", 1)[1].strip() for ln in lines
                                               if ln.lower().startswith("version:")), "unknown")
            expected["files"][out.name] = describe(out)
    (OUT / "expected.json").write_text(json.dumps(expected) + "\n")
    print("wrote", OUT, "with llama-quantize", expected["llama_quantize"])


if __name__ == "__main__":
    main()
