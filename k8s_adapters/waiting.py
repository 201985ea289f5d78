"""Why a job waits, in the cluster's own words: readers that gather them from the objects and
Events around a Volcano job (apps turn them into plain words)."""

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .events import PER_OBJECT_LISTS, EventFacts, events_for, newest_first, read_event
from .names import workspace_claim
from .pods import JOB_LABEL
from .volcano import PODGROUP_API, podgroup_name, unschedulable_messages

if TYPE_CHECKING:
    from .client import Cluster

# Reasons that explain a wait even as Normal events (Volcano reports a full queue as a Normal
# "Unschedulable" event on the PodGroup; the PV binder waits for a provisioner as Normal too).
TELLING_REASONS = frozenset({"Unschedulable", "FailedScheduling", "ExternalProvisioning"})


def waiting_messages(cluster: "Cluster", namespace: str, job_name: str, uid: str) -> list[str]:
    """What the cluster says about a job that waits, most specific first: the PodGroup's
    Unschedulable conditions, then the newest Events about the PodGroup (a full queue is reported
    only there), the Volcano job (pods the ResourceQuota refused), its waiting pods
    (FailedScheduling) and its unbound claims (no StorageClass, no provisioner). Each is read by
    field selector: the cost does not grow with the namespace's history."""
    group_name = podgroup_name(job_name, uid)
    group = cluster.get(PODGROUP_API, "PodGroup", group_name, namespace)
    messages = unschedulable_messages(group)
    claim = workspace_claim(job_name)
    # A bound claim's old events (waiting for the provisioner) say nothing any more.
    unbound = _phase(cluster.get("v1", "PersistentVolumeClaim", claim, namespace)) != "Bound"
    pods = cluster.list("v1", "Pod", namespace=namespace, labels={JOB_LABEL: job_name})
    # Pods that wait alike say the same: a few of them tell why.
    waiting_pods = sorted(p["metadata"]["name"] for p in pods if _phase(p) == "Pending")
    about = [
        events_for(cluster, namespace, "PodGroup", [group_name] if group else []),
        events_for(cluster, namespace, "Job", [job_name]),
        events_for(cluster, namespace, "Pod", waiting_pods[:PER_OBJECT_LISTS]),
        events_for(cluster, namespace, "PersistentVolumeClaim", [claim] if unbound else []),
    ]
    return _telling(about, messages)


def claim_messages(cluster: "Cluster", namespace: str, claims: list[str]) -> list[str]:
    """What the cluster says about claims that are not bound yet (before the job's Volcano job
    exists, nothing else can be said about it)."""
    return _telling([events_for(cluster, namespace, "PersistentVolumeClaim", claims)], [])


def _telling(about: "list[dict[str, list[EventFacts]]]", messages: list[str]) -> list[str]:
    """`messages`, then the newest telling Events' messages, each once."""
    events = newest_first([e for found in about for events in found.values() for e in events])
    for event in events:
        telling = event.warning or event.reason in TELLING_REASONS
        if telling and event.message not in messages:
            messages.append(event.message)
    return messages


def _phase(obj: dict | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase") or ""


def claims_to_bind_first(
    cluster: "Cluster", namespace: str, names: list[str], known: "Iterable[dict]" = ()
) -> list[str]:
    """The job's claims that must be Bound before its pods exist: Volcano's scheduler does not
    look again at a pod whose claim was unbound when it first saw it (volcano-sh/volcano#1983),
    so the portal creates the Volcano job only after its claims of an Immediate-binding class
    are bound. Claims of a WaitForFirstConsumer class bind once a pod is scheduled: not these.
    `known`: objects just applied (as the API server returned them), read instead of GETs."""
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
    classes = {c["metadata"]["name"]: c for c in cluster.list("storage.k8s.io/v1", "StorageClass")}
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
            waiting.append(claim["metadata"]["name"])
    return waiting


def evictions(cluster: "Cluster", namespace: str, job_name: str) -> list[EventFacts]:
    """Evictions of the job's pods, newest first: Volcano's reclaim and preempt actions delete a
    running pod with a Warning `Evict` Event on it ("Pod is evicted, because of reclaim")."""
    raws = cluster.list(
        "v1", "Event", namespace=namespace, fields={"involvedObject.kind": "Pod", "reason": "Evict"}
    )
    found = [read_event(raw) for raw in raws]
    return newest_first([e for e in found if e.name.startswith(f"{job_name}-")])
