#!/usr/bin/env python3
"""Speculative decoding over the served binary: decode speed and acceptance with and without
speculation (prompt lookup "[ngram]" and a draft model), at c = 1, 4 and 16 requests in flight,
each against the same server without speculation, all in one run.

    python3 bench/make_random_checkpoint.py --shape tinyllama-6l --copy-cycle 24 \
        --tokenizer-from ../shared/testdata/tokenizers/llama2 /tmp/slab-spec/tinyllama-6l-copy
    python3 bench/make_random_checkpoint.py --shape tinyllama-1l --copy-cycle 24 \
        --tokenizer-from ../shared/testdata/tokenizers/llama2 /tmp/slab-spec/tinyllama-1l-copy
    python3 bench/bench_speculative.py --copy-model /tmp/slab-spec/tinyllama-6l-copy \
        --copy-draft /tmp/slab-spec/tinyllama-1l-copy --result-dir bench/results/2026-11-25-speculative

Workloads (greedy, end-of-sequence ignored, every request the same output length):
  story    stories260K continuing distinct story openings. The draft model is stories260K itself:
           every draft is accepted, so this measures what the machinery costs where a model is
           too small to be bound by reading its weights; prompt lookup finds what it can.
  copy     a random-weight TinyLlama-shaped checkpoint (six layers, 0.79 GB: bound by reading its
           weights, like a real model) whose output head makes it copy: greedy decoding repeats a
           cycle of 24 tokens (make_random_checkpoint.py --copy-cycle). Each prompt is its cycle
           twice and six tokens more, so prompt lookup proposes the copy; the draft model is the
           one-layer checkpoint of the same seed (the same embedding, head and cycles).
Every configuration's server is started at once and the runs go round by round (c = 1, 4, 16,
each configuration in turn), --repeat rounds; the table gives medians over the rounds. The
speculating servers run with --speculative-disable-by-batch-size 0 (always on), so the table
shows what speculation does at each concurrency, and so what a threshold B would do: speculation
as measured at c <= B, the plain server's figures above it.

Per run: output tokens per second over the run (all requests), mean TPOT ((E2E - TTFT) / (n - 1)
per request: the decode speed a client sees), the server's CPU time (all threads, user + system)
per output token, which other processes on a shared machine disturb less than wall time (the
pool's threads spin ~0.1 ms before they park, so idle gaps count a little), and from /metrics
the draft tokens proposed and accepted (acceptance = accepted / proposed) and the tokens each
verification emitted. The speed-up is TPOT without speculation / TPOT with it, at the same
concurrency and round. Raw results go to
RESULT_DIR/results.json and a Markdown table to RESULT_DIR/results.md. Standard library only.

Greedy output must not change with speculation, and the exit status is 1 where it does, unless
the server computes on the AMX tiles (its start-up line's kernel set names amx): its linears of
16 rows or more round their sums unlike the AVX-512 decode rows, so a verification step's logits
can differ from plain decoding's in the last bits (docs/ARCHITECTURE.md). Such rows say "differs
(AMX)" and do not fail; --server-args=--no-amx measures where the equality holds.

With --llama-server PATH (a llama.cpp build's TREE/build/bin/llama-server) the copy workload also
runs the peer in the same rounds, on the same checkpoints converted to BF16 GGUF by TREE's
convert_hf_to_gguf.py (run by --convert-python, which needs torch, transformers, safetensors and
sentencepiece; the .gguf files are cached beside the checkpoints): llama-server plain, with
prompt lookup (--spec-type ngram-simple, 3-token lookup, k-token drafts) and with the draft model
(--spec-type draft-simple, --spec-draft-n-max k), --threads as slabserve's, one slot per request
of the highest concurrency, acceptance from its /metrics. Its speed-ups are against llama-server
plain; "vs llama-server" is llama-server's TPOT / slabserve's for the same proposer, c and round
(above 1: slabserve decodes faster). A peer that fails to convert or start is reported, not fatal.
"""
import argparse
import http.client
import json
import os
import re
import shlex
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from datetime import datetime

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from slabserve_process import SlabserveProcess  # noqa: E402
import speculative_llama_server as llama_peer  # noqa: E402
from compare_peers import cpu_model  # noqa: E402

