"""Why a job waits, in the cluster's own words: readers that gather them from the objects and
Events around a Volcano job (apps turn them into plain words)."""

import math
import re
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from .errors import PermanentK8sError, TransientK8sError
from .events import EventFacts, about, newest_first, read_event
from .names import workspace_claim
from .pods import JOB_LABEL
from .volcano import PODGROUP_API, podgroup_name, unschedulable_messages

if TYPE_CHECKING:
    from .client import Cluster

WAITING_PODS_TOLD = 8  # pods that wait alike say the same: a few of them tell why
CLASSES_KEPT = 60  # seconds a process keeps the StorageClasses it listed (see _storage_classes)
_classes: dict = {"at": -float(CLASSES_KEPT), "by_name": {}}


def waiting_messages(
    cluster: "Cluster", namespace: str, job_name: str, uid: str, events: Sequence[EventFacts]
) -> list[str]:
    """What the cluster says about a job that waits, most specific first: the PodGroup's
    Unschedulable conditions, then the newest of `events` (the namespace's telling Events, see
    `telling_events`) about the PodGroup (a full queue is reported only there), the Volcano job
    (pods the ResourceQuota refused), its waiting pods (FailedScheduling) and its unbound claim
    (no StorageClass, no provisioner)."""
    group_name = podgroup_name(job_name, uid)
    group = cluster.get(PODGROUP_API, "PodGroup", group_name, namespace)
    messages = unschedulable_messages(group)
    claim = workspace_claim(job_name)
    # A bound claim's old events (waiting for the provisioner) say nothing any more.
    found = cluster.get("v1", "PersistentVolumeClaim", claim, namespace)
    unbound = _phase(found) != "Bound"
    pods = cluster.list("v1", "Pod", namespace=namespace, labels={JOB_LABEL: job_name})
    waiting = sorted((p for p in pods if _phase(p) == "Pending"), key=lambda p: _name(p))
    waiting = waiting[:WAITING_PODS_TOLD]
    # Only about these objects, not earlier ones of their names (a job launched again).
    told = [
        *about(events, "PodGroup", [group_name] if group else [], [_uid(group)]),
        *about(events, "Job", [job_name], [uid]),
        *about(events, "Pod", map(_name, waiting), map(_uid, waiting)),
        *about(events, "PersistentVolumeClaim", [claim] if unbound else [], [_uid(found)]),
    ]
    return _telling(told, messages)


def _name(obj: dict) -> str:
    return obj["metadata"]["name"]


def _uid(obj: dict | None) -> str:
    return ((obj or {}).get("metadata") or {}).get("uid") or ""


def claim_messages(claims: list[str], events: Sequence[EventFacts]) -> list[str]:
    """What the cluster says about claims that are not bound yet (before the job's Volcano job
    exists, nothing else can be said about it), of the namespace's telling `events`."""
    return _telling(about(events, "PersistentVolumeClaim", claims), [])


def _telling(events: list[EventFacts], messages: list[str]) -> list[str]:
    """`messages`, then the newest of the telling `events`' messages (`telling_events` kept only
    those), each once."""
    for event in newest_first(events):
        if event.message not in messages:
            messages.append(event.message)
    return messages


