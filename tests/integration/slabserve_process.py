"""The real slabserve binary on a free 127.0.0.1 port, for the Python integration tests
(standard library only; the tests import it from their own directory)."""
import importlib
import os
import socket
import subprocess
import sys
import time
import urllib.request


def binary_and_testdata():
    """(slabserve binary, shared test data folder): the command line every test takes."""
    return (sys.argv[1] if len(sys.argv) > 1 else "build/slabserve",
            sys.argv[2] if len(sys.argv) > 2 else "../shared/testdata")


def skip(reason):
    """Exit 77, ctest's "skipped", saying why."""
    print("skipped: " + reason)
    sys.exit(77)


def import_or_skip(module):
    """The module, or a skip naming the pip package that provides it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        skip("the '%s' Python package is not installed (pip install %s)" % (module, module))


def require_paths(*paths):
    """Skip unless every path exists (the shared test data sits beside the repository)."""
    for path in paths:
        if not os.path.exists(path):
            skip("%s is absent (shared test data not checked out beside the repo)" % path)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServerProcess:
    """The command `argv_for_port(port)` on a free 127.0.0.1 port, healthy (GET /health answers 200)
    within `timeout` seconds, or RuntimeError (the process is killed). `name` is for the errors.
    stop() sends SIGTERM and waits for the exit."""

    def __init__(self, argv_for_port, name, timeout=60, log_path=None):
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.log = open(log_path, "w") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(argv_for_port(self.port), stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("%s exited with %d" % (name, self.proc.returncode))
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        self.proc.kill()
        raise RuntimeError("%s did not become healthy within %d s" % (name, timeout))

    def stop(self, timeout=30):
        """SIGTERM, then the exit code (the process is killed if it outlives `timeout`)."""
        self.proc.terminate()
        try:
            return self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            if self.log is not subprocess.DEVNULL:
                self.log.close()

    def rss_kib(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0


class SlabserveProcess(ServerProcess):
    """`slabserve serve --model MODEL_DIR ...extra`, as ServerProcess."""

    def __init__(self, binary, model_dir, *extra, timeout=60, log_path=None):
        super().__init__(lambda port: [binary, "serve", "--model", model_dir, "--host", "127.0.0.1",
                                       "--port", str(port), *extra], "slabserve", timeout, log_path)
