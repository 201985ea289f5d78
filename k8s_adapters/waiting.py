"""Why a job waits, in the cluster's own words: readers that gather them from the objects and
Events around a Volcano job (apps turn them into plain words)."""

from typing import TYPE_CHECKING

from .events import newest_first, read_event
from .names import workspace_claim
from .volcano import PODGROUP_API, podgroup_name, unschedulable_messages

if TYPE_CHECKING:
    from .client import Cluster

# Reasons that explain a wait even as Normal events (Volcano reports a full queue as a Normal
# "Unschedulable" event on the PodGroup; the PV binder waits for a provisioner as Normal too).
TELLING_REASONS = frozenset({"Unschedulable", "FailedScheduling", "ExternalProvisioning"})


def waiting_messages(cluster: "Cluster", namespace: str, job_name: str, uid: str) -> list[str]:
    """What the cluster says about a job that waits, most specific first: the PodGroup's
    Unschedulable conditions, then the newest Events about the PodGroup (a full queue is reported
    only there), the Volcano job (pods the ResourceQuota refused), its pods (FailedScheduling)
    and its claims (no StorageClass, no provisioner)."""
    group_name = podgroup_name(job_name, uid)
    group = cluster.get(PODGROUP_API, "PodGroup", group_name, namespace)
    messages = unschedulable_messages(group)
    claims = {
        name
        for name in (workspace_claim(job_name),)
        if _phase(cluster.get("v1", "PersistentVolumeClaim", name, namespace)) != "Bound"
    }  # a bound claim's old events (waiting for the provisioner) say nothing any more
    events = newest_first([read_event(e) for e in cluster.list("v1", "Event", namespace=namespace)])
    for event in events:
        about_job = (
            (event.kind == "PodGroup" and event.name == group_name)
            or (event.kind == "Job" and event.name == job_name)
            or (event.kind == "Pod" and event.name.startswith(f"{job_name}-"))
            or (event.kind == "PersistentVolumeClaim" and event.name in claims)
        )
        telling = event.warning or event.reason in TELLING_REASONS
        if about_job and telling and event.message not in messages:
            messages.append(event.message)
    return messages


def _phase(obj: dict | None) -> str:
    return ((obj or {}).get("status") or {}).get("phase") or ""
