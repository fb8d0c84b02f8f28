#!/usr/bin/env python3
"""Thread scaling of prefill and decode, slabserve against llama.cpp on the same GGUF file and the
same cores, one run: a table (scaling.md), the raw figures (scaling.json) and a plot (scaling.svg).

    python3 bench/scaling.py --model /tmp/tinyllama-random-bf16.gguf --threads 1,2,4,8,16 \\
        --bench-model build/bench/bench_model --llama-bench LLAMA_CPP/build/bin/llama-bench \\
        --out bench/results/DATE-HOST-scaling

slabserve's figures come from `bench_model` (prefill of --prompt tokens, decode of --decode steps at
batch 1 with the read-bandwidth roofline of each step); llama.cpp's from `llama-bench -p PROMPT -n
DECODE`. Where the CPU offers AMX-BF16, slabserve runs twice per thread count: AVX-512 alone
(`--no-amx`) and with the AMX tiles. Each program runs pinned by taskset to one cpu of each of the
first T physical cores, so both peers see the same whole cores. Stdlib only (the device machine has no package registry);
`--report-only DIR` rewrites the table and plot from DIR/scaling.json.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import time

from compare_peers import cpu_model  # bench/ is the script's own folder, first on sys.path


def first_cpu_of_each_core():
    """One OS cpu per physical core (the lowest-numbered sibling), cores in the order of their cpus:
    T threads then run on T whole cores even where the machine has SMT."""
    seen, cpus = set(), []
    root = "/sys/devices/system/cpu"
    for name in sorted((n for n in os.listdir(root) if re.fullmatch(r"cpu\d+", n)), key=lambda n: int(n[3:])):
        try:
            with open(f"{root}/{name}/topology/core_id") as f:
                core = f.read().strip()
            with open(f"{root}/{name}/topology/physical_package_id") as f:
                core = (f.read().strip(), core)
        except OSError:
            core = name
        if core not in seen and int(name[3:]) in os.sched_getaffinity(0):
            seen.add(core)
            cpus.append(int(name[3:]))
    return cpus


def run(cmd, timeout, log):
    t0 = time.time()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        out, rc = p.stdout + p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        out, rc = out + f"\n[timed out after {timeout} s]", 124
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}  # rc {rc}, {time.time() - t0:.1f} s\n{out}\n")
    return rc, out


def grab(pattern, text, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1)) if m else None


def bench_slabserve(args, threads, amx, log):
    cmd = ["taskset", "-c", args.cpus(threads), args.bench_model, "--model", args.model, "--threads", str(threads),
           "--prompt-len", str(args.prompt), "--decode-tokens", str(args.decode),
           "--reps", str(args.reps if threads >= 4 else 1)]
    if not amx:
        cmd.append("--no-amx")
    if args.kernels != "auto":
        cmd += ["--kernels", args.kernels]
    rc, out = run(cmd, args.timeout, log)
    if rc != 0:
        return {"error": f"bench_model rc {rc}"}
    return {"prefill_tok_s": grab(r"prefill: .*?: ([0-9.]+) tokens/s", out),
            "prefill_gflops": grab(r"([0-9.]+) GFLOP/s in the linears", out),
            "decode_tok_s": grab(r"decode: batch \d+, \d+ steps: ([0-9.]+) tokens/s", out),
            "roofline_pct": grab(r"decode at ([0-9.]+) % of roofline", out),
            "read_gb_s": grab(r"read bandwidth ([0-9.]+) GB/s", out),
            "kernels": grab(r"\| (bf16 [^|]*kernels)", out, str)}


def bench_llama(args, threads, log):
    cmd = ["taskset", "-c", args.cpus(threads), args.llama_bench, "-m", args.model, "-t", str(threads),
           "-p", str(args.prompt), "-n", str(args.decode), "-r", str(args.reps if threads >= 4 else 1), "-o", "json"]
    rc, out = run(cmd, args.timeout, log)
    if rc != 0:
        return {"error": f"llama-bench rc {rc}"}
    try:
        rows = json.loads(out[out.index("["):out.rindex("]") + 1])
    except ValueError:
        return {"error": "llama-bench printed no JSON"}
    res = {"build": rows[0].get("build_commit"), "cpu_info": rows[0].get("cpu_info")}
    for r in rows:
        key = "prefill_tok_s" if r.get("n_prompt", 0) > 0 else "decode_tok_s"
        res[key] = r.get("avg_ts")
    return res


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def ratio(a, b):
    return "-" if not a or not b else f"{a / b:.2f}x"


def vector_kernels(data):
    """The vector kernel set slabserve ran without AMX: forced by --kernels, or what bench_model
    reported (an AVX2-only CPU runs its AVX2 kernels under --kernels auto)."""
    ran = [(r.get("slab_avx512") or {}).get("kernels") or "" for r in data["rows"]]
    return "AVX2" if data.get("kernels") == "avx2" or any("avx2" in k for k in ran) else "AVX-512"


def write_report(out_dir, data):
    rows = data["rows"]
    amx = any(r.get("slab_amx") for r in rows)
    lines = [f"# Thread scaling: {data['cpu']}", "",
             f"Model `{os.path.basename(data['model'])}`; prefill {data['prompt']} tokens, decode {data['decode']} "
             f"steps at batch 1; {data['date']}. llama.cpp: llama-bench build {data.get('llama_build') or '?'}.",
             "slabserve's decode roofline: the packed weights one step reads over the read bandwidth sampled "
             "just before that step (bench_model).", ""]
    if data.get("kernels", "auto") != "auto":
        lines.insert(4, f"slabserve ran its {data['kernels']} kernels (`bench_model --kernels {data['kernels']}`).")
    vec = vector_kernels(data)
    head = f"| threads | slab prefill {vec} | llama.cpp pp | ratio |"
    sep = "|---:|---:|---:|---:|"
    if amx:
        head += " slab prefill AMX | ratio |"
        sep += "---:|---:|"
    head += " slab decode | roofline | llama.cpp tg | ratio |"
    sep += "---:|---:|---:|---:|"
    lines += [head, sep]
    for r in rows:
        s, l, a = r.get("slab_avx512") or {}, r.get("llama") or {}, r.get("slab_amx") or {}
        best = a if a.get("decode_tok_s") else s
        line = (f"| {r['threads']} | {fmt(s.get('prefill_tok_s'))} | {fmt(l.get('prefill_tok_s'))} | "
                f"{ratio(s.get('prefill_tok_s'), l.get('prefill_tok_s'))} |")
        if amx:
            line += f" {fmt(a.get('prefill_tok_s'))} | {ratio(a.get('prefill_tok_s'), l.get('prefill_tok_s'))} |"
        line += (f" {fmt(best.get('decode_tok_s'))} | {fmt(best.get('roofline_pct'), '.0f')} % | "
                 f"{fmt(l.get('decode_tok_s'))} | {ratio(best.get('decode_tok_s'), l.get('decode_tok_s'))} |")
        lines.append(line)
    with open(os.path.join(out_dir, "scaling.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    write_svg(os.path.join(out_dir, "scaling.svg"), data)
    print("\n".join(lines))


def write_svg(path, data):
    """Two panels (prefill, decode), tokens/s against threads on log2 x, one line per program."""
    rows = data["rows"]
    vec = "slabserve " + vector_kernels(data)
    series = [("prefill", "slab_avx512", vec, "#1f77b4"), ("prefill", "slab_amx", "slabserve AMX", "#2ca02c"),
              ("prefill", "llama", "llama.cpp", "#d62728"), ("decode", "slab_avx512", vec, "#1f77b4"),
              ("decode", "slab_amx", "slabserve AMX", "#2ca02c"), ("decode", "llama", "llama.cpp", "#d62728")]
    w, h, pad = 420, 300, 50
    threads = [r["threads"] for r in rows]
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{2 * w}" height="{h + 40}" font-family="sans-serif" '
           f'font-size="11">', f'<text x="10" y="15">{data["cpu"]}: {os.path.basename(data["model"])}</text>']
    for panel, x0 in (("prefill", 0), ("decode", w)):
        key = f"{panel}_tok_s"
        vals = [((r.get(src) or {}).get(key)) for r in rows for _, src, _, _ in series]
        top = max([v for v in vals if v] or [1]) * 1.1
        n = max(1, len(threads) - 1)
        sx = lambda i: x0 + pad + i * (w - 2 * pad) / n
        sy = lambda v: 30 + (h - pad) * (1 - v / top)
        out.append(f'<text x="{x0 + pad}" y="30">{panel} tokens/s</text>')
        out.append(f'<line x1="{x0 + pad}" y1="{h - 20}" x2="{x0 + w - pad}" y2="{h - 20}" stroke="black"/>')
        out.append(f'<line x1="{x0 + pad}" y1="30" x2="{x0 + pad}" y2="{h - 20}" stroke="black"/>')
        for i, t in enumerate(threads):
            out.append(f'<text x="{sx(i) - 4:.0f}" y="{h - 5}">{t}</text>')
        for frac in (0.25, 0.5, 0.75, 1.0):
            out.append(f'<text x="{x0 + 5}" y="{sy(top * frac / 1.1):.0f}">{top * frac / 1.1:.0f}</text>')
        legend_y = 45
        for p, src, label, color in series:
            if p != panel:
                continue
            pts = [(sx(i), sy(v)) for i, r in enumerate(rows) if (v := (r.get(src) or {}).get(key))]
            if not pts:
                continue
            out.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="' +
                       " ".join(f"{x:.0f},{y:.0f}" for x, y in pts) + '"/>')
            out.append(f'<text x="{x0 + pad + 10}" y="{legend_y}" fill="{color}">{label}</text>')
            legend_y += 14
    out.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="GGUF file both programs load")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--bench-model", default="build/bench/bench_model")
    ap.add_argument("--llama-bench", help="llama.cpp's llama-bench (omit: slabserve alone)")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--decode", type=int, default=32)
    ap.add_argument("--reps", type=int, default=3, help="repetitions from 4 threads on (1 below: slow)")
    ap.add_argument("--amx", choices=["auto", "off", "only"], default="auto",
                    help="auto: AVX-512 and AMX rows where the CPU has AMX; only: the AMX rows alone")
    ap.add_argument("--kernels", choices=["auto", "avx512_bf16", "avx2"], default="auto",
                    help="slabserve's kernel set (bench_model --kernels): avx2 on an AVX-512 machine stands in for "
                         "an AVX2-only one, against a llama.cpp built without AVX-512")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per program run")
    ap.add_argument("--out", required=True)
    ap.add_argument("--report-only", action="store_true", help="rewrite scaling.md/.svg from OUT/scaling.json")
    args = ap.parse_args()
    if args.report_only:
        with open(os.path.join(args.out, "scaling.json")) as f:
            write_report(args.out, json.load(f))
        return
    if not args.model:
        ap.error("--model is required")
    os.makedirs(args.out, exist_ok=True)
    log = os.path.join(args.out, "scaling.log")
    with open("/proc/cpuinfo") as f:
        has_amx = "amx_bf16" in f.read()
    data = {"cpu": cpu_model(), "model": args.model, "prompt": args.prompt, "decode": args.decode,
            "kernels": args.kernels,
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "nproc": os.cpu_count(), "rows": []}
    cores = first_cpu_of_each_core()
    args.cpus = lambda t: ",".join(str(c) for c in cores[:t])
    data["cores"] = len(cores)
    for t in [int(x) for x in args.threads.split(",")]:
        if t > len(cores):
            print(f"skipping {t} threads: {len(cores)} cores", file=sys.stderr)
            continue
        row = {"threads": t}
        if args.amx != "only":
            row["slab_avx512"] = bench_slabserve(args, t, False, log)
        if has_amx and args.amx != "off":
            row["slab_amx"] = bench_slabserve(args, t, True, log)
        if args.llama_bench:
            row["llama"] = bench_llama(args, t, log)
            data["llama_build"] = row["llama"].get("build")
        data["rows"].append(row)
        print(json.dumps(row), flush=True)
        with open(os.path.join(args.out, "scaling.json"), "w") as f:
            json.dump(data, f, indent=1)
    write_report(args.out, data)


if __name__ == "__main__":
    main()
