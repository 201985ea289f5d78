"""Small helpers shared by tests."""

import contextlib
import threading
import time
from datetime import UTC, datetime
from unittest import mock

import pytest
from django.db import connection
from rest_framework.test import APIClient

from k8s_adapters.client import Cluster


def wait_for(predicate, timeout=15, interval=0.2, message="condition"):
    """Poll until predicate() is truthy; return its value or fail saying what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def our_writes(obj):
    """The object's generation and when the portal's field manager last changed it: Volcano's
    controllers write status on their own schedule, so resourceVersion may move
    without the portal writing anything."""
    times = [
        m.get("time")
        for m in obj["metadata"].get("managedFields") or []
        if m["manager"] == "gpu-portal"
    ]
    return obj["metadata"].get("generation"), times


@contextlib.contextmanager
def cluster_lists():
    """Every LIST the portal sends to the API server meanwhile (in this process), as
    (kind, its options)."""
    calls = []
    real = Cluster.list_with_version

    def recording(self, api_version, kind, **options):
        calls.append((kind, options))
        return real(self, api_version, kind, **options)

    with mock.patch.object(Cluster, "list_with_version", recording):
        yield calls


def in_threads(*calls):
    """Each call in a thread of its own, on its own database connection (the test needs
    `transactional_db`); (their results in no particular order, the errors they raised)."""
    results, errors = [], []

    def one(call):
        try:
            results.append(call())
        except Exception as exc:  # noqa: BLE001  (reported by the caller, with the others)
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=one, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results, errors


def at_once(count, call):
    """`call()` from `count` threads released together, each on its own database connection
    (the test needs `transactional_db`); their results in no particular order. What two
    browsers or scripts do when they send the same request in the same instant."""
    gate = threading.Barrier(count)

    def gated():
        gate.wait(timeout=30)
        return call()

    results, errors = in_threads(*[gated] * count)
    assert not errors, errors
    return results


# The smallest spec a template or launch takes: one task of one GPU.
ONE_GPU_SPEC = {
    "image": "registry.local/train:1",
    "command": ["python", "train.py"],
    "tasks": [{"name": "main", "replicas": 1, "gpus": 1}],
}


def api_as(user):
    """An API client signed in as `user` (a session, as the browser's)."""
    client = APIClient()
    client.force_login(user)
    return client


def cri(*lines):
    """Lines of a container log as the kubelet writes it (CRI format), stamped now."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} stdout F {line}\n" for line in lines)


def attach_log(cluster, pod, path, container="main"):
    """Tell KWOK which file is this pod's container log (it serves it through pods/log)."""
    cluster.apply_one(
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": pod["metadata"]["name"],
                "namespace": pod["metadata"]["namespace"],
            },
            "spec": {"logs": [{"containers": [container], "logsFile": str(path), "follow": True}]},
        }
    )
