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

    python3 bench/compare.py --variants slabserve:w8,slabserve:w4,slabserve:gguf-Q8_0,slabserve:gguf-Q4_K_M,\
        llama.cpp:BF16,llama.cpp:Q8_0,llama.cpp:Q4_K_M --concurrency 1,4,16 --output-len 64

--variants SERVER:WEIGHTS,... runs each pair as its own row of one results table, one after the
other on the same cores: slabserve (or slabserve-x2) on the Hugging Face checkpoint as it is
(`bf16`), quantized at load (`w8`, `w8g32`, `w4`, `w4g128`, each with an optional `+head` for
--quantize-lm-head) or on a GGUF file (`gguf-TYPE`), and llama.cpp on a GGUF file (`TYPE`: BF16,
Q8_0, Q4_K_M, ...). Every GGUF file is made as with --gguf (llama.cpp's BF16 conversion,
llama-quantize for the rest; --convert-python picks the Python that runs the conversion), before
the first server starts, and the same file goes to both servers. results.md gets one ratio column
per llama.cpp variant (each slabserve row's output tok/s over that row's, same c, same run), the
1-minute load average at the start and end of every level, the start-up lines each server logged
(slabserve's kernels, llama-server's thread pool and slots), and issue #11's targets (INT8
variants >= 2.5x llama.cpp BF16 and >= 1.5x Q8_0; INT4 >= 2.5x BF16 and >= 1.5x Q4_K_M). Raw JSON per variant
and level: raw/<server>-<weights>-c<c>.json. Results go to
bench/results/<date>-<host>-quantized-serving/ (-variants when nothing is quantized).
--report-only reads the run's lengths, levels and variant order back from run.json.
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
from compare_report import ALL_SERVERS, plot, variant_keys, write_results, write_results_variants

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(REPO, "bench", "bench_serve.py")
LLAMA2_TOKENIZER = os.path.join(REPO, "..", "shared", "testdata", "tokenizers", "llama2")
GGUF_SERVERS = ["slabserve", "slabserve-x2", "llama.cpp"]  # the servers that take a GGUF file
SLAB_QUANTIZATIONS = ("none", "w8", "w8g32", "w4", "w4g128")  # slabserve --quantization at load


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--work-dir", default="/tmp/slab-compare")
    ap.add_argument("--checkpoint", default=None, help="HF folder (default WORK/tinyllama-random, made if absent)")
    ap.add_argument("--servers", default=None, help="from: " + ",".join(ALL_SERVERS)
                    + " (default: all; with --gguf: " + ",".join(GGUF_SERVERS) + ")")
    ap.add_argument("--gguf", metavar="TYPE", default=None,
                    help="serve one GGUF file (BF16, or llama-quantize's TYPE: Q8_0, Q4_0, Q4_K_M, ...) "
                    "to every server")
    ap.add_argument("--variants", metavar="SERVER:WEIGHTS,...", default=None,
                    help="one row per pair: slabserve:bf16|w8|w8g32|w4|w4g128[+head]|gguf-TYPE, "
                    "slabserve-x2:(same), llama.cpp:TYPE (BF16, Q8_0, Q4_K_M, ...); see above")
    ap.add_argument("--slab-args", default="",
                    help="more slabserve serve arguments for every slabserve variant, e.g. \"--kv-cache-memory 0.125\" "
                    "(the memory table then compares weights, not a 1 GiB KV pool resident in every row)")
    ap.add_argument("--convert-python", default=None,
                    help="the Python that runs llama.cpp's convert_hf_to_gguf.py (torch, transformers, safetensors, "
                    "sentencepiece); default: WORK/venv-llamacpp, installed on demand")
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


