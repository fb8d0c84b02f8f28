#!/usr/bin/env python3
"""Peer comparison: slabserve against llama.cpp's llama-server, vLLM (CPU) and AMD PACE on one
random-weight checkpoint, on the same cores, in one run, with bench/bench_serve.py as the load.

    python3 bench/compare.py                       # everything, results in bench/results/<date>-<host>/
    python3 bench/compare.py --servers slabserve,slabserve-x2 --concurrency 1,4

Each peer is installed into its own venv under --work-dir (default /tmp/slab-compare, never the
repository) and its exact version recorded. A peer that fails to install or start stays in the
results with the last lines of its error. Per server: start on 127.0.0.1, wait for /health
(bounded), one warm-up request, then one bench_serve.py run per concurrency c (default 1,4,16,64;
128 input / 128 output tokens, ignore_eos; max(--waves * c, --min-prompts) prompts), then stop.
Writes raw/<server>-c<c>.json, results.md, machine.md and (with matplotlib from the bench venv)
plot.png. Standard library only; the venvs hold what each peer needs.

    python3 bench/compare.py --gguf Q8_0 --servers slabserve,llama.cpp   # one GGUF file for both

--gguf TYPE hands slabserve and llama-server the same GGUF file: the checkpoint converted to BF16
by llama.cpp's convert_hf_to_gguf.py, then (TYPE other than BF16) quantized by its llama-quantize
(Q8_0, Q4_0, Q4_K_M, ...). slabserve serves it as any user's GGUF (`--model FILE.gguf`,
quantization auto: Q8_0/Q4_0/Q4_K/Q5_K/Q6_K... repacked for its INT8/INT4 kernels). vLLM and
PACE take Hugging Face folders here, so they are refused in this mode. Results go to
bench/results/<date>-<host>-gguf-<type>/ unless --out-dir says otherwise.
"""
import argparse
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from datetime import date, datetime

import compare_peers as peers

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench", "bench_serve.py")
LLAMA2_TOKENIZER = os.path.join(REPO, "..", "shared", "testdata", "tokenizers", "llama2")
ALL_SERVERS = ["slabserve", "slabserve-x2", "llama.cpp", "vllm", "pace"]
GGUF_SERVERS = ["slabserve", "slabserve-x2", "llama.cpp"]  # the servers that take a GGUF file


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default="/tmp/slab-compare")
    ap.add_argument("--checkpoint", default=None, help="HF folder (default WORK/tinyllama-random, made if absent)")
    ap.add_argument("--servers", default=None, help="from: " + ",".join(ALL_SERVERS)
                    + " (default: all; with --gguf: " + ",".join(GGUF_SERVERS) + ")")
    ap.add_argument("--gguf", metavar="TYPE", default=None,
                    help="serve one GGUF file (BF16, or llama-quantize's TYPE: Q8_0, Q4_0, Q4_K_M, ...) "
                    "to every server")
    ap.add_argument("--concurrency", default="1,4,16,64")
    ap.add_argument("--input-len", type=int, default=128)
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--waves", type=int, default=2, help="prompts per level = min(max(waves*c, min), max)")
    ap.add_argument("--min-prompts", type=int, default=2)
    ap.add_argument("--max-prompts", type=int, default=64,
                    help="cap: on 2 cores two waves of 64 would take ~8 min per server alone")
    ap.add_argument("--server-budget", type=int, default=600,
                    help="seconds of benchmark levels per server; later levels are skipped (and reported)")
    ap.add_argument("--total-budget", type=int, default=2400,
                    help="seconds for the whole comparison; no level starts after it (reported as skipped)")
    ap.add_argument("--cores", default=None, help="taskset cpu list for every server (default: all online)")
    ap.add_argument("--level-timeout", type=int, default=900, help="seconds one bench_serve run may take")
    ap.add_argument("--ready-timeout", type=int, default=300, help="seconds a server may take to become ready")
    ap.add_argument("--out-dir", default=None, help="default bench/results/<YYYY-MM-DD>-<host>")
    ap.add_argument("--binary", default=os.path.join(REPO, "build", "slabserve"))
    ap.add_argument("--report-only", action="store_true", help="rewrite results.md/plot.png from OUT/raw")
    ap.add_argument("--note", action="append", default=[], help="a line added to results.md (repeatable)")
    ap.add_argument("--plot-only", metavar="DIR", help=argparse.SUPPRESS)  # run by the bench venv's python
    return ap.parse_args()


