#!/usr/bin/env python3
"""Serving load generator for OpenAI-compatible completion servers, with the metrics and metric
definitions of vLLM's `vllm bench serve` (so figures compare across tools). Standard library only.

    python3 bench/bench_serve.py --base-url http://127.0.0.1:8000 --random-input-len 128 \
        --random-output-len 128 --num-prompts 64 --max-concurrency 16 --save-result

Prompts are random token ids sent as token-id lists, so the input length is exact. Each request
streams (`stream_options.include_usage`), and its output length is read from the usage chunk.

Metrics (per request, then mean / median / P99 over requests, in ms):
  TTFT  time from sending the request to its first streamed content chunk
  TPOT  (E2EL - TTFT) / (output tokens - 1), requests with more than one output token
  ITL   gaps between successive streamed content chunks, pooled over all requests
  E2EL  time from sending the request to the end of its stream
Throughputs divide the completed requests' totals by the whole benchmark's duration.

`--json-schema FILE` constrains every request's output to that JSON Schema (`response_format`
json_schema, as the OpenAI SDK sends it): the cost of constrained decoding is the difference in
TPOT/ITL from the same run without it. A constrained request may end early (its document is
complete), so the output-length check is off then.

A request fails on an HTTP error, a broken or timed-out stream, or (with --ignore-eos and no
--json-schema) an output length other than the one asked for. The exit status is 1 when any
request failed, else 0.
"""
import argparse
import http.client
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse
from datetime import datetime

SPECIAL_IDS = 3  # ids 0-2 are <unk>, <s>, </s> in Llama-style vocabularies: never sampled


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base-url", default="http://127.0.0.1:8000")
    ap.add_argument("--endpoint", default="/v1/completions")
    ap.add_argument("--model", default=None, help="served model name (default: the first of GET /v1/models)")
    ap.add_argument("--backend", default="openai", help="recorded in the result as `backend`")
    ap.add_argument("--label", default=None, help="recorded in the result; also names the result file")
    ap.add_argument("--dataset-name", default="random", choices=["random"])
    ap.add_argument("--random-input-len", type=int, default=1024)
    ap.add_argument("--random-output-len", type=int, default=128)
    ap.add_argument("--random-prefix-len", type=int, default=0,
                    help="random tokens shared by every prompt, prepended to its own input")
    ap.add_argument("--random-range-ratio", type=float, default=0.0,
                    help="lengths drawn uniformly from [len*(1-r), len*(1+r)]")
    ap.add_argument("--vocab-size", type=int, default=32000,
                    help="token ids are drawn uniformly from [3, vocab-size)")
    ap.add_argument("--num-prompts", type=int, default=1000)
    ap.add_argument("--max-concurrency", type=int, default=None, help="requests in flight at most (default: no limit)")
    ap.add_argument("--request-rate", type=float, default=float("inf"),
                    help="requests per second, Poisson arrivals (default inf: all at once)")
    ap.add_argument("--seed", type=int, default=0)
    eos = ap.add_mutually_exclusive_group()
    eos.add_argument("--ignore-eos", dest="ignore_eos", action="store_true", default=True,
                     help="generate exactly the output length (default for random prompts)")
    eos.add_argument("--no-ignore-eos", dest="ignore_eos", action="store_false")
    ap.add_argument("--json-schema", default=None, metavar="FILE",
                    help="constrain each output to this JSON Schema (response_format json_schema)")
    ap.add_argument("--request-timeout", type=float, default=600.0,
                    help="seconds a request may wait for any single read before it fails")
    ap.add_argument("--save-result", action="store_true")
    ap.add_argument("--result-dir", default=".")
    ap.add_argument("--result-filename", default=None)
    ap.add_argument("--quiet", action="store_true", help="no table on stdout")
    args = ap.parse_args(argv)
    if args.vocab_size <= SPECIAL_IDS:
        ap.error("--vocab-size must exceed 3")
    if args.num_prompts < 1:
        ap.error("--num-prompts must be at least 1")
    return args


class Target:
    """Where requests go: scheme, host, port and path prefix from --base-url."""

    def __init__(self, base_url, timeout):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https"):
            raise ValueError(f"--base-url must be http(s)://HOST[:PORT]: {base_url}")
        self.https = u.scheme == "https"
        self.host = u.hostname or "127.0.0.1"
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout

    def connect(self):
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        return cls(self.host, self.port, timeout=self.timeout)

    def get_json(self, path):
        conn = self.connect()
        try:
            conn.request("GET", self.prefix + path)
            r = conn.getresponse()
            body = r.read()
            if r.status != 200:
                raise RuntimeError(f"GET {path}: HTTP {r.status}: {body[:200]!r}")
            return json.loads(body)
        finally:
            conn.close()


