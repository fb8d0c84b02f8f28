"""The example program of include/slabserve/README.md: the page shows examples/generate.cpp as it
is, and the built program, run on stories260K, prints transformers' greedy continuation of its
prompt (the text of tests/fixtures/stories260K_expected.json, written by scripts/make_fixtures.py).

usage: test_api_example.py EXAMPLE_BINARY TESTDATA_DIR   (exit 77: skipped, no model)
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
PROMPT = "Once upon a time"


def main():
    example, testdata = sys.argv[1], sys.argv[2]
    source = open(os.path.join(ROOT, "examples", "generate.cpp"), encoding="utf-8").read()
    readme = open(os.path.join(ROOT, "include", "slabserve", "README.md"), encoding="utf-8").read()
    if "```cpp\n" + source + "```" not in readme:
        print("FAIL: include/slabserve/README.md does not show examples/generate.cpp as it is")
        return 1
    model = os.path.join(testdata, "models", "stories260K")
    if not os.path.isdir(model):
        print("SKIP: no model at", model)
        return 77
    expected = json.load(open(os.path.join(ROOT, "tests", "fixtures", "stories260K_expected.json"), encoding="utf-8"))
    if not expected["text"].startswith(PROMPT):
        print("FAIL: the fixture's greedy text does not start with the prompt this test gives")
        return 1
    run = subprocess.run([example, model, PROMPT], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        print("FAIL: exit", run.returncode, run.stderr)
        return 1
    printed = run.stdout.rstrip("\n")
    # 32 tokens of the greedy continuation: the fixture's text from BOS, past the prompt.
    if len(printed) < 60 or not expected["text"].startswith(PROMPT + printed):
        print("FAIL: printed", repr(printed), "\nexpected a prefix of", repr(expected["text"][len(PROMPT):]))
        return 1
    print("ok:", repr(printed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
