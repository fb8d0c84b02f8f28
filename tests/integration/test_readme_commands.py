"""Every command the READMEs show is run as written against the default model, or excluded here
with the reason. A command nobody classified fails the test, so a new README example is either
run or knowingly excluded.

  test_readme_commands.py BINARY [PYTHON]

The server is started the README's way, `scripts/serve.sh` (with SLAB_SKIP_SETUP=1 and
SLABSERVE=BINARY: the binary under test is already built), on a free port; examples are then run
with bash from the repository root with these substitutions only: the port, the binary's path,
placeholders (DIR, /path/to/...) by the default model, and curl made to fail on an HTTP error
(`--fail-with-body`, so a 400 is a failure and its body is shown). The OpenAI SDK snippet runs
under PYTHON (skipped, said so, when that Python lacks the `openai` package).
"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slabserve_process import free_port  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
DEFAULT_MODEL = "../shared/testdata/models/stories260K"
DOCS = ["README.md", "configs/README.md", "bench/README.md"]

# (pattern on the command as the README writes it, None to run it, or the reason it is not run).
RULES = [
    (r"^scripts/serve\.sh\b", "the server itself: this test starts it with scripts/serve.sh"),
    (r"^scripts/test\.sh\b", "the test suite this test belongs to"),
    (r"^curl ", None),
    (r"^(\./)?build/slabserve topology --xml host\.xml", "needs a topology saved from another machine"),
    (r"^(\./)?build/slabserve topology --instances 4 --reserve-http-core",
     None if (os.cpu_count() or 1) >= 8 else "plans 4 instances + HTTP cores: needs 8 cores, this machine has fewer"),
    (r"^(\./)?build/slabserve (generate|serve --help|topology)", None),
    (r"^slabserve topology --json", None),
    (r"^scripts/launch-multi\.sh -- ", None),
    (r"^scripts/launch-multi\.sh --layout configs/epyc", "a layout for a 2-socket 256-core EPYC"),
    (r"^scripts/launch-multi\.sh --upstreams 10\.0\.0\.", "fronts other hosts (tests/integration/test_multi_host.sh runs it over network namespaces)"),
    (r"^cmake -S \. -B build-bench", "builds the benchmarks (minutes on 2 cores)"),
    (r"^cmake --build build-bench", "builds the benchmarks (minutes on 2 cores)"),
    (r"^\./build-bench/", "runs a benchmark for minutes (needs the build above)"),
    (r"^cmake --build build\b", "rebuilds the binary under test"),
    (r"^python3 bench/make_random_checkpoint\.py", "writes a 1-2 GB random checkpoint"),
    (r"^PYTHONPATH=LLAMA_CPP/gguf-py python3 bench/make_random_checkpoint\.py", "writes a 2.2 GB random GGUF (needs gguf-py)"),
    (r"^python3 bench/scaling\.py", "runs bench_model and llama-bench at each thread count for minutes"),
    (r"^python3 bench/bench_serve\.py", None),
    (r"^python3 bench/bench_speculative\.py", "starts servers with and without speculation for ~15 minutes"),
    (r"^python3 bench/compare\.py", "runs every peer server for up to 40 minutes"),
    (r"^python3 bench/quant_accuracy\.py", "builds llama.cpp and runs both models' KL for ~30 minutes"),
]


def markdown_code(path):
    """(line number, language, text) of each fenced or 4-space-indented code block."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks, i = [], 0
    while i < len(lines):
        fence = re.match(r"^```(\w*)\s*$", lines[i])
        if fence:
            j = i + 1
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            blocks.append((i + 2, fence.group(1) or "sh", "\n".join(lines[i + 1:j])))
            i = j + 1
        elif lines[i].startswith("    ") and (i == 0 or not lines[i - 1].strip()):
            j = i
            while j < len(lines) and (lines[j].startswith("    ") or not lines[j].strip()):
                j += 1
            blocks.append((i + 1, "sh", "\n".join(l[4:] for l in lines[i:j]).strip("\n")))
            i = j
        else:
            i += 1
    return blocks


def shell_commands(text):
    """Commands of a shell block: backslash continuations and open quotes joined into one."""
    commands, current = [], ""
    for line in text.split("\n"):
        if not current and not line.strip():
            continue
        current += line + "\n"
        if line.endswith("\\") or current.count("'") % 2 == 1:
            continue
        commands.append(current.strip())
        current = ""
    if current.strip():
        commands.append(current.strip())
    return commands


def classify(command):
    for pattern, reason in RULES:
        if re.search(pattern, command):
            return True, reason
    return False, None


def adapt(command, binary, port, scratch, launch_port=0):
    cmd = re.sub(r"(localhost|127\.0\.0\.1):8000", "127.0.0.1:%d" % port, command)
    cmd = re.sub(r"(^|\s)(\./)?build/slabserve\b", r"\1" + binary, cmd)
    cmd = re.sub(r"^slabserve\b", binary, cmd)
    cmd = cmd.replace("--model DIR", "--model " + DEFAULT_MODEL)
    cmd = cmd.replace("--speculative-model DIR", "--speculative-model " + DEFAULT_MODEL)  # drafting for itself
    cmd = re.sub(r"^curl ", "curl -sS --fail-with-body --max-time 60 ", cmd)
    if cmd.startswith("python3 bench/bench_serve.py"):
        # The default model's vocabulary has 512 tokens; its context holds 128 + 128.
        cmd = cmd.replace("/tmp/results", scratch) + " --vocab-size 512"
    if cmd.startswith("scripts/launch-multi.sh"):
        cmd = cmd.replace("scripts/launch-multi.sh", "scripts/launch-multi.sh --port %d --binary %s" % (launch_port, binary), 1)
    return cmd