STORY_OPENINGS = [
    "Once upon a time, there was a little girl named Lily.",
    "Tom had a big red ball. One day,",
    "The sun was shining and the birds were singing.",
    "Sue and her mom went to the park.",
    "There was a small dog who liked to run.",
    "One day, a boy found a shiny stone.",
    "The cat sat on the mat and looked at the bird.",
    "Ben wanted to build a tall tower.",
]


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/slabserve")
    ap.add_argument("--testdata", default="../shared/testdata")
    ap.add_argument("--copy-model", default=None, help="checkpoint for the copy workload (skipped without)")
    ap.add_argument("--copy-draft", default=None, help="its draft model (no draft-model runs without)")
    ap.add_argument("--workloads", default="story,copy")
    ap.add_argument("--concurrency", default="1,4,16")
    ap.add_argument("--output-len", type=int, default=128)
    ap.add_argument("--copy-output-len", type=int, default=96)
    ap.add_argument("-k", "--num-speculative-tokens", type=int, default=4)
    ap.add_argument("--threads", type=int, default=0, help="server --threads (0: its default)")
    ap.add_argument("--server-args", default="", help="more flags for every slabserve server, e.g. --no-amx")
    ap.add_argument("--repeat", type=int, default=3, help="interleaved rounds; the table shows medians")
    ap.add_argument("--result-dir", default=None)
    ap.add_argument("--llama-server", default=None, help="also run this llama-server on the copy workload")
    ap.add_argument("--convert-python", default=sys.executable,
                    help="the Python that runs convert_hf_to_gguf.py for --llama-server")
    return ap.parse_args()


def post_json(url, body, timeout=600):
    req = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read())


def metrics(url):
    """The spec_decode counters of /metrics (zeros where absent: speculation off): slabserve's
    "vllm:" names or llama-server's "llamacpp:" ones, which have no emitted-tokens counter (each
    verification emits its accepted drafts and one token of its own)."""
    with urllib.request.urlopen(url + "/metrics", timeout=30) as r:
        page = r.read().decode()
    out = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0, "emitted": None}
    names = {"spec_decode_num_drafts_total": "drafts", "spec_decode_num_draft_tokens_total": "draft_tokens",
             "spec_decode_num_accepted_tokens_total": "accepted", "spec_decode_num_emitted_tokens_total": "emitted"}
    for line in page.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0].split(":", 1)[-1]
        if name in names and not line.startswith("#"):
            out[names[name]] = (out[names[name]] or 0.0) + float(line.rsplit(" ", 1)[1])
    if out["emitted"] is None:
        out["emitted"] = out["accepted"] + out["drafts"]
    return out


def stream_request(port, prompt, max_tokens):
    """One streamed greedy completion: (TTFT s, E2E s, completion tokens, text)."""
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
                       "stream": True, "stream_options": {"include_usage": True}})
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=900)
    start = time.perf_counter()
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    if resp.status != 200:
        raise RuntimeError("HTTP %d: %s" % (resp.status, resp.read()[:300]))
    ttft, tokens, text = None, 0, ""
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        event = json.loads(line[6:])
        for choice in event.get("choices", []):
            if choice.get("text"):
                if ttft is None:
                    ttft = time.perf_counter() - start
                text += choice["text"]
        if event.get("usage"):
            tokens = event["usage"]["completion_tokens"]
    e2e = time.perf_counter() - start
    conn.close()
    return ttft if ttft is not None else e2e, e2e, tokens, text


