"""The stand-in for a job's pods behind the router, for tests and `make run`: no kubelet runs
pods here, so the echo app (echo_app.py) plays every job's app. It runs in a network namespace
of its own (EndpointSlices refuse loopback addresses), reached over a veth pair on
198.18.0.0/15, the benchmarking range where no real host lives.

    python hack/router/stand_in.py --kubeconfig K   # `make run`: serve every endpoint Service
"""

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
APP_PORT = 18092


def _ip(*args):
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _quiet(*args):
    subprocess.run(["ip", *args], check=False, capture_output=True)


def _wait_listening(proc, address, port, timeout=60):
    deadline = time.monotonic() + timeout
    while True:
        try:
            socket.create_connection((address, port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the echo app did not listen on {address}:{port}") from None
            time.sleep(0.2)


@contextlib.contextmanager
def upstream(log_path, index=None):
    """(address, port) of the echo app in its own network namespace; all torn down after."""
    n = (os.getpid() % 200 + 20) if index is None else index
    netns, host_if, ns_if = f"gpp-up{n}", f"gppu{n}h", f"gppu{n}n"
    host_ip, app_ip = f"198.18.{n}.1", f"198.18.{n}.2"
    proc = None
    try:
        _quiet("netns", "del", netns)
        _quiet("link", "del", host_if)
        _ip("netns", "add", netns)
        _ip("link", "add", host_if, "type", "veth", "peer", "name", ns_if)
        _ip("link", "set", ns_if, "netns", netns)
        _ip("addr", "add", f"{host_ip}/30", "dev", host_if)
        _ip("link", "set", host_if, "up")
        _ip("netns", "exec", netns, "ip", "addr", "add", f"{app_ip}/30", "dev", ns_if)
        _ip("netns", "exec", netns, "ip", "link", "set", ns_if, "up")
        _ip("netns", "exec", netns, "ip", "link", "set", "lo", "up")
        app = [sys.executable, str(HERE / "echo_app.py"), "--host", app_ip, "--port", str(APP_PORT)]
        with open(log_path, "w") as log:
            proc = subprocess.Popen(["ip", "netns", "exec", netns, *app], stdout=log, stderr=log)
        _wait_listening(proc, app_ip, APP_PORT)
        yield app_ip, APP_PORT
    finally:
        if proc is not None and proc.poll() is None:
            proc.terminate()
            proc.wait(10)
        _quiet("link", "del", host_if)
        _quiet("netns", "del", netns)


def endpoint_slice(service, address, port):
    """What the EndpointSlice controller would write for a Service whose pod runs the app."""
    meta = service["metadata"]
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{meta['name']}-stand-in",
            "namespace": meta["namespace"],
            "labels": {"kubernetes.io/service-name": meta["name"], "gpu-portal.io/stand-in": "1"},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [address], "conditions": {"ready": True}}],
        "ports": [{"name": service["spec"]["ports"][0]["name"], "port": port, "protocol": "TCP"}],
    }


def serve(kubeconfig, log_dir):
    """Give every routed endpoint Service the echo app as its pod, until stopped."""
    sys.path.insert(0, str(HERE.parent.parent))
    from k8s_adapters.client import Cluster
    from k8s_adapters.errors import K8sError

    cluster = Cluster.connect(kubeconfig, field_manager="gpu-portal-stand-in")
    selector = {"app.kubernetes.io/managed-by": "gpu-portal", "gpu-portal.io/component": "endpoint"}
    with upstream(Path(log_dir) / "stand-in-app.log", index=19) as (address, port):
        print(f"stand-in app on {address}:{port}", flush=True)
        while True:
            try:
                services = cluster.list("v1", "Service", labels=selector)
            except K8sError as exc:  # the API server restarting: try again next round
                print(f"listing Services: {exc}", flush=True)
                services = []
            for service in services:
                if (
                    service["spec"].get("type") == "ClusterIP"
                    and service["spec"].get("clusterIP") != "None"
                ):
                    try:
                        cluster.apply_one(endpoint_slice(service, address, port))
                    except K8sError as exc:  # its namespace being deleted, for one
                        name = f"{service['metadata']['namespace']}/{service['metadata']['name']}"
                        print(f"skipped {name}: {exc}", flush=True)
            time.sleep(2)


if __name__ == "__main__":
    import signal

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))  # run the cleanup on `kill`
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--log-dir", default=".")
    args = parser.parse_args()
    serve(args.kubeconfig, args.log_dir)
