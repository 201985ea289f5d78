"""Readers of a job's pods: which task and replica each is, where it runs, how its container
ended; and the Events about them. Logs come through `Cluster.pod_log` (`pods/log`)."""

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .events import EventFacts, events_for

if TYPE_CHECKING:
    from .client import Cluster

JOB_LABEL = "volcano.sh/job-name"  # set by Volcano's job controller on every pod it creates
TASK_LABEL = "volcano.sh/task-spec"
INDEX_ANNOTATION = "volcano.sh/task-index"


@dataclass(frozen=True)
class ContainerFacts:
    name: str
    state: str  # waiting, running, terminated, or "" before the kubelet reports
    reason: str
    exit_code: int | None
    restarts: int


@dataclass(frozen=True)
class PodFacts:
    name: str
    task: str
    index: int
    phase: str
    node: str
    ip: str
    containers: tuple[ContainerFacts, ...]
    events: tuple[EventFacts, ...] = ()

    @property
    def has_started(self) -> bool:
        """Only then has it a log to read."""
        return self.phase in ("Running", "Succeeded", "Failed")

    @property
    def container_names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.containers)


def _container(status: dict[str, Any]) -> ContainerFacts:
    state = status.get("state") or {}
    kind = next(iter(state), "")
    detail = state.get(kind) or {}
    return ContainerFacts(
        name=status.get("name", ""),
        state=kind,
        reason=detail.get("reason") or "",
        exit_code=detail.get("exitCode") if kind == "terminated" else None,
        restarts=int(status.get("restartCount") or 0),
    )


def read_pod(pod: dict[str, Any], events: tuple[EventFacts, ...] = ()) -> PodFacts:
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    statuses = {s.get("name"): s for s in status.get("containerStatuses") or []}
    containers = tuple(
        _container(statuses.get(c["name"]) or {"name": c["name"]})
        for c in spec.get("containers") or []
    )
    index = (meta.get("annotations") or {}).get(INDEX_ANNOTATION, "")
    return PodFacts(
        name=meta["name"],
        task=(meta.get("labels") or {}).get(TASK_LABEL, ""),
        index=int(index) if str(index).isdigit() else 0,
        phase=status.get("phase") or "Pending",
        node=spec.get("nodeName") or "",
        ip=status.get("podIP") or "",
        containers=containers,
        events=events,
    )


def job_pods(cluster: "Cluster", namespace: str, job_name: str) -> list[PodFacts]:
    """The pods Volcano made for a job, by task and replica, each with its Events."""
    pods = cluster.list("v1", "Pod", namespace=namespace, labels={JOB_LABEL: job_name})
    by_pod = events_for(cluster, namespace, "Pod", (p["metadata"]["name"] for p in pods))
    facts = [read_pod(p, tuple(by_pod.get(p["metadata"]["name"], []))) for p in pods]
    return sorted(facts, key=lambda p: (p.task, p.index, p.name))