def cpu_seconds(pid):
    """User + system CPU time of the server process so far (all its threads)."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_level(server, prompts, c, n_requests, max_tokens):
    """n_requests requests, at most c in flight; the run's figures."""
    before = metrics(server.url)
    cpu_before = cpu_seconds(server.proc.pid)
    results, lock, next_index = [], threading.Lock(), [0]

    def worker():
        while True:
            with lock:
                i = next_index[0]
                if i >= n_requests:
                    return
                next_index[0] += 1
            r = stream_request(server.port, prompts[i % len(prompts)], max_tokens)
            with lock:
                results.append(r)

    load_before = os.getloadavg()[0]
    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(c)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    duration = time.perf_counter() - start
    cpu = cpu_seconds(server.proc.pid) - cpu_before
    after = metrics(server.url)
    delta = {k: after[k] - before[k] for k in after}
    tokens = sum(r[2] for r in results)
    if any(r[2] != max_tokens for r in results):
        raise RuntimeError("a request returned %s tokens, not %d" % ([r[2] for r in results], max_tokens))
    tpot = [(r[1] - r[0]) / (r[2] - 1) for r in results if r[2] > 1]
    return {
        "concurrency": c, "requests": n_requests, "duration_s": duration, "output_tokens": tokens,
        "output_tokens_per_s": tokens / duration, "mean_tpot_ms": 1000 * statistics.mean(tpot),
        "mean_ttft_ms": 1000 * statistics.mean(r[0] for r in results),
        "server_cpu_ms_per_token": 1000 * cpu / tokens,
        "draft_tokens": delta["draft_tokens"], "accepted_tokens": delta["accepted"], "drafts": delta["drafts"],
        "acceptance": delta["accepted"] / delta["draft_tokens"] if delta["draft_tokens"] else None,
        "tokens_per_verification": delta["emitted"] / delta["drafts"] if delta["drafts"] else None,
        "load_average_1m": [load_before, os.getloadavg()[0]],
        "texts": sorted(r[3] for r in results),
    }


