"""Waiting for a job's claims to bind, against the API server: the PV controller binds a claim
of the default class once the test bed's provisioner made its volume; a class nobody
provisions never binds."""

import time
import uuid

from k8s_adapters.waiting import wait_bound


def claim(namespace, storage_class=None):
    spec = {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": f"claim-{uuid.uuid4().hex[:8]}", "namespace": namespace},
        "spec": spec,
    }


def test_a_claim_that_binds_is_seen_bound_the_moment_it_binds(cluster, namespace):
    applied = cluster.apply([claim(namespace), claim(namespace)])
    started = time.monotonic()
    assert wait_bound(cluster, namespace, applied, 30) == []
    waited = time.monotonic() - started
    for obj in applied:
        name = obj["metadata"]["name"]
        assert cluster.get("v1", "PersistentVolumeClaim", name, namespace)["status"]["phase"] == (
            "Bound"
        )
    assert waited < 10  # seen when bound, not at the end of the 30 s


def test_a_claim_that_never_binds_is_given_back_after_the_time_asked(
    cluster, namespace, silent_class
):
    bound, never = cluster.apply([claim(namespace), claim(namespace, silent_class)])
    started = time.monotonic()
    assert wait_bound(cluster, namespace, [bound, never], 1.5) == [never["metadata"]["name"]]
    waited = time.monotonic() - started
    assert 1.5 <= waited < 3.5  # not the API server's whole-second timeout, nor a hang


def test_no_time_to_wait_names_the_unbound_claims_at_once(cluster, namespace, silent_class):
    [never] = cluster.apply([claim(namespace, silent_class)])
    started = time.monotonic()
    assert wait_bound(cluster, namespace, [never], 0) == [never["metadata"]["name"]]
    assert time.monotonic() - started < 0.5
