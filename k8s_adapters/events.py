"""Readers of Kubernetes Events: what controllers and the scheduler said about an object.

Volcano reports the most common reason a job waits (its queue is full) only as Events on the
PodGroup, not as a condition, and repeats it thousands of times; kube-controller-manager says
why a claim is unbound the same way. So "why pending" and a job's history read Events.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .times import parse_time

if TYPE_CHECKING:
    from .client import Cluster


@dataclass(frozen=True)
class EventFacts:
    kind: str  # of the object the event is about: Pod, PodGroup, Job, PersistentVolumeClaim
    name: str
    type: str  # Normal or Warning
    reason: str
    message: str
    count: int
    last_seen: datetime | None
    uid: str = ""  # of the object it is about: one deleted and made again under its name differs

    @property
    def warning(self) -> bool:
        return self.type == "Warning"


def read_event(event: dict[str, Any]) -> EventFacts:
    """core/v1 Events: deduplicated ones carry a count, series-style ones a series."""
    involved = event.get("involvedObject") or {}
    series = event.get("series") or {}
    last = (
        parse_time(series.get("lastObservedTime"))
        or parse_time(event.get("lastTimestamp"))
        or parse_time(event.get("eventTime"))
        or parse_time(event.get("firstTimestamp"))
        or parse_time((event.get("metadata") or {}).get("creationTimestamp"))
    )
    return EventFacts(
        kind=involved.get("kind") or "",
        name=involved.get("name") or "",
        type=event.get("type") or "Normal",
        reason=event.get("reason") or "",
        message=(event.get("message") or "").strip(),
        count=int(series.get("count") or event.get("count") or 1),
        last_seen=last,
        uid=involved.get("uid") or "",
    )


# Reasons that explain a wait even as Normal events: Volcano reports a full queue as a Normal
# "Unschedulable" event on the PodGroup; the PV binder waits for a provisioner, and for a claim
# with no StorageClass, with Normal ones too.
TELLING_REASONS = ("Unschedulable", "ExternalProvisioning", "FailedBinding")
PER_OBJECT_KEPT = 5  # of an object's telling Events, the newest this many say all there is


def telling_events(cluster: "Cluster", namespace: str) -> list[EventFacts]:
    """Every Event of the namespace that can tell why something waits (Warnings, and Normal ones
    of the telling reasons), the newest few per object, newest first: a few field-selected LISTs
    whatever the number of the namespace's jobs. The API server keeps no watch cache for
    Events, so each LIST reads the namespace's whole Event history from etcd: a LIST per waiting
    object grew with the number of waiting jobs times that history. (One unfiltered LIST would
    read it once, but send every Normal event of every pod to be decoded here.)"""
    raws = cluster.list("v1", "Event", namespace=namespace, fields={"type": "Warning"})
    for reason in TELLING_REASONS:
        raws += cluster.list(
            "v1", "Event", namespace=namespace, fields={"type": "Normal", "reason": reason}
        )
    kept: dict[tuple[str, str], int] = {}
    found = []
    for event in newest_first([read_event(raw) for raw in raws]):
        seen = kept.get((event.kind, event.name), 0)
        if seen < PER_OBJECT_KEPT:
            kept[(event.kind, event.name)] = seen + 1
            found.append(event)
    return found


def about(
    events: Iterable[EventFacts],
    kind: str,
    names: Iterable[str],
    uids: Iterable[str] | None = None,
) -> list[EventFacts]:
    """Of `events`, those about objects of `kind` named one of `names`, in their order; with
    `uids`, only about those objects (not an earlier one of the same name: a job deleted and
    launched again under its name would be told the old one's reasons)."""
    wanted, current = set(names), None if uids is None else set(uids)
    return [
        e
        for e in events
        if e.kind == kind
        and e.name in wanted
        and (current is None or not e.uid or e.uid in current)
    ]


# Up to this many objects, their Events are read one field-selected LIST each; beyond, one LIST
# of the kind's Events in the namespace (a namespace of busy jobs holds thousands of Events, and
# reading them all on every reconcile made each one cost in proportion to the tenant's history).
PER_OBJECT_LISTS = 8


def events_for(
    cluster: "Cluster", namespace: str, kind: str, names: Iterable[str]
) -> dict[str, list[EventFacts]]:
    """The Events about objects of one kind, by object name, each newest first."""
    wanted = set(names)
    if not wanted:
        return {}
    if len(wanted) <= PER_OBJECT_LISTS:
        raws = [
            raw
            for name in sorted(wanted)
            for raw in cluster.list(
                "v1",
                "Event",
                namespace=namespace,
                fields={"involvedObject.kind": kind, "involvedObject.name": name},
            )
        ]
    else:
        raws = cluster.list(
            "v1", "Event", namespace=namespace, fields={"involvedObject.kind": kind}
        )
    found: dict[str, list[EventFacts]] = {}
    for raw in raws:
        event = read_event(raw)
        if event.kind == kind and event.name in wanted:
            found.setdefault(event.name, []).append(event)
    return {name: newest_first(events) for name, events in found.items()}


def newest_first(events: list[EventFacts]) -> list[EventFacts]:
    oldest = datetime.min.replace(tzinfo=UTC)
    return sorted(events, key=lambda e: e.last_seen or oldest, reverse=True)