def _phase(obj: dict | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase") or ""


def claims_to_bind_first(
    cluster: "Cluster", namespace: str, names: list[str], known: "Iterable[dict]" = ()
) -> list[dict]:
    """The job's claims (as read) that must be Bound before its pods exist: Volcano's scheduler
    does not look again at a pod whose claim was unbound when it first saw it
    (volcano-sh/volcano#1983), so the portal creates the Volcano job only after its claims of an
    Immediate-binding class are bound. Claims of a WaitForFirstConsumer class bind once a pod is
    scheduled: not these. `known`: objects just applied (as the API server returned them), read
    instead of GETs."""
    fresh = {
        o["metadata"]["name"]: o
        for o in known
        if o.get("kind") == "PersistentVolumeClaim" and o["metadata"].get("namespace") == namespace
    }
    claims = [
        fresh.get(name) or cluster.get("v1", "PersistentVolumeClaim", name, namespace)
        for name in names
    ]
    unbound = [c for c in claims if c is not None and _phase(c) != "Bound"]
    if not unbound:
        return []
    named = {(c.get("spec") or {}).get("storageClassName") or "" for c in unbound} - {""}
    classes = _storage_classes(cluster, named)
    default = next(
        (
            name
            for name, c in classes.items()
            if (c["metadata"].get("annotations") or {}).get(
                "storageclass.kubernetes.io/is-default-class"
            )
            == "true"
        ),
        "",
    )
    waiting = []
    for claim in unbound:
        klass = classes.get((claim.get("spec") or {}).get("storageClassName") or default) or {}
        if klass.get("volumeBindingMode") != "WaitForFirstConsumer":
            waiting.append(claim)
    return waiting


def _storage_classes(cluster: "Cluster", named: set[str]) -> dict[str, dict]:
    """The StorageClasses by name, listed at most once every CLASSES_KEPT seconds by a process,
    and again as soon as a claim names one not listed yet: a class's binding mode never changes
    (its fields are immutable), and a class made meanwhile is read when a claim first names it.
    Each job's first run asked for the list while its claim bound."""
    if time.monotonic() - _classes["at"] > CLASSES_KEPT or not named <= _classes["by_name"].keys():
        listed = cluster.list("storage.k8s.io/v1", "StorageClass")
        _classes["by_name"] = {c["metadata"]["name"]: c for c in listed}
        _classes["at"] = time.monotonic()
    return _classes["by_name"]


def wait_bound(cluster: "Cluster", namespace: str, claims: list[dict], seconds: float) -> list[str]:
    """Of `claims` (as the API server last returned them), the names of those still not Bound
    after waiting up to `seconds` in all: each is watched from its resourceVersion, so its bind
    is seen the moment the API server records it (a provisioner binds most claims within a
    fraction of a second)."""
    deadline = time.monotonic() + seconds
    return [
        claim["metadata"]["name"]
        for claim in claims
        if not _bound_before(cluster, namespace, claim, deadline)
    ]


def _bound_before(cluster: "Cluster", namespace: str, claim: dict, deadline: float) -> bool:
    if _phase(claim) == "Bound":
        return True
    meta = claim["metadata"]
    try:
        while (left := deadline - time.monotonic()) > 0:
            for _, seen in cluster.watch(
                "v1",
                "PersistentVolumeClaim",
                namespace=namespace,
                fields={"metadata.name": meta["name"]},
                resource_version=meta["resourceVersion"],
                timeout=math.ceil(left),
                read_timeout=left,
            ):
                if _phase(seen) == "Bound":
                    return True
                meta = {**meta, **seen["metadata"]}  # a bookmark carries its version only
                if time.monotonic() >= deadline:
                    return False
    except TransientK8sError:  # no bind within the time (the read timed out), or no answer
        return False
    except PermanentK8sError as gone:  # its version too old to watch from: read it once
        if gone.status != 410:
            raise
        found = cluster.get("v1", "PersistentVolumeClaim", meta["name"], namespace)
        return _phase(found) == "Bound"
    return False


def evictions(
    cluster: "Cluster", namespace: str, job_name: str, tasks: Iterable[str]
) -> list[EventFacts]:
    """Evictions of the job's pods (named `<job>-<task>-<index>` by Volcano), newest first:
    Volcano's reclaim and preempt actions delete a running pod with a Warning `Evict` Event on
    it ("Pod is evicted, because of reclaim"). Not those of a job whose name only starts with
    this one's (`train-2` beside `train`)."""
    raws = cluster.list(
        "v1", "Event", namespace=namespace, fields={"involvedObject.kind": "Pod", "reason": "Evict"}
    )
    names = "|".join(re.escape(task) for task in tasks)
    ours = re.compile(rf"{re.escape(job_name)}-(?:{names})-[0-9]+")
    found = [read_event(raw) for raw in raws]
    return newest_first([e for e in found if ours.fullmatch(e.name)])
