#!/usr/bin/env python3
"""configs/kubernetes/*.yaml: each parses, and the properties configs/README.md promises hold --
Guaranteed QoS with whole cores (requests == limits, integer cpu, even for full-pcpus-only),
readiness/liveness/startup on /health at the port slabserve listens on, Services that select the
Deployment's pods and target a declared port, a grace period longer than --shutdown-timeout, and
every option in the container's args known to `slabserve serve --help`.
kubectl is not available here: nothing is applied.

    test_k8s_manifests.py SLABSERVE_BINARY
"""
import glob
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slabserve_process import skip  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def check(ok, where, what):
    if not ok:
        sys.exit("FAIL %s: %s" % (where, what))


def option(args, name):
    check(name in args, "args", "no %s" % name)
    return args[args.index(name) + 1]


def check_container(where, c, grace, serve_options):
    res = c.get("resources", {})
    check(res.get("requests") == res.get("limits"), where, "requests != limits (not Guaranteed QoS)")
    cpu, mem = str(res["limits"].get("cpu", "")), res["limits"].get("memory")
    check(cpu.isdigit() and int(cpu) > 0, where, "cpu %r is not a whole number of cpus" % cpu)
    check(int(cpu) % 2 == 0, where, "cpu %s is odd: full-pcpus-only needs both SMT siblings" % cpu)
    check(bool(mem), where, "no memory limit")
    ports = {p["name"]: p["containerPort"] for p in c["ports"]}
    args = c["args"]
    check(args[0] == "serve", where, "args do not start with serve")
    check(int(option(args, "--port")) in ports.values(), where, "--port is not a container port")
    check(option(args, "--host") == "0.0.0.0", where, "--host must be 0.0.0.0 in a pod")
    check(grace > int(option(args, "--shutdown-timeout")), where,
          "terminationGracePeriodSeconds must exceed --shutdown-timeout")
    for a in args[1:]:
        if a.startswith("--"):
            check(a in serve_options, where, "%s is not an option of slabserve serve" % a)
    for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
        get = c.get(probe, {}).get("httpGet", {})
        check(get.get("path") == "/health", where, "%s not on /health" % probe)
        port = get.get("port")
        check(port in ports or port in ports.values(), where, "%s port %r is not declared" % (probe, port))
    return ports


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    try:
        import yaml
    except ImportError:
        skip("the 'yaml' Python module is not installed (pip install pyyaml)")
    helptext = subprocess.run([sys.argv[1], "serve", "--help"], capture_output=True, text=True,
                              check=True).stdout
    serve_options = set(re.findall(r"(?<![\w-])--[a-z0-9][a-z0-9-]*", helptext))
    files = sorted(glob.glob(os.path.join(ROOT, "configs", "kubernetes", "*.yaml")))
    check(files, "configs/kubernetes", "no manifests")
    for path in files:
        docs = [d for d in yaml.safe_load_all(open(path, encoding="utf-8")) if d]
        deployments = [d for d in docs if d["kind"] == "Deployment"]
        services = [d for d in docs if d["kind"] == "Service"]
        check(deployments and services, path, "needs a Deployment and a Service")
        for dep in deployments:
            pod = dep["spec"]["template"]
            labels = pod["metadata"]["labels"]
            check(dep["spec"]["selector"]["matchLabels"].items() <= labels.items(), path,
                  "the Deployment's selector does not match its pods")
            grace = pod["spec"].get("terminationGracePeriodSeconds", 30)
            ports = {}
            for c in pod["spec"]["containers"]:
                ports.update(check_container("%s %s" % (path, c["name"]), c, grace, serve_options))
            for svc in services:
                where = "%s Service %s" % (path, svc["metadata"]["name"])
                check(svc["spec"]["selector"].items() <= labels.items(), where, "selects no pod")
                for p in svc["spec"]["ports"]:
                    t = p["targetPort"]
                    check(t in ports or t in ports.values(), where, "targetPort %r is not declared" % t)
        print("OK %s: %d documents" % (os.path.relpath(path, ROOT), len(docs)))


if __name__ == "__main__":
    main()
