#!/usr/bin/env python3
"""The bound bench_engine prints (model/forward_work.h), worked out again from the per-bucket
work a bench_engine log lists under its row, at another machine's measured peaks: here the
16-core Xeon's, from a device_check RATIO log (`### round N, T threads` blocks with the read
bandwidth and the tdpbf16ps peak at T threads). The passes a c = 64 run makes do not depend on
the thread count (same requests, same token budget), so the bound's ratio between two thread
counts is how far that machine lets the run scale.

  bound_at_peaks.py ENGINE_LOG RATIO_LOG [--bandwidth-log MODEL_LOG]

The read term must be DRAM's. A RATIO_LOG from before bench_linear_bf16 --limits-only swept
bench::dram_probe_bytes() measured it over 300 MB, the device's L3 size, which read 151-160 GB/s
on 16 threads where DRAM gives ~105. --bandwidth-log takes the bandwidth instead from bench_model
runs in MODEL_LOG (`$ ... --threads N ...` then its `roofline: ... read bandwidth X GB/s` line,
a 1 GiB sweep or more): the median of each thread count's samples, with each round's tile peak.
"""
import re
import statistics
import sys


def runs(engine_log):
    """The per-bucket work of each bench_engine row in the log (one list per row)."""
    pat = re.compile(r"passes of (\d+)-(\d+) rows: (\d+), linears ([\d.]+) GFLOP, attention ([\d.]+) GFLOP, "
                     r"weights ([\d.]+) GB, K/V ([\d.]+) GB")
    out = []
    for line in open(engine_log):
        if re.match(r"\d+\s+\d+\s", line):  # a concurrency row: its buckets follow
            out.append([])
        m = pat.search(line)
        if m and out:
            out[-1].append(tuple(float(g) for g in m.groups()))
    return [r for r in out if r]


def peaks(ratio_log):
    """{threads: [(read GB/s, tdpbf16ps GFLOP/s), ...]} over the log's rounds."""
    out, threads, bw = {}, None, None
    for line in open(ratio_log):
        m = re.match(r"### round \d+, (\d+) threads", line)
        if m:
            threads, bw = int(m.group(1)), None
            continue
        m = re.match(r"read bandwidth \(.*\): ([\d.]+) GB/s", line)
        if m and threads:
            bw = float(m.group(1))
        m = re.match(r"bf16 peak \(tdpbf16ps, \d+ threads\):\s+([\d.]+) GFLOP/s", line)
        if m and threads and bw:
            out.setdefault(threads, []).append((bw, float(m.group(1))))
    return out


def model_bandwidths(model_log):
    """{threads: median read GB/s} over the bench_model runs in the log."""
    out, threads = {}, None
    for line in open(model_log):
        m = re.match(r"\$ .*--threads (\d+)", line)
        if m:
            threads = int(m.group(1))
            continue
        m = re.match(r"roofline: .*read bandwidth ([\d.]+) GB/s", line)
        if m and threads:
            out.setdefault(threads, []).append(float(m.group(1)))
    return {t: statistics.median(v) for t, v in out.items()}


def bound(rows, read_gbs, gflops):
    total = 0.0
    for _lo, _hi, _n, lin, att, wgb, kvgb in rows:
        total += max((lin + att) / gflops, (wgb + kvgb) / read_gbs)
    return total


def main():
    args = sys.argv[1:]
    dram = None
    if "--bandwidth-log" in args:
        i = args.index("--bandwidth-log")
        dram = model_bandwidths(args[i + 1])
        del args[i:i + 2]
    by_threads = peaks(args[1])
    all_runs = runs(args[0])
    if dram is not None:
        missing = [t for t in by_threads if t not in dram]
        if missing:
            sys.exit(f"bound_at_peaks: no bench_model bandwidth for {missing} threads in the bandwidth log")
        by_threads = {t: [(dram[t], fl) for _bw, fl in v] for t, v in by_threads.items()}
        print("read bandwidth from the bandwidth log: " + ", ".join(f"{t} threads {dram[t]:.1f} GB/s"
                                                                     for t in sorted(dram) if t in by_threads))
    if not all_runs or len(by_threads) < 2:
        sys.exit("bound_at_peaks: no 'passes of' lines, or fewer than two thread counts in the ratio log")
    lo, hi = min(by_threads), max(by_threads)
    for i, rows in enumerate(all_runs, 1):
        print(f"run {i}: {int(sum(r[2] for r in rows))} passes")
        bounds = {}
        for t in (hi, lo):
            per_round = [bound(rows, bw, fl) for bw, fl in by_threads[t]]
            bounds[t] = per_round
            print(f"  {t:2d} threads: " + ", ".join(f"{bw:.1f} GB/s and {fl:.0f} GFLOP/s -> {b:.2f} s"
                                                  for (bw, fl), b in zip(by_threads[t], per_round)))
        ratios = [a / b for a, b in zip(bounds[lo], bounds[hi])]
        print(f"  bound ratio, {hi} threads over {lo}, round by round: " + ", ".join(f"{r:.2f}x" for r in ratios)
              + f" (median {statistics.median(ratios):.2f}x)")


if __name__ == "__main__":
    main()