def main():
    args = parse_args()
    k = str(args.num_speculative_tokens)
    stories = os.path.join(args.testdata, "models", "stories260K")
    threads = ["--threads", str(args.threads)] if args.threads else []
    levels = [int(c) for c in args.concurrency.split(",")]
    ngram = ["--speculative-model", "[ngram]", "--num-speculative-tokens", k, "--ngram-prompt-lookup-max", "3"]
    draft = ["--speculative-model", stories, "--num-speculative-tokens", k]
    # Speculation on at every batch size: what --speculative-disable-by-batch-size B does is then
    # read off the table (at c <= B it is this run, above B it is the run without speculation).
    always = ["--speculative-disable-by-batch-size", "0"]

    def slabserve(model, flags):
        return [("slabserve", label, lambda log, f=f: SlabserveProcess(
            args.binary, model, *threads, *f, "--max-num-seqs", "32", "--kv-cache-memory", "0.25",
            *shlex.split(args.server_args), timeout=300, log_path=log)) for label, f in flags]

    workloads, peer, peer_errors = [], None, []
    chosen = args.workloads.split(",")
    if "story" in chosen:
        workloads.append(("story", stories, STORY_OPENINGS, args.output_len,
                          slabserve(stories, [("none", []), ("ngram", ngram + always), ("draft", draft + always)])))
    if "copy" in chosen and args.copy_model:
        with open(os.path.join(args.copy_model, "copy_cycles.json")) as f:
            cycles = json.load(f)
        prompts = [cycle + cycle + cycle[:6] for cycle in cycles[:16]]
        flags = [("none", []), ("ngram", ngram + always)]
        if args.copy_draft:
            flags.append(("draft", ["--speculative-model", args.copy_draft, "--num-speculative-tokens", k] + always))
        configs = slabserve(args.copy_model, flags)
        if args.llama_server:
            peer = llama_peer.describe(args.llama_server)
            try:
                configs += [("llama-server", label, lambda log, s=start: s()) for label, start in llama_peer.configs(
                    args.llama_server, args.copy_model, args.copy_draft, args.num_speculative_tokens,
                    args.threads or os.cpu_count(), max(levels), args.convert_python)]
            except RuntimeError as e:
                peer_errors.append("copy: GGUF conversion failed: %s" % e)
        workloads.append(("copy", args.copy_model, prompts, args.copy_output_len, configs))

    started = datetime.now().isoformat(timespec="seconds")
    runs, commands = [], {}
    for name, model, prompts, max_tokens, configs in workloads:
        # Every configuration's server up at once (idle ones park their threads), and the runs
        # interleaved: on a shared machine the load drifts, and the comparison is per round.
        servers = {}
        log = tempfile.NamedTemporaryFile(prefix="bench_speculative_", suffix=".log", delete=False).name
        try:
            for server, label, start in configs:
                try:
                    servers[server, label] = start(log if (server, label) == ("slabserve", "none") else None)
                except RuntimeError as e:
                    if server == "slabserve":
                        raise
                    peer_errors.append("%s: %s %s did not start: %s" % (name, server, label, e))
            # A peer's speculating servers are measured against its plain one: without it, none.
            for key in [key for key in servers if key[0] != "slabserve" and (key[0], "none") not in servers]:
                servers.pop(key).stop()
            with open(log) as f:  # the start-up line names the kernel set: "compute: bf16 avx512_bf16 ..."
                found = re.search(r"compute: ([^\n]*)", f.read())
            compute = found.group(1) if found else ""
            commands.update({"%s %s %s" % (name, *key): " ".join(p.proc.args) for key, p in servers.items()})
            for round_ in range(args.repeat):
                for c in levels:
                    for (server, label), process in servers.items():
                        run = run_level(process, prompts, c, max(3, c), max_tokens)
                        run.update(workload=name, server=server, config=label, model=model, compute=compute,
                                   round=round_)
                        runs.append(run)
                        acc = "-" if run["acceptance"] is None else "%.2f" % run["acceptance"]
                        print("%-5s %-12s %-5s c=%-3d round %d %7.1f tok/s  TPOT %7.2f ms  CPU %6.2f ms/token  "
                              "acceptance %s  load %.1f" %
                              (name, server, label, c, round_, run["output_tokens_per_s"], run["mean_tpot_ms"],
                               run["server_cpu_ms_per_token"], acc, run["load_average_1m"][1]), flush=True)
        finally:
            for process in servers.values():
                process.stop()
            os.unlink(log)
    for error in peer_errors:
        print("peer error:", error)

    compare_runs(runs)
    summary = summarize(runs)
    table = markdown_table(summary, peer_errors)
    print("\n".join(table))
    if args.result_dir:
        os.makedirs(args.result_dir, exist_ok=True)
        machine = {"cpu": cpu_model(), "cores": os.cpu_count(), "started": started,
                   "finished": datetime.now().isoformat(timespec="seconds"), "command": " ".join(sys.argv),
                   "peer": peer, "peer_errors": peer_errors, "server_commands": commands}
        for r in runs:
            r.pop("texts")
        with open(os.path.join(args.result_dir, "results.json"), "w") as f:
            json.dump({"machine": machine, "summary": summary, "runs": runs}, f, indent=1)
        with open(os.path.join(args.result_dir, "results.md"), "w") as f:
            f.write("%s, %d cpus, %s to %s; medians over %d interleaved rounds%s\n\n%s\n" % (
                machine["cpu"], machine["cores"], started, machine["finished"], args.repeat,
                "; peer: " + peer if peer else "", "\n".join(table)))
    return 0 if all(r["same_output_as_none"] or not output_promised(r) for r in runs) else 1


def output_promised(run):
    """Whether speculation must leave this run's greedy output as the plain server's: not on
    slabserve's AMX tiles (rows of 16 or more round unlike the decode rows)."""
    return run["server"] != "slabserve" or "amx" not in run["compute"]


def same_round(runs, run, **fields):
    """The run of the same workload, concurrency and round as `run`, with `fields` as given (or None)."""
    return next((r for r in runs if all(r[key] == run[key] for key in ("workload", "concurrency", "round")) and
                 all(r[key] == value for key, value in fields.items())), None)


