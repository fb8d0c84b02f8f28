"""slabserve serve --speculative-model over HTTP, with "[ngram]" and with a draft model (the
stories260K GGUF file drafting for the same weights as safetensors): the greedy completion of a
prompt that repeats a passage (where prompt lookup drafts and the verification accepts) is the
same text and the same token count as the server without speculation gives, and /metrics counts
the drafts (the draft model, being the target, has nearly all of them accepted).

usage: test_speculative_server.py [SLABSERVE [TESTDATA_DIR]]   (exit 77: skipped, no model)
"""
import json
import os
import sys
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slabserve_process import SlabserveProcess, binary_and_testdata, require_paths  # noqa: E402

PASSAGE = "Once upon a time, there was a little girl named Lily. She liked to play in the park. "
PROMPT = PASSAGE + PASSAGE + "Once upon a time"


def complete(server, prompt, stream=False):
    body = json.dumps({"prompt": prompt, "max_tokens": 64, "temperature": 0, "stream": stream}).encode()
    request = urllib.request.Request(server.url + "/v1/completions", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=60) as r:
        raw = r.read().decode()
    if not stream:
        reply = json.loads(raw)
        return reply["choices"][0]["text"], reply["usage"]["completion_tokens"]
    text = ""
    for line in raw.splitlines():
        if line.startswith("data: ") and line != "data: [DONE]":
            for choice in json.loads(line[6:]).get("choices", []):
                text += choice.get("text", "")
    return text, None


def metric(page, name):
    for line in page.splitlines():
        if line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    return None


def main():
    binary, testdata = binary_and_testdata()
    model = os.path.join(testdata, "models", "stories260K")
    require_paths(binary, model)
    plain = SlabserveProcess(binary, model)
    try:
        expected = complete(plain, PROMPT)
    finally:
        plain.stop()
    gguf = os.path.join(testdata, "models", "stories260K-gguf", "stories260K.gguf")
    runs = [("[ngram]", ["--speculative-model", "[ngram]", "--num-speculative-tokens", "4",
                         "--ngram-prompt-lookup-max", "3"], 0.0)]
    if os.path.exists(gguf):
        runs.append(("draft model", ["--speculative-model", gguf, "--num-speculative-tokens", "4"], 0.9))
    failures = []
    for name, flags, min_acceptance in runs:
        spec = SlabserveProcess(binary, model, *flags)
        try:
            got = complete(spec, PROMPT)
            streamed, _ = complete(spec, PROMPT, stream=True)
            with urllib.request.urlopen(spec.url + "/metrics", timeout=10) as r:
                page = r.read().decode()
        finally:
            spec.stop()
        if got != expected:
            failures.append("%s: completion with speculation %r differs from without %r" % (name, got, expected))
        if streamed != expected[0]:
            failures.append("%s: streamed text %r differs from %r" % (name, streamed, expected[0]))
        accepted = metric(page, "vllm:spec_decode_num_accepted_tokens_total")
        drafts = metric(page, "vllm:spec_decode_num_draft_tokens_total")
        if not accepted or not drafts or accepted > drafts or accepted < min_acceptance * drafts:
            failures.append("%s: spec_decode metrics: accepted %r of %r draft tokens" % (name, accepted, drafts))
        if metric(page, "vllm:spec_decode_num_accepted_tokens_per_pos_total") is None:
            failures.append("%s: no vllm:spec_decode_num_accepted_tokens_per_pos_total" % name)
        if not failures:
            print("ok %s: %r (%d tokens); %d of %d draft tokens accepted" %
                  (name, expected[0][:40], expected[1], accepted, drafts))
    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