class Variant:
    """One SERVER:WEIGHTS pair of --variants. weights is canonical: bf16, w8, w4+head, gguf-Q8_0 for
    slabserve; the GGUF type (BF16, Q8_0, Q4_K_M) for llama.cpp."""

    def __init__(self, item):
        server, sep, weights = item.strip().partition(":")
        server, weights = server.strip(), weights.strip()
        if not sep or server not in GGUF_SERVERS or not weights:
            raise ValueError(f"--variants item {item!r}: want SERVER:WEIGHTS with SERVER one of {GGUF_SERVERS}")
        self.server, self.gguf_type, self.slab_args = server, None, []
        if server == "llama.cpp" or weights.lower().startswith("gguf-"):
            self.gguf_type = weights[5:] if weights.lower().startswith("gguf-") else weights
            if not re.fullmatch(r"[A-Za-z0-9_]+", self.gguf_type):
                raise ValueError(f"--variants item {item!r}: not a GGUF type (BF16, Q8_0, Q4_K_M, ...)")
            self.gguf_type = self.gguf_type.upper()
            self.weights = self.gguf_type if server == "llama.cpp" else f"gguf-{self.gguf_type}"
        else:
            mode, plus, head = weights.lower().partition("+")
            mode = "none" if mode == "bf16" else mode
            if mode not in SLAB_QUANTIZATIONS or (plus and (head != "head" or mode == "none")):
                raise ValueError(f"--variants item {item!r}: slabserve weights are bf16, w8, w8g32, w4, w4g128 "
                                 "(+head for --quantize-lm-head) or gguf-TYPE")
            self.slab_args = ["--quantization", mode] + (["--quantize-lm-head"] if plus else [])
            self.weights = ("bf16" if mode == "none" else mode) + ("+head" if plus else "")
        self.key = f"{server}-{self.weights.lower().replace('+', '-')}"

    def describe(self):
        """The weights as results.md names them."""
        if self.server == "llama.cpp":
            return f"GGUF {self.gguf_type}"
        if self.gguf_type:
            return f"GGUF {self.gguf_type} (same file)"
        return "HF BF16" if self.weights == "bf16" else f"HF, `{' '.join(self.slab_args)}`"


def parse_variants(spec):
    variants = [Variant(x) for x in spec.split(",") if x.strip()]
    keys = [v.key for v in variants]
    dup = {k for k in keys if keys.count(k) > 1}
    if dup:
        raise ValueError(f"--variants names {', '.join(sorted(dup))} twice")
    return variants


def loadavg():
    try:
        return " ".join(open("/proc/loadavg").read().split()[:3])
    except OSError:
        return "?"


STARTUP_LINE = re.compile(r"compute:|weights:|placement:|system_info|KV cache:|threadpool init|n_slots =")


def startup_lines(log_path, limit=200):
    """What a server said about its kernels, weights and placement once ready: slabserve's model /
    weights / placement / KV cache lines (timestamps cut), llama-server's system_info (older
    builds), thread pool and slot lines."""
    out = []
    try:
        with open(log_path, errors="replace") as f:
            for i, line in enumerate(f):
                if i >= limit:
                    break
                if STARTUP_LINE.search(line):
                    out.append(re.sub(r"^(\[[^]]*\] \[\w+\] |[\d.]+ [A-Z] +\w+ +)", "", line.strip())[:600])
    except OSError:
        pass
    return out


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