def free_port_run(count):
    """`count` consecutive free ports below Linux's ephemeral range (32768-60999), where no
    outgoing connection (nginx's to its upstreams) can take one before its server binds it."""
    import random
    import socket
    for _ in range(200):
        first = random.randrange(20000, 32000 - count)
        try:
            socks = []
            for p in range(first, first + count):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return first
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no %d consecutive free ports" % count)


def wait_healthy(url, proc, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            return False
        try:
            with urllib.request.urlopen(url + "/health", timeout=1) as r:
                if r.status == 200:
                    return True
        except OSError:
            time.sleep(0.1)
    return False


def run_launch_multi(cmd, front_port, env):
    """The launcher serves until SIGTERM: start it, send the README's first request through
    nginx, stop it, and expect a clean exit."""
    proc = subprocess.Popen(["bash", "-c", cmd], cwd=ROOT, env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ok = wait_healthy("http://127.0.0.1:%d" % front_port, proc, 120)
    out = ""
    if ok:
        body = b'{"prompt": "Once upon a time", "max_tokens": 8}'
        req = urllib.request.Request("http://127.0.0.1:%d/v1/completions" % front_port, data=body,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=60) as r:
            ok = r.status == 200
    def signal_group(sig):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # the launcher already exited (its output says why)
            pass

    signal_group(signal.SIGTERM)
    try:
        out = proc.communicate(timeout=90)[0]
    except subprocess.TimeoutExpired:
        signal_group(signal.SIGKILL)
        out = proc.communicate()[0]
        ok = False
    return ok and proc.returncode == 0, out


def main():
    binary = os.path.abspath(sys.argv[1])
    python = sys.argv[2] if len(sys.argv) > 2 else sys.executable
    if not os.path.isfile(os.path.join(ROOT, DEFAULT_MODEL, "config.json")):
        print("skipped: the default model %s is absent" % DEFAULT_MODEL)
        return 77

    port = free_port()
    env = dict(os.environ, SLAB_SKIP_SETUP="1", SLABSERVE=binary)
    log = tempfile.NamedTemporaryFile("w+", prefix="readme-serve-", suffix=".log")
    server = subprocess.Popen(["scripts/serve.sh", "--port", str(port)], cwd=ROOT, env=env,
                              stdout=log, stderr=subprocess.STDOUT)
    failures, ran, excluded = [], 0, []
    try:
        if not wait_healthy("http://127.0.0.1:%d" % port, server, 120):
            log.seek(0)
            print("scripts/serve.sh did not become healthy:\n" + log.read())
            return 1
        with tempfile.TemporaryDirectory() as scratch:
            for doc in DOCS:
                for line, language, text in markdown_code(os.path.join(ROOT, doc)):
                    where = "%s:%d" % (doc, line)
                    if language == "python":
                        code = re.sub(r"(localhost|127\.0\.0\.1):8000", "127.0.0.1:%d" % port, text)
                        has_sdk = subprocess.run([python, "-c", "import openai"], capture_output=True).returncode == 0
                        if "import openai" in text or "from openai" in text:
                            if not has_sdk:
                                print("SKIP %s: the OpenAI SDK snippet (%s has no openai package)" % (where, python))
                                continue
                        r = subprocess.run([python, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=180)
                        ran += 1
                        if r.returncode != 0:
                            failures.append((where, text, r.stdout + r.stderr))
                        else:
                            print("ok   %s: python snippet" % where)
                        continue
                    if language not in ("sh", "bash", "shell", "console"):
                        continue
                    for command in shell_commands(text):
                        known, reason = classify(command)
                        if not known:
                            failures.append((where, command, "not classified: run it or exclude it, with "
                                             "the reason, in RULES of tests/integration/test_readme_commands.py"))
                            continue
                        if reason:
                            excluded.append("%s: %s (%s)" % (where, command.split("\n")[0][:70], reason))
                            continue
                        launch_port = free_port_run(2 + (os.cpu_count() or 1))  # nginx, then its instances
                        cmd = adapt(command, binary, port, scratch, launch_port)
                        ran += 1
                        if command.startswith("scripts/launch-multi.sh"):
                            ok, out = run_launch_multi(cmd, launch_port, env)
                        else:
                            r = subprocess.run(["bash", "-o", "pipefail", "-c", cmd], cwd=ROOT, env=env,
                                               capture_output=True, text=True, timeout=300)
                            ok, out = r.returncode == 0, r.stdout + r.stderr
                        if ok:
                            print("ok   %s: %s" % (where, command.split("\n")[0][:90]))
                        else:
                            failures.append((where, cmd, out[-2000:]))
    finally:
        server.terminate()
        server.wait(timeout=60)

    for item in excluded:
        print("not run " + item)
    for where, command, output in failures:
        print("FAIL %s\n  $ %s\n%s" % (where, command.replace("\n", "\n    "), output))
    print("%d commands run, %d excluded, %d failed" % (ran, len(excluded), len(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