def sh(cmd, **kw):
    return subprocess.run(cmd, shell=isinstance(cmd, str), capture_output=True, text=True, **kw).stdout.strip()


def host_slug():
    """Short machine description for the results folder: cpu model + core count."""
    model = ""
    for line in sh(["lscpu"]).splitlines():
        if line.startswith("Model name:"):
            model = line.split(":", 1)[1].strip()
    slug = re.sub(r"[^a-z0-9]+", "-", model.lower().replace("amd ", "")).strip("-") or platform.machine()
    if "avx512_bf16" in open("/proc/cpuinfo").read() and "epyc" in slug and "zen" not in slug:
        slug += "-avx512bf16"
    return f"{slug}-{os.cpu_count()}c"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(url, proc, timeout, log_path):
    """Polls url until HTTP 200; raises with the log's tail when the process dies or time runs out."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"exited with status {proc.returncode} while starting:\n{tail(log_path)}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise RuntimeError(f"not ready after {timeout} s:\n{tail(log_path)}")


def tail(path, n=15):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError as e:
        return f"(no log: {e})"


def stop(proc, grace=60):
    """SIGTERM to the server's own process group (it drains), SIGKILL after the grace period."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        pass


def run_bench(base_url, model, args, label, c, n, out_dir, name, seed, output_len=None, save=True):
    """One bench_serve.py run. The seed differs per level (same for every server) so that no level
    replays an earlier level's prompts into a prefix cache."""
    cmd = [sys.executable, BENCH, "--base-url", base_url, "--model", model, "--label", label,
           "--random-input-len", str(args.input_len), "--random-output-len", str(output_len or args.output_len),
           "--num-prompts", str(n), "--max-concurrency", str(c), "--vocab-size", "32000",
           "--request-timeout", "600", "--seed", str(seed)]
    if save:
        cmd += ["--save-result", "--result-dir", out_dir, "--result-filename", name]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.level_timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired as e:
        return 124, f"bench_serve.py ran past {args.level_timeout} s\n{(e.stdout or b'')[-2000:]}"


def bench_server(server, args, checkpoint, raw_dir, levels, status):
    """Setup, start, warm up, bench every level, stop. Records into status[server.key]."""
    st = status.setdefault(server.key, {"name": server.name, "levels": {}})
    for c in levels:  # a previous run's figures must not stand in for this run's
        stale = os.path.join(raw_dir, f"{server.key}-c{c}.json")
        if os.path.exists(stale):
            os.remove(stale)
    log_path = os.path.join(args.work_dir, f"{server.key}.log")
    print(f"== {server.name}: setup", flush=True)
    try:
        st["version"] = server.setup(checkpoint)
    except Exception as e:  # noqa: BLE001 -- reported in the results, never skipped silently
        st["error"] = f"install/setup failed: {e}"
        print(st["error"], flush=True)
        return
    st["command"] = " ".join(shlex.quote(x) for x in server.command(free_port(), checkpoint))
    port = free_port()
    proc = None
    try:
        print(f"== {server.name} {st['version']}: starting on port {port}", flush=True)
        with open(log_path, "w") as log:
            proc = subprocess.Popen(server.command(port, checkpoint), stdout=log, stderr=subprocess.STDOUT,
                                    env=server.env(), start_new_session=True, cwd=args.work_dir)
        started = time.time()
        wait_ready(server.health_url(port), proc, args.ready_timeout, log_path)
        st["ready_s"] = round(time.time() - started, 1)
        base = f"http://127.0.0.1:{port}"
        rc, out = run_bench(base, server.model_name(checkpoint), args, server.name, 1, 1, raw_dir, "", 999, 16,
                            save=False)
        if rc != 0:
            raise RuntimeError("warm-up request failed:\n" + out[-1500:])
        levels_start = time.time()
        for c in levels:
            n = min(max(args.waves * c, args.min_prompts), args.max_prompts)
            name = f"{server.key}-c{c}.json"
            over = ("server budget" if time.time() - levels_start > args.server_budget else
                    "total budget" if time.time() - args.t0 > args.total_budget else None)
            if over:
                st["levels"][str(c)] = {"rc": None, "skipped": f"--{over.replace(' ', '-')} spent", "num_prompts": n}
                print(f"   c={c}: skipped, {over} spent", flush=True)
                continue
            print(f"   c={c}: {n} prompts", flush=True)
            t0 = time.time()
            rc, out = run_bench(base, server.model_name(checkpoint), args, server.name, c, n, raw_dir, name, c)
            lv = {"rc": rc, "seconds": round(time.time() - t0, 1), "num_prompts": n, "file": name}
            if rc != 0:
                lv["error"] = out[-1500:]
            st["levels"][str(c)] = lv
            summary = [x for x in out.splitlines() if "throughput" in x or "Successful" in x or "Failed" in x]
            print("   " + "\n   ".join(summary[:4]), flush=True)
    except Exception as e:  # noqa: BLE001
        st["error"] = f"start/run failed: {e}"
        print(st["error"], flush=True)
    finally:
        stop(proc)
        st["log_tail"] = tail(log_path, 5)