def process_memory(pid):
    """{'rss_mib', 'peak_rss_mib'} of a live process from /proc (VmRSS, VmHWM), or {} when gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        return {"rss_mib": round(int(fields["VmRSS"].split()[0]) / 1024, 1),
                "peak_rss_mib": round(int(fields["VmHWM"].split()[0]) / 1024, 1)}
    except (OSError, KeyError, ValueError):
        return {}


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


def bench_server(server, args, checkpoint, raw_dir, levels, status, variant=None):
    """Setup, start, warm up, bench every level, stop. Records into status[server.key]."""
    st = status.setdefault(server.key, {"name": server.name, "levels": {}})
    if variant is not None:
        st["variant"] = {"server": variant.server, "weights": variant.weights, "describe": variant.describe(),
                         "model": checkpoint}
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
        st["startup"] = startup_lines(log_path)
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
            t0, load0 = time.time(), loadavg()
            rc, out = run_bench(base, server.model_name(checkpoint), args, server.name, c, n, raw_dir, name, c)
            lv = {"rc": rc, "seconds": round(time.time() - t0, 1), "num_prompts": n, "file": name,
                  "load_before": load0, "load_after": loadavg()}
            if rc != 0:
                lv["error"] = out[-1500:]
            st["levels"][str(c)] = lv
            summary = [x for x in out.splitlines() if "throughput" in x or "Successful" in x or "Failed" in x]
            print("   " + "\n   ".join(summary[:4]), flush=True)
    except Exception as e:  # noqa: BLE001
        st["error"] = f"start/run failed: {e}"
        print(st["error"], flush=True)
    finally:
        if proc is not None and proc.poll() is None:
            st["memory"] = process_memory(proc.pid)  # after every level: the KV cache in use at its peak
        stop(proc)
        st["log_tail"] = tail(log_path, 5)


def write_machine(out_dir, args, status, load_before, started):
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
             f"- Load average (1/5/15 min) before the run: {load_before}; after it: {loadavg()} "
             "(the machine is shared with other jobs)",
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


def fresh(path, source):
    """path exists and is newer than source (a GGUF file made from an older checkpoint is remade)."""
    return os.path.isfile(path) and os.path.getmtime(path) >= os.path.getmtime(source)


def ensure_gguf(args, checkpoint, gguf_type):
    """WORK/<checkpoint>-<type>.gguf: llama.cpp's BF16 conversion of the checkpoint, quantized by
    its llama-quantize unless the type is BF16. Files older than the checkpoint's weights are remade."""
    tree, _ = peers.build_llama_cpp(args.work_dir, ["llama-server", "llama-quantize"])
    name = os.path.basename(checkpoint.rstrip("/"))
    weights = os.path.join(checkpoint, "model.safetensors")
    bf16 = os.path.join(args.work_dir, f"{name}-bf16.gguf")
    if not fresh(bf16, weights):
        peers.convert_hf_to_gguf(args.work_dir, tree, checkpoint, "bf16", bf16, args.convert_python)
    if gguf_type.upper() == "BF16":
        return bf16
    out = os.path.join(args.work_dir, f"{name}-{gguf_type}.gguf")
    if not fresh(out, bf16):
        peers.run_logged([os.path.join(tree, "build", "bin", "llama-quantize"), bf16, out + ".part", gguf_type],
                         os.path.join(args.work_dir, "llamacpp-setup.log"), f"llama-quantize {gguf_type}")
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
    variants = []
    if args.variants:
        if args.gguf or args.servers:
            sys.exit("--variants names the servers and weights itself: leave out --gguf and --servers")
        try:
            variants = parse_variants(args.variants)
        except ValueError as e:
            sys.exit(str(e))
    levels = [int(x) for x in args.concurrency.split(",")]
    suffix = f"-gguf-{args.gguf.lower()}" if args.gguf else ""
    if variants:
        quantized = any(v.weights.lower() not in ("bf16", "gguf-bf16") for v in variants)
        suffix = "-quantized-serving" if quantized else "-variants"
    out_dir = os.path.abspath(args.out_dir or os.path.join(REPO, "bench", "results",
                                                           f"{date.today().isoformat()}-{host_slug()}{suffix}"))
    raw_dir = os.path.join(out_dir, "raw")
    os.makedirs(raw_dir, exist_ok=True)
    status_path = os.path.join(out_dir, "status.json")
    status = json.load(open(status_path)) if os.path.isfile(status_path) else {}
    run_path = os.path.join(out_dir, "run.json")
    if args.report_only:
        order = []
        if os.path.isfile(run_path):  # the run's own parameters, not this command line's defaults
            with open(run_path) as f:
                run = json.load(f)
            for k in ("input_len", "output_len", "waves", "min_prompts", "max_prompts"):
                setattr(args, k, run.get(k, getattr(args, k)))
            levels, order = run.get("levels", levels), run.get("variants", [])
        if variant_keys(status):
            write_results_variants(out_dir, status, levels, args, order)
        else:
            write_results(out_dir, status, levels, args)
        make_plot(args, out_dir)
        return 0

    load_before = loadavg()
    started = datetime.utcnow().strftime("%Y-%m-%d %H:%M UTC")
    if variants:
        return run_variants(args, variants, levels, out_dir, raw_dir, status, run_path, load_before, started)
    allowed = GGUF_SERVERS if args.gguf else ALL_SERVERS
    wanted = [s for s in (args.servers or ",".join(allowed)).split(",") if s]
    for key in wanted:
        if key not in allowed:
            sys.exit(f"server {key} cannot run here; choose from {allowed}")
    checkpoint = ensure_checkpoint(args)
    if args.gguf:
        checkpoint = ensure_gguf(args, checkpoint, args.gguf)
    args.t0 = time.time()
    ctx = make_context(args, levels)
    for key in wanted:
        status.pop(key, None)
        bench_server(peers.make(key, ctx), args, checkpoint, raw_dir, levels, status)
        write_results(out_dir, status, levels, args)  # after each server, so a cut-short run keeps results
    write_machine(out_dir, args, status, load_before, started)
    make_plot(args, out_dir)
    print(f"results: {out_dir}/results.md")
    failed = [k for k in wanted if "error" in status[k] or any("error" in lv for lv in status[k]["levels"].values())]
    return 1 if any(k.startswith("slabserve") for k in failed) else 0


