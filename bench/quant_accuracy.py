#!/usr/bin/env python3
"""Quantization accuracy against llama.cpp (issue #11): the mean KL divergence of next-token
distributions from the unquantized (BF16) model's, for llama.cpp's Q8_0 / Q4_0 / Q4_K_M and
slabserve's load-time modes, on the same text and the same positions.

    cmake --build build-bench -j2 --target quant_kl
    python3 bench/quant_accuracy.py [--work-dir /tmp/slab-quant] [--models stories260K,tinyllama-random]

Per model, in WORK (outside the repo):
  - llama.cpp's llama-perplexity and llama-quantize, built from the tree vendored in the
    llama-cpp-python sdist (compare_peers.build_llama_cpp, shared with bench/compare.py);
  - the BF16 base GGUF: stories260K's F32 GGUF (../shared/testdata) requantized to BF16 by
    llama-quantize; tinyllama-random (bench/make_random_checkpoint.py, made if absent) converted
    by the tree's convert_hf_to_gguf.py --outtype bf16;
  - Q8_0, Q4_0 and Q4_K_M quantized by llama-quantize from the highest-precision GGUF (F32 for
    stories260K, BF16 for tinyllama-random);
  - llama-perplexity --kl-divergence-base on the BF16 GGUF over --ctx chunks of the text, then
    --kl-divergence for each quantized file;
  - quant_kl on the token ids llama-perplexity evaluated (read back from its base file, so both
    tools score the very same positions), reference = the HF checkpoint unquantized (BF16),
    tests = slabserve's RTN modes and the three llama-quantize files loaded by slabserve.
Writes bench/results/<date>-<host>-quant-accuracy/{README.md,results.json,logs/} and prints the table.
"""
import argparse
import datetime
import json
import os
import re
import socket
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compare_peers  # noqa: E402  (build_llama_cpp, convert_hf_to_gguf, run_logged)

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(REPO, "..", "shared", "testdata")
LLAMA_FORMATS = ["Q8_0", "Q4_0", "Q4_K_M"]
# slabserve's RTN modes: projection bits per weight (codes + one BF16 scale per group or row),
# and the llama.cpp format of about the same size each is held against.
SLAB_MODES = {"w8": ("W8 per channel", "Q8_0"), "w8g32": ("W8 g32", "Q8_0"), "w4": ("W4 g32", "Q4_0"),
              "w4g128": ("W4 g128", "Q4_0")}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default="/tmp/slab-quant")
    ap.add_argument("--models", default="stories260K,tinyllama-random")
    ap.add_argument("--text", default=os.path.join(REPO, "bench", "data", "quant_kl_story.txt"))
    ap.add_argument("--quant-kl", default=os.path.join(REPO, "build-bench", "bench", "quant_kl"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", default="stories260K=512,tinyllama-random=512", help="MODEL=N,...")
    ap.add_argument("--chunks", default="stories260K=-1,tinyllama-random=3",
                    help="MODEL=N,... chunks scored (-1: all); 255 positions per chunk of 512")
    ap.add_argument("--out-dir", default=None, help="default bench/results/<date>-<host>-quant-accuracy")
    return ap.parse_args()


def per_model(spec):
    return {k: int(v) for k, v in (kv.split("=") for kv in spec.split(",") if kv)}


def checkpoint_and_source(model, work):
    """(HF folder for slabserve, highest-precision GGUF for llama-quantize, BF16 base GGUF, needs BF16 made)."""
    if model == "stories260K":
        return (os.path.join(SHARED, "models", "stories260K"),
                os.path.join(SHARED, "models", "stories260K-gguf", "stories260K.gguf"),
                os.path.join(work, "stories260K-bf16.gguf"), True)
    if model == "tinyllama-random":
        ckpt = os.path.join(work, "tinyllama-random")
        if not os.path.isfile(os.path.join(ckpt, "config.json")):
            subprocess.run([sys.executable, os.path.join(REPO, "bench", "make_random_checkpoint.py"), "--shape",
                            "tinyllama", "--tokenizer-from", os.path.join(SHARED, "tokenizers", "llama2"), ckpt],
                           check=True)
        bf16 = os.path.join(work, "tinyllama-random-bf16.gguf")
        return ckpt, bf16, bf16, False
    raise SystemExit(f"unknown model {model}")


def run_capture(cmd, log_path):
    """Runs cmd, its output into log_path; returns the output; raises with the last lines on failure."""
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace")
        log.write(p.stdout)
    if p.returncode != 0:
        last = "\n".join(p.stdout.splitlines()[-12:])
        raise RuntimeError(f"{cmd[0]} failed ({p.returncode}); see {log_path}:\n{last}")
    return p.stdout


def base_file_tokens(path):
    """Token ids from llama-perplexity's --kl-divergence-base file: '_logits_', u32 n_ctx,
    i32 n_vocab, i32 n_chunk, then n_ctx * n_chunk i32 tokens (then the log-probs)."""
    with open(path, "rb") as f:
        if f.read(8) != b"_logits_":
            raise RuntimeError(f"{path}: not a llama-perplexity logits file")
        n_ctx, n_vocab, n_chunk = struct.unpack("<Iii", f.read(12))
        tokens = struct.unpack(f"<{n_ctx * n_chunk}i", f.read(4 * n_ctx * n_chunk))
    return n_ctx, n_vocab, n_chunk, list(tokens)


def gguf_bits_per_weight(tree, path):
    """Bits per weight over every tensor of a GGUF file (its data bytes / its elements), read with
    the tree's gguf-py: the figure llama.cpp prints as BPW at load."""
    sys.path.insert(0, os.path.join(tree, "gguf-py"))
    from gguf import GGUFReader
    tensors = GGUFReader(path).tensors
    return 8.0 * sum(int(t.n_bytes) for t in tensors) / sum(int(t.n_elements) for t in tensors)


def grab(pattern, text, cast=float, group=1):
    m = re.search(pattern, text, re.M)
    return cast(m.group(group)) if m else None


def llama_kl_figures(out):
    pm = r"([-+0-9.eE]+)\s*±\s*([-+0-9.eE]+)"
    return {
        "kl": grab(r"^Mean\s+KLD:\s+" + pm, out), "kl_se": grab(r"^Mean\s+KLD:\s+" + pm, out, group=2),
        "kl_max": grab(r"^Maximum KLD:\s+([-+0-9.eE]+)", out), "kl_p99": grab(r"^99\.0%\s+KLD:\s+([-+0-9.eE]+)", out),
        "top1": grab(r"^Same top p:\s+" + pm, out), "top1_se": grab(r"^Same top p:\s+" + pm, out, group=2),
        "ppl": grab(r"^Mean PPL\(Q\)\s+:\s+" + pm, out), "ppl_base": grab(r"^Mean PPL\(base\)\s+:\s+" + pm, out),
        "positions": None,
    }


def slab_results(out):
    rows = {}
    for ln in out.splitlines():
        if ln.startswith("RESULT\t"):
            f = ln.split("\t")
            rows[f[1]] = {"kl": float(f[2]), "kl_se": float(f[3]), "kl_max": float(f[4]), "kl_p99": float(f[5]),
                          "top1": 100 * float(f[6]), "top1_se": 100 * float(f[7]), "ppl": float(f[8]),
                          "ppl_ref": float(f[9]), "positions": int(f[10]), "bpw": float(f[11])}
    return rows


def evaluate(model, args, tree, logs):
    work = args.work_dir
    bin_dir = os.path.join(tree, "build", "bin")
    ckpt, source, base, make_bf16 = checkpoint_and_source(model, work)
    ctx, chunks = per_model(args.ctx)[model], per_model(args.chunks)[model]
    if not os.path.isfile(base):
        if make_bf16:
            run_capture([os.path.join(bin_dir, "llama-quantize"), source, base + ".part", "BF16"],
                        os.path.join(logs, f"{model}-quantize-BF16.log"))
            os.replace(base + ".part", base)
        else:
            compare_peers.convert_hf_to_gguf(work, tree, ckpt, "bf16", base)
    files = {}
    for fmt in LLAMA_FORMATS:
        files[fmt] = os.path.join(work, f"{model}-{fmt}.gguf")
        if not os.path.isfile(files[fmt]):
            run_capture([os.path.join(bin_dir, "llama-quantize"), source, files[fmt] + ".part", fmt, str(args.threads)],
                        os.path.join(logs, f"{model}-quantize-{fmt}.log"))
            os.replace(files[fmt] + ".part", files[fmt])
    # The base run tokenizes the text and stores the BF16 model's log-probs of every scored position.
    ppl = os.path.join(bin_dir, "llama-perplexity")
    common = ["-c", str(ctx), "-b", str(ctx), "--chunks", str(chunks), "-t", str(args.threads), "-ngl", "0"]
    kld_base = os.path.join(work, f"{model}-c{ctx}.kld")
    base_out = run_capture([ppl, "-m", base, "-f", args.text, *common, "--kl-divergence-base", kld_base],
                           os.path.join(logs, f"{model}-perplexity-base.log"))
    llama = {"BF16": {"ppl": grab(r"Final estimate: PPL = ([0-9.]+)", base_out)}}
    for fmt in LLAMA_FORMATS:
        # llama.cpp's logger writes from a thread of its own; now and then the final statistics
        # are lost at exit (the per-chunk lines all there, rc 0). Such a run is repeated.
        for _ in range(5):
            out = run_capture([ppl, "-m", files[fmt], *common, "--kl-divergence-base", kld_base, "--kl-divergence"],
                              os.path.join(logs, f"{model}-perplexity-{fmt}.log"))
            llama[fmt] = llama_kl_figures(out)
            if llama[fmt]["kl"] is not None and llama[fmt]["top1"] is not None:
                break
    n_ctx, _, n_chunk, tokens = base_file_tokens(kld_base)
    for fmt in LLAMA_FORMATS:
        llama[fmt]["positions"] = n_chunk * (n_ctx - 1 - n_ctx // 2)
        llama[fmt]["bpw"] = gguf_bits_per_weight(tree, files[fmt])
    tokens_path = os.path.join(work, f"{model}-c{ctx}.tokens")
    with open(tokens_path, "w") as f:
        f.write(" ".join(map(str, tokens)) + "\n")
    # slabserve's own tokenization of the same text, for the record (both tools then use llama.cpp's ids).
    slab_ids = [int(t) for t in subprocess.run([args.quant_kl, "-m", ckpt, "--text", args.text, "--print-tokens"],
                                               capture_output=True, text=True, check=True).stdout.split()]
    n = min(len(slab_ids), len(tokens))
    first_diff = next((i for i in range(n) if slab_ids[i] != tokens[i]), None)
    tokenization = ("identical" if first_diff is None and len(slab_ids) >= len(tokens)
                    else f"differ from token {first_diff if first_diff is not None else n}")
    tests = [*SLAB_MODES, "w8+lm_head", "w4+lm_head", *(files[f] for f in LLAMA_FORMATS)]
    cmd = [args.quant_kl, "-m", ckpt, "--tokens", tokens_path, "--ctx", str(ctx), "--threads", str(args.threads)]
    for t in tests:
        cmd += ["--test", t]
    slab_out = run_capture(cmd, os.path.join(logs, f"{model}-quant_kl.log"))
    slab = slab_results(slab_out)
    for fmt in LLAMA_FORMATS:
        slab[fmt] = slab.pop(files[fmt])
    # The same positions through the decode kernels (<= 8 rows a call: weight-only, BF16
    # activations) instead of the batched ones (INT8 activations, one scale per row), for the
    # formats those kernels run: where the two differ is where activation rounding costs.
    decode_tests = ["w8", "w4", files["Q8_0"], files["Q4_0"]]
    dcmd = [*cmd[:cmd.index("--test")], "--batch", "8"]
    for t in decode_tests:
        dcmd += ["--test", t]
    decode = slab_results(run_capture(dcmd, os.path.join(logs, f"{model}-quant_kl-batch8.log")))
    for fmt in ("Q8_0", "Q4_0"):
        decode[fmt] = decode.pop(files[fmt])
    return {"model": model, "ctx": ctx, "chunks": n_chunk, "tokens_scored": len(tokens),
            "tokenization_vs_llama_cpp": tokenization, "llama_cpp": llama, "slabserve": slab,
            "slabserve_decode_kernels": decode,
            "commands": {"llama-perplexity": " ".join([os.path.basename(ppl), "-m", "QUANT.gguf", *common,
                                                       "--kl-divergence-base", "BASE.kld", "--kl-divergence"]),
                         "quant_kl": " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c for c in cmd),
                         "quant_kl_decode": " ".join(os.path.relpath(c, REPO) if c.startswith(REPO) else c
                                                     for c in dcmd)}}


def kl_cell(r):
    return f"{r['kl']:.5f} ± {r['kl_se']:.5f}" if r and r.get("kl") is not None else "—"


def top1_cell(r):
    return f"{r['top1']:.2f} %" if r and r.get("top1") is not None else "—"


def table(res):
    ll, sl, dk = res["llama_cpp"], res["slabserve"], res["slabserve_decode_kernels"]
    first = next(iter(sl.values()))
    lines = [f"### {res['model']} (ctx {res['ctx']}, {res['chunks']} chunks, {first['positions']} scored positions; "
             f"tokenization vs llama.cpp: {res['tokenization_vs_llama_cpp']}; PPL of the BF16 base: llama.cpp "
             f"{ll['BF16']['ppl']}, slabserve {first['ppl_ref']:.4f})", "",
             "| slabserve | bits/w | KL (nats) | top-1 | KL, decode kernels | llama.cpp | bits/w | KL (nats) | top-1 "
             "| slabserve ≤ llama.cpp? |", "|---|---|---|---|---|---|---|---|---|---|"]

    def verdict(s, l):
        if not s or not l or l.get("kl") is None:
            return "—"
        return "yes" if s["kl"] <= l["kl"] else f"no ({s['kl'] / l['kl']:.2f}x)"

    def row(label, s, d, peer):
        l = ll[peer]
        lines.append(f"| {label} | {s['bpw']:.2f} | {kl_cell(s)} | {top1_cell(s)} | {kl_cell(d)} | {peer} "
                     f"| {l['bpw']:.2f} | {kl_cell(l)} | {top1_cell(l)} | {verdict(s, l)} |")

    for fmt in LLAMA_FORMATS:
        row(f"{fmt} file", sl[fmt], dk.get(fmt), fmt)
    for mode, (name, peer) in SLAB_MODES.items():
        for head in ("", "+lm_head"):
            if mode + head in sl:
                row(f"{mode + head} ({name}{', head too' if head else ''})", sl[mode + head],
                    dk.get(mode + head), peer)
    return "\n".join(lines)


def main():
    args = parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    if not os.access(args.quant_kl, os.X_OK):
        raise SystemExit(f"no quant_kl at {args.quant_kl}: cmake --build build-bench -j2 --target quant_kl")
    stamp = datetime.date.today().isoformat()
    out_dir = args.out_dir or os.path.join(REPO, "bench", "results", f"{stamp}-{socket.gethostname()}-quant-accuracy")
    logs = os.path.join(out_dir, "logs")
    os.makedirs(logs, exist_ok=True)
    tree, py_version = compare_peers.build_llama_cpp(args.work_dir, ["llama-perplexity", "llama-quantize"])
    version = subprocess.run([os.path.join(tree, "build", "bin", "llama-perplexity"), "--version"],
                             capture_output=True, text=True)
    llama_version = next((ln.split(":", 1)[1].strip() for ln in (version.stdout + version.stderr).splitlines()
                          if ln.lower().startswith("version:")), "?")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short=10", "HEAD"], capture_output=True,
                            text=True).stdout.strip()
    results = [evaluate(m, args, tree, logs) for m in args.models.split(",") if m]
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump({"slabserve_commit": commit, "llama_cpp": llama_version, "llama_cpp_python": py_version,
                   "results": results}, f, indent=1)
    text = "\n\n".join(table(r) for r in results)
    header = (f"# Quantization accuracy vs llama.cpp ({stamp}, {socket.gethostname()})\n\n"
              f"slabserve git {commit}; llama.cpp {llama_version} (vendored in llama-cpp-python {py_version}); "
              f"text {os.path.relpath(args.text, REPO)}; {args.threads} threads.\n"
              "KL(BF16 || quantized) per scored position, mean ± standard error; top-1 = argmax agreement. "
              "bits/w: all weights (embedding and head included); slabserve's relative to its BF16 runner, "
              "llama.cpp's the GGUF file's. slabserve KL as prefill runs it (chunks of 512 in one call: INT8 "
              "activations); 'decode kernels': the same positions 8 tokens a call (BF16 activations).\n\n"
              "    python3 bench/quant_accuracy.py " + " ".join(sys.argv[1:]) + "\n")
    commands = "\n".join(f"- {r['model']}: `{r['commands']['llama-perplexity']}`; `{r['commands']['quant_kl']}`"
                         for r in results)
    with open(os.path.join(out_dir, "README.md"), "w") as f:
        f.write(header + "\n" + text + "\n\nCommands:\n\n" + commands + "\n")
    # Keep the logs' key lines only (the full logs are megabytes of per-tensor lines).
    for name in sorted(os.listdir(logs)):
        path = os.path.join(logs, name)
        with open(path, errors="replace") as f:
            keep = [ln for ln in f if re.search(r"^\$ |KLD|Same top|PPL|BPW|RESULT|vs |weights|chunks|"
                                                r"type +[a-z0-9_]+: +[0-9]+ tensors|ftype|error", ln)]
        with open(path, "w") as f:
            f.writelines(keep)
    print(header + "\n" + text)
    print(f"\nwritten to {os.path.relpath(out_dir, REPO)}")


if __name__ == "__main__":
    main()