def compare_runs(runs):
    """Each run against its own server without speculation (greedy output must not change, and
    the speed-ups), and slabserve's against llama-server's with the same proposer."""
    for run in runs:
        plain = same_round(runs, run, server=run["server"], config="none")
        run["same_output_as_none"] = run["texts"] == plain["texts"]
        run["speedup_tpot"] = ratio(plain["mean_tpot_ms"], run["mean_tpot_ms"])
        run["speedup_throughput"] = ratio(run["output_tokens_per_s"], plain["output_tokens_per_s"])
        run["speedup_cpu"] = ratio(plain["server_cpu_ms_per_token"], run["server_cpu_ms_per_token"])
        peer = same_round(runs, run, server="llama-server", config=run["config"])
        run["tpot_vs_llama_server"] = ratio(peer["mean_tpot_ms"], run["mean_tpot_ms"]) \
            if peer and run["server"] == "slabserve" else None
        if run["server"] != "slabserve":
            ours = same_round(runs, run, server="slabserve", config="none")
            run["same_output_as_slabserve"] = ours is not None and run["texts"] == ours["texts"]


def markdown_table(summary, peer_errors):
    table = ["| workload | server | config | c | tok/s | TPOT ms | TPOT speed-up | throughput x | CPU ms/token | "
             "CPU x | acceptance | tokens/verification | vs llama-server (TPOT) | same output |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary:
        table.append("| %s | %s | %s | %d | %.1f | %.2f | %.2fx | %.2fx | %.2f | %.2fx | %s | %s | %s | %s |" % (
            r["workload"], r["server"], r["config"], r["concurrency"], r["output_tokens_per_s"], r["mean_tpot_ms"],
            r["speedup_tpot"], r["speedup_throughput"], r["server_cpu_ms_per_token"], r["speedup_cpu"],
            "-" if r["acceptance"] is None else "%.2f" % r["acceptance"],
            "-" if r["tokens_per_verification"] is None else "%.2f" % r["tokens_per_verification"],
            "-" if r["tpot_vs_llama_server"] is None else "%.2fx" % r["tpot_vs_llama_server"],
            "yes" if r["same_output_as_none"] else "NO" if r["output_promised"] else "differs (AMX)"))
    for error in peer_errors:
        table.append("| %s | failed | | | | | | | | | | | | |" % error.replace("|", "/").replace("\n", " "))
    return table


def ratio(a, b):
    """a / b; a run too short to time (all its tokens in one event, no CPU tick) gives nan."""
    return a / b if b else float("nan")


def summarize(runs):
    """Per workload, configuration and concurrency: medians over the rounds (speed-ups are the
    medians of each round's ratio to the run without speculation), acceptance over all rounds."""
    keys = []
    for r in runs:
        key = (r["workload"], r["server"], r["config"], r["concurrency"])
        if key not in keys:
            keys.append(key)
    out = []
    for workload, server, config, c in keys:
        rs = [r for r in runs if (r["workload"], r["server"], r["config"], r["concurrency"]) ==
              (workload, server, config, c)]
        row = {"workload": workload, "server": server, "config": config, "concurrency": c, "rounds": len(rs),
               "same_output_as_none": all(r["same_output_as_none"] for r in rs),
               "output_promised": all(output_promised(r) for r in rs)}
        for field in ("output_tokens_per_s", "mean_tpot_ms", "server_cpu_ms_per_token", "speedup_tpot",
                      "speedup_throughput", "speedup_cpu"):
            row[field] = statistics.median(r[field] for r in rs)
        versus = [r["tpot_vs_llama_server"] for r in rs if r["tpot_vs_llama_server"] is not None]
        row["tpot_vs_llama_server"] = statistics.median(versus) if versus else None
        if server != "slabserve":
            row["same_output_as_slabserve"] = all(r["same_output_as_slabserve"] for r in rs)
        drafted = sum(r["draft_tokens"] for r in rs)
        drafts = sum(r["drafts"] for r in rs)
        row["acceptance"] = sum(r["accepted_tokens"] for r in rs) / drafted if drafted else None
        row["tokens_per_verification"] = (sum(r["tokens_per_verification"] * r["drafts"] for r in rs) / drafts
                                          if drafts else None)
        out.append(row)
    return out


if __name__ == "__main__":
    sys.exit(main())