def make_context(args, levels):
    args.cores = cores = args.cores or sh(["sh", "-c", "cat /sys/devices/system/cpu/online"])
    return peers.Context(work_dir=args.work_dir, repo=REPO, binary=args.binary, cores=cores,
                         max_concurrency=max(levels), threads=len(peers.cpu_list(cores)),
                         convert_python=args.convert_python)


def run_variants(args, variants, levels, out_dir, raw_dir, status, run_path, load_before, started):
    """--variants: every GGUF file made first (none is made while a server is measured), then each
    variant set up, started, measured and stopped in turn; results.md rewritten after each."""
    checkpoint = ensure_checkpoint(args)
    models, errors = {}, {}
    for t in sorted({v.gguf_type for v in variants if v.gguf_type}):
        try:
            models[t] = ensure_gguf(args, checkpoint, t)
        except Exception as e:  # noqa: BLE001 -- the variants on this file are reported as not run
            errors[t] = f"GGUF {t} could not be made: {e}"
            print(errors[t], flush=True)
    with open(run_path, "w") as f:
        json.dump({"input_len": args.input_len, "output_len": args.output_len, "waves": args.waves,
                   "min_prompts": args.min_prompts, "max_prompts": args.max_prompts, "levels": levels,
                   "variants": [v.key for v in variants], "checkpoint": checkpoint,
                   "gguf": {t: p for t, p in models.items()}}, f, indent=1)
    order = [v.key for v in variants]
    args.t0 = time.time()
    ctx = make_context(args, levels)
    for v in variants:
        status.pop(v.key, None)
        server = peers.make(v.server, ctx)
        server.key, server.name = v.key, f"{server.name} {v.weights}"
        server.extra_args = v.slab_args + (shlex.split(args.slab_args) if v.server != "llama.cpp" else [])
        if v.gguf_type in errors:
            status[v.key] = {"name": server.name, "levels": {}, "error": errors[v.gguf_type],
                             "variant": {"server": v.server, "weights": v.weights, "describe": v.describe()}}
        else:
            bench_server(server, args, models.get(v.gguf_type, checkpoint), raw_dir, levels, status, v)
        write_results_variants(out_dir, status, levels, args, order)  # a cut-short run keeps what ran
    write_machine(out_dir, args, status, load_before, started)
    make_plot(args, out_dir)
    print(f"results: {out_dir}/results.md")
    failed = [v for v in variants if "error" in status[v.key]
              or any("error" in lv for lv in status[v.key]["levels"].values())]
    return 1 if any(v.server.startswith("slabserve") for v in failed) else 0


if __name__ == "__main__":
    sys.exit(main())
