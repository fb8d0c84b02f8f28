#!/usr/bin/env python3
"""Sampled structured output is valid: for each of the 56 realistic tool and output schemas of
tests/fixtures/grammar/json_schema.json (scripts/make_json_schema_fixtures.py), 100 completions
at temperature 1.0 from the real stories260K model through the real binary (one request with
n=100 and guided_json per schema); every one must finish by itself and validate under the schema
with Python's `jsonschema` (format checking on). Prints how many tokens and seconds it took.

Usage: test_schema_sampling.py SLABSERVE_BINARY TESTDATA_DIR [--samples N]
(ctest runs --samples 10, ~25 s; the issue's 100 per schema take ~4 min on 2 cores.)
Completions cut short by the 512-token context (the model writes whole stories into unbounded
strings) are counted and reported, not validated; at least half must complete.
Exits 77 (ctest's "skipped") with a message when jsonschema or the shared test data is absent.
"""
import json
import os
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slabserve_process import SlabserveProcess, binary_and_testdata, import_or_skip  # noqa: E402

jsonschema = import_or_skip("jsonschema")

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BINARY, TESTDATA = binary_and_testdata()
SAMPLES = int(sys.argv[sys.argv.index("--samples") + 1]) if "--samples" in sys.argv else 100
MODEL_DIR = os.path.join(TESTDATA, "models", "stories260K")
FIXTURE = os.path.join(ROOT, "tests", "fixtures", "grammar", "json_schema.json")


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.loads(response.read())


def main():
    if not os.path.isdir(MODEL_DIR):
        print("skipped: %s is absent (shared test data not checked out beside the repo)" % MODEL_DIR)
        return 77
    with open(FIXTURE) as f:
        schemas = [s for s in json.load(f)["schemas"] if not s["name"].startswith("random_")]
    assert len(schemas) >= 50, len(schemas)
    server = SlabserveProcess(BINARY, MODEL_DIR, "--max-num-seqs", "128")
    failures = []
    cut_short = 0
    tokens = 0
    started = time.monotonic()
    try:
        for index, case in enumerate(schemas):
            validator = jsonschema.Draft202012Validator(case["schema"],
                                                        format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
            body = {"prompt": ["Once upon a time"] * SAMPLES, "temperature": 1.0, "seed": index,
                    "max_tokens": 480, "guided_json": case["schema"]}
            try:
                out = post(server.url + "/v1/completions", body)
            except urllib.error.HTTPError as e:
                failures.append("%s: HTTP %d %s" % (case["name"], e.code, e.read().decode(errors="replace")))
                continue
            tokens += out["usage"]["completion_tokens"]
            for choice in out["choices"]:
                where = "%s choice %d" % (case["name"], choice["index"])
                if choice["finish_reason"] == "length":
                    # The context (512 tokens) ran out inside an unbounded string: stories260K
                    # writes stories into them. Not a document yet; counted, not validated.
                    cut_short += 1
                    continue
                if choice["finish_reason"] != "stop":
                    failures.append("%s: finish_reason %s" % (where, choice["finish_reason"]))
                    continue
                try:
                    validator.validate(json.loads(choice["text"]))
                except (ValueError, jsonschema.ValidationError) as e:
                    failures.append("%s: %s in %r" % (where, str(e).splitlines()[0], choice["text"][:200]))
    finally:
        server.stop()
    seconds = time.monotonic() - started
    total = len(schemas) * SAMPLES
    print("%d schemas x %d samples: %d completion tokens in %.1f s; %d complete documents, all validated but %d; "
          "%d cut short by the context" % (len(schemas), SAMPLES, tokens, seconds, total - cut_short,
                                          len(failures), cut_short))
    # Most documents must complete, or the validation above checked little.
    if total - cut_short < total // 2:
        failures.append("only %d of %d documents completed" % (total - cut_short, total))
    for failure in failures[:20]:
        print("FAIL " + failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
