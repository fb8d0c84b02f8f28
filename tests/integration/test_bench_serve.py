#!/usr/bin/env python3
"""bench/bench_serve.py against the real slabserve binary on 127.0.0.1 (standard library only).

Usage: test_bench_serve.py SLABSERVE_BINARY TESTDATA_DIR
Exits 77 (ctest's "skipped") when the shared stories260K model is absent.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

from slabserve_process import SlabserveProcess, free_port

HERE = os.path.dirname(os.path.abspath(__file__))
BENCH = os.path.join(HERE, "..", "..", "bench", "bench_serve.py")
BINARY = sys.argv[1] if len(sys.argv) > 1 else "build/slabserve"
TESTDATA = sys.argv[2] if len(sys.argv) > 2 else "../shared/testdata"
MODEL_DIR = os.path.join(TESTDATA, "models", "stories260K")
VOCAB = 512  # stories260K's vocabulary: random ids must stay inside it


def run_bench(base_url, result_dir, *extra, timeout=120):
    cmd = [sys.executable, BENCH, "--base-url", base_url, "--random-input-len", "32", "--random-output-len", "16",
           "--num-prompts", "12", "--max-concurrency", "4", "--vocab-size", str(VOCAB), "--request-timeout", "30",
           "--save-result", "--result-dir", result_dir, "--result-filename", "out.json", *extra]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    with open(os.path.join(result_dir, "out.json")) as f:
        return p, json.load(f)


class BenchServeTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = SlabserveProcess(BINARY, MODEL_DIR)
        cls.port = cls.server.port

    @classmethod
    def tearDownClass(cls):
        cls.server.stop()

    def test_all_requests_complete_with_exact_counts(self):
        with tempfile.TemporaryDirectory() as d:
            p, m = run_bench("http://127.0.0.1:%d" % self.port, d, "--label", "slabserve")
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        self.assertIn("Serving Benchmark Result", p.stdout)
        self.assertEqual(m["completed"], 12, m["errors"])
        self.assertEqual(m["failed"], 0)
        self.assertEqual(m["total_input_tokens"], 12 * 32)
        self.assertEqual(m["total_output_tokens"], 12 * 16)
        self.assertEqual(m["model_id"], "stories260K")  # read from GET /v1/models
        self.assertEqual(m["max_concurrency"], 4)
        self.assertEqual(m["input_lens"], [32] * 12)
        self.assertEqual(m["output_lens"], [16] * 12)
        self.assertGreater(m["mean_ttft_ms"], 0)
        self.assertGreater(m["mean_tpot_ms"], 0)
        self.assertGreater(m["median_tpot_ms"], 0)
        self.assertLess(m["mean_ttft_ms"], m["mean_e2el_ms"])
        for ttft, itl in zip(m["ttfts"], m["itls"]):
            self.assertGreater(ttft, 0)
            self.assertTrue(all(x >= 0 for x in itl))
        for key in ("request_throughput", "output_throughput", "total_token_throughput"):
            self.assertGreater(m[key], 0)

    def test_forty_concurrent_streams_all_run_at_once(self):
        # Every stream up to --max-num-seqs (128 by default) runs at once: all 40 see their first
        # token before any has finished. cpp-httplib's defaults (8 connection threads on a 2-core
        # machine, a listen backlog of 5) once held client 9 onward until an earlier one ended.
        with tempfile.TemporaryDirectory() as d:
            p, m = run_bench("http://127.0.0.1:%d" % self.port, d, "--num-prompts", "40", "--max-concurrency", "40",
                             "--random-input-len", "5", "--random-output-len", "400")
        self.assertEqual(m["completed"], 40, m["errors"])
        # Seconds after the benchmark's start of each stream's first and last token.
        first_tokens = [s + t for s, t in zip(m["start_offsets"], m["ttfts"])]
        last_tokens = [s + t + sum(itl) for s, t, itl in zip(m["start_offsets"], m["ttfts"], m["itls"])]
        self.assertLess(max(first_tokens), min(last_tokens), "a stream started only after another had finished")

    def test_shared_prefix_and_wrong_model_name(self):
        with tempfile.TemporaryDirectory() as d:
            p, m = run_bench("http://127.0.0.1:%d" % self.port, d, "--random-prefix-len", "8")
            self.assertEqual(m["completed"], 12, m["errors"])
            self.assertEqual(m["total_input_tokens"], 12 * 40)
            # A model the server does not serve: every request fails with the HTTP error recorded.
            p, m = run_bench("http://127.0.0.1:%d" % self.port, d, "--model", "no-such-model")
        self.assertEqual(p.returncode, 1)
        self.assertEqual(m["failed"], 12)
        self.assertIn("HTTP", m["errors"][0])

    def test_closed_port_fails_every_request_quickly(self):
        port = free_port()  # nothing listens there once the probe socket is closed
        start = time.time()
        with tempfile.TemporaryDirectory() as d:
            p, m = run_bench("http://127.0.0.1:%d" % port, d, timeout=60)
        self.assertLess(time.time() - start, 60)
        self.assertEqual(p.returncode, 1)
        self.assertEqual(m["completed"], 0)
        self.assertEqual(m["failed"], 12)
        self.assertIn("requests failed", p.stderr)
        self.assertTrue(all("Connection" in e or "refused" in e for e in m["errors"]), m["errors"])


if __name__ == "__main__":
    if not os.path.isfile(os.path.join(MODEL_DIR, "config.json")):
        print("skipped: no model at " + MODEL_DIR)
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
