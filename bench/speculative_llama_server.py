"""llama.cpp's llama-server as the peer in bench_speculative.py: the same checkpoints converted to
BF16 GGUF (cached beside them, `<checkpoint>-bf16.gguf`) by the convert_hf_to_gguf.py of the tree
the binary was built in, served plain, with the draft model and with prompt lookup, under the
flag names of the build given (this llama.cpp renamed them: --draft-max is now
--spec-draft-n-max, and speculation is chosen with --spec-type). Standard library only."""
import os
import sys

BENCH = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [BENCH, os.path.join(BENCH, "..", "tests", "integration")]
from compare_peers import convert_hf_to_gguf, llama_server_version  # noqa: E402
from slabserve_process import ServerProcess  # noqa: E402

# A slot's context: the copy prompts are 54 tokens, their outputs 96, the drafts at most k more.
# llama-server divides -c among its --parallel slots.
CONTEXT_PER_SLOT = 256


def llama_tree(server_bin):
    """The llama.cpp source tree of TREE/build/bin/llama-server."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(server_bin))))


def describe(server_bin):
    """The peer's name and version: the build line of --version, and the llama-cpp-python release
    whose sdist vendors the tree where the path says so (.../llama_cpp_python-X/vendor/llama.cpp)."""
    name = "llama.cpp llama-server %s" % llama_server_version(server_bin)
    tree = llama_tree(server_bin)
    parent = os.path.basename(os.path.dirname(os.path.dirname(tree)))
    if os.path.basename(os.path.dirname(tree)) == "vendor" and parent.startswith("llama_cpp_python-"):
        name += ", vendored in llama-cpp-python " + parent[len("llama_cpp_python-"):]
    return name


def gguf_beside(checkpoint, server_bin, python):
    """CHECKPOINT-bf16.gguf, converted once (BF16: the checkpoint's own weights, bit for bit)."""
    out = checkpoint.rstrip("/") + "-bf16.gguf"
    if not os.path.isfile(out):
        convert_hf_to_gguf(os.path.dirname(out), llama_tree(server_bin), checkpoint, "bf16", out, python=python)
    return out


class LlamaServerProcess(ServerProcess):
    """`llama-server -m GGUF ...extra` on the CPU with `threads` threads and `slots` slots."""

    def __init__(self, server_bin, gguf, *extra, threads, slots, timeout=300, log_path=None):
        super().__init__(lambda port: [server_bin, "-m", gguf, "--host", "127.0.0.1", "--port", str(port),
                                       "-t", str(threads), "-tb", str(threads), "--parallel", str(slots),
                                       "-c", str(slots * CONTEXT_PER_SLOT), "-ngl", "0", "--metrics", *extra],
                         "llama-server", timeout, log_path)


def configs(server_bin, model, draft, k, threads, slots, python):
    """[(label, start)] for bench_speculative: plain, prompt lookup, and the draft model where
    there is one; start() returns the running server. Converting the checkpoints happens here."""
    gguf = gguf_beside(model, server_bin, python)
    k = str(k)
    # ngram-simple is prompt lookup as slabserve's [ngram] does it: the last 3 tokens (the sampled
    # one included) found earlier in the context, the k tokens after them the draft.
    ngram = ["--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "3", "--spec-ngram-simple-size-m", k]
    chosen = [("none", []), ("ngram", ngram)]
    if draft:
        chosen.append(("draft", ["--spec-type", "draft-simple", "--model-draft", gguf_beside(draft, server_bin, python),
                                 "--spec-draft-n-max", k, "--spec-draft-n-min", "0", "--spec-draft-ngl", "0"]))
    return [(label, lambda flags=flags: LlamaServerProcess(server_bin, gguf, *flags, threads=threads, slots=slots))
            for label, flags in chosen]