def sample_requests(args):
    """[(prompt token ids, output length)] as vLLM's random dataset draws them (own generator)."""
    rng = random.Random(args.seed)
    hi = args.vocab_size - 1
    prefix = [rng.randint(SPECIAL_IDS, hi) for _ in range(args.random_prefix_len)]
    r = args.random_range_ratio

    def length(n):
        lo, up = max(1, int(n * (1 - r))), max(1, int(n * (1 + r)))
        return rng.randint(lo, up)

    out = []
    for _ in range(args.num_prompts):
        n_in, n_out = length(args.random_input_len), length(args.random_output_len)
        out.append((prefix + [rng.randint(SPECIAL_IDS, hi) for _ in range(n_in)], n_out))
    return out


class Result:
    def __init__(self, prompt_len):
        self.prompt_len = prompt_len
        self.success = False
        self.output_tokens = 0
        self.started = 0.0  # time.perf_counter() when the request was sent
        self.ttft = 0.0
        self.latency = 0.0
        self.itl = []
        self.text = ""
        self.error = ""


def run_request(target, endpoint, payload, expected_out, ignore_eos):
    """One streamed completion; fills a Result with timings from time.perf_counter()."""
    res = Result(len(payload["prompt"]))
    body = json.dumps(payload).encode()
    conn = target.connect()
    start = res.started = time.perf_counter()
    try:
        conn.request("POST", target.prefix + endpoint, body=body,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            res.error = f"HTTP {resp.status}: {resp.read(300).decode(errors='replace')}"
            return res
        last, chunks, usage_tokens, done, pieces = start, 0, None, False, []
        while True:
            line = resp.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, other SSE fields
            data = line[5:].strip()
            if data == b"[DONE]":
                done = True
                break
            now = time.perf_counter()
            msg = json.loads(data)
            if "error" in msg and not msg.get("choices"):
                res.error = f"error event: {json.dumps(msg['error'])[:300]}"
                return res
            if msg.get("choices"):
                # Any chunk with a choice is a content chunk, as in vLLM (text may be empty).
                if chunks == 0:
                    res.ttft = now - start
                else:
                    res.itl.append(now - last)
                last = now
                chunks += 1
                pieces.append(msg["choices"][0].get("text") or "")
            if msg.get("usage"):
                usage_tokens = msg["usage"].get("completion_tokens")
        res.latency = time.perf_counter() - start
        res.text = "".join(pieces)
        if not done:
            res.error = f"stream ended without [DONE] after {chunks} chunks"
            return res
        if chunks == 0:
            res.error = "stream had no content chunk"
            return res
        res.output_tokens = usage_tokens if usage_tokens is not None else chunks
        if ignore_eos and res.output_tokens != expected_out:
            res.error = f"got {res.output_tokens} output tokens, asked for {expected_out}"
            return res
        res.success = True
    except Exception as e:  # noqa: BLE001 -- every failure of one request is recorded, never raised
        res.latency = time.perf_counter() - start
        res.error = f"{type(e).__name__}: {e}"
    finally:
        conn.close()
    return res


def arrival_offsets(n, rate, seed):
    """Seconds after the start at which each request is issued: 0 for rate inf, else Poisson."""
    if math.isinf(rate):
        return [0.0] * n
    rng = random.Random(seed + 1)
    t, out = 0.0, []
    for _ in range(n):
        out.append(t)
        t += rng.expovariate(rate)
    return out


def run_benchmark(args, target, model, requests):
    results = [None] * len(requests)
    limit = args.max_concurrency or len(requests)
    schema = None
    if args.json_schema:
        with open(args.json_schema, encoding="utf-8") as f:
            schema = json.load(f)
    gate = threading.Semaphore(limit)
    threads = []

    def worker(i):
        prompt, n_out = requests[i]
        payload = {"prompt": prompt, "max_tokens": n_out, "temperature": 0, "stream": True,
                   "stream_options": {"include_usage": True}, "ignore_eos": args.ignore_eos}
        if model:
            payload["model"] = model
        if schema is not None:
            payload["response_format"] = {"type": "json_schema",
                                          "json_schema": {"name": "bench", "schema": schema, "strict": True}}
        # Requests are issued on schedule and then queue for a slot, as in vLLM's semaphore.
        with gate:
            results[i] = run_request(target, args.endpoint, payload, n_out, args.ignore_eos and schema is None)

    offsets = arrival_offsets(len(requests), args.request_rate, args.seed)
    start = time.perf_counter()
    for i, off in enumerate(offsets):
        delay = start + off - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        t = threading.Thread(target=worker, args=(i,), daemon=True)
        t.start()
        threads.append(t)
    for t in threads:
        t.join()
    for r in results:
        r.started -= start  # seconds after the benchmark's start
    return results, time.perf_counter() - start


def percentile(values, p):
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return 0.0
    s = sorted(values)
    k = (len(s) - 1) * p / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (k - lo)


def summarize(args, model, results, duration):
    ok = [r for r in results if r.success]
    total_in = sum(r.prompt_len for r in ok)
    total_out = sum(r.output_tokens for r in ok)
    ttfts = [r.ttft for r in ok]
    tpots = [(r.latency - r.ttft) / (r.output_tokens - 1) for r in ok if r.output_tokens > 1]
    itls = [x for r in ok for x in r.itl]
    e2els = [r.latency for r in ok]
    m = {
        "date": datetime.now().strftime("%Y%m%d-%H%M%S"),
        "backend": args.backend,
        "json_schema": args.json_schema,
        "label": args.label,
        "model_id": model,
        "base_url": args.base_url,
        "endpoint": args.endpoint,
        "dataset_name": args.dataset_name,
        "random_input_len": args.random_input_len,
        "random_output_len": args.random_output_len,
        "random_prefix_len": args.random_prefix_len,
        "random_range_ratio": args.random_range_ratio,
        "num_prompts": len(results),
        "request_rate": "inf" if math.isinf(args.request_rate) else args.request_rate,
        "max_concurrency": args.max_concurrency,
        "seed": args.seed,
        "duration": duration,
        "completed": len(ok),
        "failed": len(results) - len(ok),
        "total_input_tokens": total_in,
        "total_output_tokens": total_out,
        "request_throughput": len(ok) / duration if duration > 0 else 0.0,
        "output_throughput": total_out / duration if duration > 0 else 0.0,
        "total_token_throughput": (total_in + total_out) / duration if duration > 0 else 0.0,
    }
    for name, vals in (("ttft", ttfts), ("tpot", tpots), ("itl", itls), ("e2el", e2els)):
        m[f"mean_{name}_ms"] = statistics.fmean(vals) * 1000 if vals else 0.0
        m[f"median_{name}_ms"] = percentile(vals, 50) * 1000
        m[f"std_{name}_ms"] = statistics.pstdev(vals) * 1000 if vals else 0.0
        m[f"p99_{name}_ms"] = percentile(vals, 99) * 1000
    m.update(input_lens=[r.prompt_len for r in results], output_lens=[r.output_tokens for r in results],
             ttfts=[r.ttft for r in results], itls=[r.itl for r in results],
             start_offsets=[r.started for r in results],
             generated_texts=[r.text for r in results], errors=[r.error for r in results])
    return m


def print_table(m):
    line = "{:<40} {:<10}".format
    num = "{:<40} {:<10.2f}".format
    print("{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="="))
    print(line("Successful requests:", m["completed"]))
    print(line("Failed requests:", m["failed"]))
    if m["max_concurrency"] is not None:
        print(line("Maximum request concurrency:", m["max_concurrency"]))
    print(num("Benchmark duration (s):", m["duration"]))
    print(line("Total input tokens:", m["total_input_tokens"]))
    print(line("Total generated tokens:", m["total_output_tokens"]))
    print(num("Request throughput (req/s):", m["request_throughput"]))
    print(num("Output token throughput (tok/s):", m["output_throughput"]))
    print(num("Total Token throughput (tok/s):", m["total_token_throughput"]))
    for key, title, short in (("ttft", "Time to First Token", "TTFT"),
                              ("tpot", "Time per Output Token (excl. 1st token)", "TPOT"),
                              ("itl", "Inter-token Latency", "ITL"),
                              ("e2el", "End-to-end Latency", "E2EL")):
        print("{s:{c}^{n}}".format(s=title, n=50, c="-"))
        print(num(f"Mean {short} (ms):", m[f"mean_{key}_ms"]))
        print(num(f"Median {short} (ms):", m[f"median_{key}_ms"]))
        print(num(f"P99 {short} (ms):", m[f"p99_{key}_ms"]))
    print("=" * 50)


def main(argv=None):
    args = parse_args(argv)
    target = Target(args.base_url, args.request_timeout)
    model = args.model
    if model is None:
        try:
            model = target.get_json("/v1/models")["data"][0]["id"]
        except Exception as e:  # noqa: BLE001 -- the requests themselves will show what is wrong
            print(f"warning: cannot read the model name from GET /v1/models ({type(e).__name__}: {e}); "
                  "sending requests without one", file=sys.stderr)
    requests = sample_requests(args)
    rate = "inf" if math.isinf(args.request_rate) else args.request_rate
    print(f"{len(requests)} prompts of {args.random_prefix_len}+{args.random_input_len} tokens, "
          f"{args.random_output_len} out, concurrency {args.max_concurrency}, rate {rate}, model {model}",
          flush=True)
    results, duration = run_benchmark(args, target, model, requests)
    m = summarize(args, model, results, duration)
    if not args.quiet:
        print_table(m)
    errors = [(i, r.error) for i, r in enumerate(results) if not r.success]
    if errors:
        print(f"{len(errors)} of {len(results)} requests failed; first errors:", file=sys.stderr)
        for i, e in errors[:5]:
            print(f"  request {i}: {e}", file=sys.stderr)
    if args.save_result:
        name = args.result_filename
        if not name:
            c = f"-concurrency{args.max_concurrency}" if args.max_concurrency else ""
            name = f"{args.label or args.backend}-{rate}qps{c}-{(model or 'model').split('/')[-1]}-{m['date']}.json"
        os.makedirs(args.result_dir, exist_ok=True)
        path = os.path.join(args.result_dir, name)
        with open(path, "w") as f:
            json.dump(m, f, indent=1)
        print(f"result: {path}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
