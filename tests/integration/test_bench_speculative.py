#!/usr/bin/env python3
"""bench/bench_speculative.py's story workload, one short round, against the real binary: it runs
its servers, writes results.json, finds the greedy output unchanged by speculation, and counts
stories260K drafting for itself as (nearly) always accepted. The servers run with --no-amx: the
AMX tiles (16 rows or more) round unlike the decode rows, so on an AMX machine speculation keeps
the distribution but not the bits (docs/ARCHITECTURE.md), and greedy text may differ by timing;
without them every kernel set gives a row the same bits whatever rows share the step.

usage: test_bench_speculative.py [SLABSERVE [TESTDATA_DIR]]   (exit 77: skipped, no model)
"""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slabserve_process import binary_and_testdata, require_paths  # noqa: E402

BENCH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "bench_speculative.py")


def main():
    binary, testdata = binary_and_testdata()
    require_paths(binary, os.path.join(testdata, "models", "stories260K"))
    with tempfile.TemporaryDirectory() as out:
        p = subprocess.run([sys.executable, BENCH, "--binary", binary, "--testdata", testdata, "--workloads", "story",
                            "--concurrency", "1,4", "--repeat", "1", "--output-len", "24", "--result-dir", out,
                            "--server-args=--no-amx"],
                           capture_output=True, text=True, timeout=240)
        failures = []
        if p.returncode != 0:
            failures.append("exit %d: %s" % (p.returncode, (p.stdout + p.stderr)[-2000:]))
        else:
            with open(os.path.join(out, "results.json")) as f:
                summary = json.load(f)["summary"]
            if {(r["config"], r["concurrency"]) for r in summary} != {(c, n) for c in ("none", "ngram", "draft")
                                                                      for n in (1, 4)}:
                failures.append("rows: %s" % [(r["config"], r["concurrency"]) for r in summary])
            for r in summary:
                if not r["output_promised"]:
                    failures.append("%s c=%d: kernels without the equality (--no-amx not honoured?)" %
                                    (r["config"], r["concurrency"]))
                if not r["same_output_as_none"]:
                    failures.append("%s c=%d: output differs from the plain server's" % (r["config"], r["concurrency"]))
                if r["config"] == "draft" and not r["acceptance"] > 0.9:
                    failures.append("draft c=%d: acceptance %r" % (r["concurrency"], r["acceptance"]))
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("ok: %d rows" % len(summary))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