def load_raw(raw_dir, key, c):
    try:
        with open(os.path.join(raw_dir, f"{key}-c{c}.json")) as f:
            return json.load(f)
    except OSError:
        return None


def write_results(out_dir, status, levels, args):
    raw = os.path.join(out_dir, "raw")
    keys = [k for k in ALL_SERVERS if k in status]
    base = {c: load_raw(raw, "slabserve", c) for c in levels}
    rows = ["| server (version) | c | output tok/s | req/s | median TTFT ms | median TPOT ms | P99 ITL ms "
            "| failed | slabserve ÷ this (output tok/s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    notes = []
    for k in keys:
        st = status[k]
        label = f"{st['name']} ({st.get('version', '?')})"
        any_row = False
        for c in levels:
            m = load_raw(raw, k, c)
            if m is None:
                continue
            any_row = True
            ratio = "—"
            b = base.get(c)
            if k != "slabserve" and b and m["output_throughput"] > 0 and b["failed"] == 0:
                ratio = f"{b['output_throughput'] / m['output_throughput']:.2f}×"
            rows.append(f"| {label} | {c} | {m['output_throughput']:.1f} | {m['request_throughput']:.3f} "
                        f"| {m['median_ttft_ms']:.0f} | {m['median_tpot_ms']:.1f} | {m['p99_itl_ms']:.1f} "
                        f"| {m['failed']}/{m['num_prompts']} | {ratio} |")
        if "error" in st or not any_row:
            rows.append(f"| {label} | — | not run | | | | | | |")
            notes.append(f"### {st['name']}\n\n```\n{st.get('error', 'no results')}\n```\n")
        skipped = [c for c, lv in st.get("levels", {}).items() if "skipped" in lv]
        if skipped:
            rows.append(f"| {label} | {','.join(skipped)} | skipped: {st['levels'][skipped[0]]['skipped']} "
                        f"| | | | | | |")
        for c, lv in st.get("levels", {}).items():
            if "error" in lv:
                notes.append(f"### {st['name']} at c={c} (exit {lv['rc']})\n\n```\n{lv['error'][-1200:]}\n```\n")
    text = [f"# slabserve against peers — {date.today().isoformat()}\n",
            f"Random-weight TinyLlama-1.1B shape (BF16), {args.input_len} input / {args.output_len} output tokens "
            f"(random token ids, ignore_eos), greedy, streaming; load from `bench/bench_serve.py` at max "
            f"concurrency c with min(max({args.waves}·c, {args.min_prompts}), {args.max_prompts}) prompts per level "
            f"(two waves up to c = {args.max_prompts // 2}, one at c = 64, to keep the run near 40 minutes on 2 cores). "
            f"All servers on the same "
            f"cores (see machine.md); the machine is shared, so absolute figures are noisy and the ratios within "
            f"this one run are what matter. `slabserve ×2 (nginx)` is `scripts/launch-multi.sh` with 2 instances "
            f"× 1 core behind nginx. TPOT = (E2EL − TTFT)/(output tokens − 1); ITL = gaps between streamed "
            f"chunks (vLLM's definitions).\n",
            *[f"Note: {n}\n" for n in args.note],
            "\n".join(rows), "\n\n![throughput and TPOT by concurrency](plot.png)\n",
            "\n## Server commands\n"]
    for k in keys:
        st = status[k]
        if st.get("command"):
            text.append(f"- {st['name']}: `{st['command']}`")
    if notes:
        text.append("\n## Errors (last lines)\n")
        text.extend(notes)
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write("\n".join(text) + "\n")
    with open(os.path.join(out_dir, "status.json"), "w") as f:
        json.dump(status, f, indent=1)


def plot(out_dir):
    """Runs inside the bench venv (matplotlib): output tok/s and median TPOT against c."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with open(os.path.join(out_dir, "status.json")) as f:
        status = json.load(f)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.2))
    for k in ALL_SERVERS:
        if k not in status:
            continue
        pts = []
        for c, lv in sorted(status[k].get("levels", {}).items(), key=lambda x: int(x[0])):
            m = load_raw(os.path.join(out_dir, "raw"), k, c)
            if m and m["completed"]:
                pts.append((int(c), m["output_throughput"], m["median_tpot_ms"]))
        if pts:
            lbl = status[k]["name"]  # versions are in results.md; long labels cover the lines
            a1.plot([p[0] for p in pts], [p[1] for p in pts], "o-", label=lbl)
            a2.plot([p[0] for p in pts], [p[2] for p in pts], "o-", label=lbl)
    levels = sorted({int(c) for st in status.values() for c in st.get("levels", {})})
    for ax, t in ((a1, "output tokens/s"), (a2, "median TPOT (ms)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.set_xlabel("max concurrency")
        ax.set_title(t)
        ax.grid(True, alpha=0.3)
    a1.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, "plot.png"), dpi=110)


def write_machine(out_dir, args, status, loadavg, started):
    flags = open("/proc/cpuinfo").read()
    keep = [f for f in ("avx2", "avx512f", "avx512bw", "avx512_bf16", "avx512_vnni", "amx_bf16") if f" {f}" in flags]
    lscpu = [ln for ln in sh(["lscpu"]).splitlines()
             if ln.split(":")[0] in ("Model name", "CPU(s)", "Core(s) per socket", "Socket(s)", "Thread(s) per core",
                                     "NUMA node(s)", "L3 cache", "Hypervisor vendor")]
    commit = sh(["git", "-C", REPO, "rev-parse", "HEAD"])
    dirty = " (plus uncommitted changes)" if sh(["git", "-C", REPO, "status", "--porcelain", "--", "src", "server",
                                                "kernels", "include"]) else ""
    lines = ["# Machine and run\n", "```", *lscpu, "Relevant flags: " + " ".join(keep), "```\n",
             f"- Memory: {sh(['free', '-h']).splitlines()[1].split()[1]} total", f"- Kernel: {platform.release()}",
             f"- Date: {started} (UTC {datetime.utcnow().strftime('%H:%M')} at the end)",
             f"- Load average before the run: {loadavg}",
             f"- slabserve commit: {commit}{dirty}", f"- Cores given to every server (taskset): {args.cores}",
             f"- Python (load generator): {platform.python_version()}", "", "## Versions", ""]
    for k, st in status.items():
        lines.append(f"- {st['name']}: {st.get('version', 'not installed')}")
    lines += ["", "## Command", "", "    " + " ".join(shlex.quote(a) for a in [sys.executable] + sys.argv)]
    with open(os.path.join(out_dir, "machine.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def ensure_checkpoint(args):
    ckpt = args.checkpoint or os.path.join(args.work_dir, "tinyllama-random")
    if not os.path.isfile(os.path.join(ckpt, "model.safetensors")):
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "make_random_checkpoint.py"), "--shape",
                        "tinyllama", "--tokenizer-from", LLAMA2_TOKENIZER, ckpt], check=True)
    elif not os.path.isfile(os.path.join(ckpt, "tokenizer.model")):
        subprocess.run([sys.executable, os.path.join(REPO, "bench", "make_random_checkpoint.py"), "--tokenizer-only",
                        "--tokenizer-from", LLAMA2_TOKENIZER, ckpt], check=True)
    return os.path.abspath(ckpt)


def ensure_gguf(args, checkpoint):
    """WORK/<checkpoint>-<type>.gguf: llama.cpp's BF16 conversion of the checkpoint, quantized by
    its llama-quantize unless the type is BF16."""
    tree, _ = peers.build_llama_cpp(args.work_dir, ["llama-server", "llama-quantize"])
    name = os.path.basename(checkpoint.rstrip("/"))
    bf16 = os.path.join(args.work_dir, f"{name}-bf16.gguf")
    if not os.path.isfile(bf16):
        peers.convert_hf_to_gguf(args.work_dir, tree, checkpoint, "bf16", bf16)
    if args.gguf.upper() == "BF16":
        return bf16
    out = os.path.join(args.work_dir, f"{name}-{args.gguf}.gguf")
    if not os.path.isfile(out):
        peers.run_logged([os.path.join(tree, "build", "bin", "llama-quantize"), bf16, out + ".part", args.gguf],
                         os.path.join(args.work_dir, "llamacpp-setup.log"), f"llama-quantize {args.gguf}")
        os.replace(out + ".part", out)
    return out


def make_plot(args, out_dir):
    py = peers.ensure_venv(args.work_dir, "bench", ["matplotlib"])
    p = subprocess.run([py, os.path.abspath(__file__), "--plot-only", out_dir], capture_output=True, text=True)
    if p.returncode != 0:
        print("plot failed:\n" + p.stderr[-1500:])


def main():
    args = parse_args()
    if args.plot_only:
        plot(args.plot_only)
        return 0
    args.work_dir = os.path.abspath(args.work_dir)
    if os.path.commonpath([args.work_dir, REPO]) == REPO:
        sys.exit("--work-dir must be outside the repository")
    os.makedirs(args.work_dir, exist_ok=True)
    levels = [int(x) for x in args.concurrency.split(",")]
    suffix = f"-gguf-{args.gguf.lower()}" if args.gguf else ""
    out_dir = os.path.abspath(args.out_dir or os.path.join(REPO, "bench", "results",
                                                           f"{date.today().isoformat()}-{host_slug()}{suffix}"))
    raw_dir = os.path.join(out_dir, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    status_path = os.path.join(out_dir, "status.json")
    status = json.load(open(status_path)) if os.path.isfile(status_path) else {}
    if args.report_only:
        write_results(out_dir, status, levels, args)
        make_plot(args, out_dir)
        return 0

    loadavg = open("/proc/loadavg").read().split()[:3]
    started = datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    allowed = GGUF_SERVERS if args.gguf else ALL_SERVERS
    wanted = [s for s in (args.servers or ",".join(allowed)).split(",") if s]
    for key in wanted:
        if key not in allowed:
            sys.exit(f"server {key} cannot run here; choose from {allowed}")
    checkpoint = ensure_checkpoint(args)
    if args.gguf:
        checkpoint = ensure_gguf(args, checkpoint)
    args.t0 = time.time()
    args.cores = cores = args.cores or sh(["sh", "-c", "cat /sys/devices/system/cpu/online"])
    ctx = peers.Context(work_dir=args.work_dir, repo=REPO, binary=args.binary, cores=cores,
                        max_concurrency=max(levels), threads=len(peers.cpu_list(cores)))
    for key in wanted:
        status.pop(key, None)
        bench_server(peers.make(key, ctx), args, checkpoint, raw_dir, levels, status)
        write_results(out_dir, status, levels, args)  # after each server, so a cut-short run keeps results
    write_machine(out_dir, args, status, " ".join(loadavg), started)
    make_plot(args, out_dir)
    print(f"results: {out_dir}/results.md")
    failed = [k for k in wanted if "error" in status[k] or any("error" in lv for lv in status[k]["levels"].values())]
    return 1 if any(k.startswith("slabserve") for k in failed) else 0


if __name__ == "__main__":
    sys.exit(main())
