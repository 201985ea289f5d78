"""Readers of a job's pods: which task and replica each is, where it runs, how its container
ended; and the Events about them. Logs come through `Cluster.pod_log` (`pods/log`), and are
read on from a cursor (`LogCursor`, `lines_after`)."""

import re
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Self

from .events import EventFacts, events_for
from .times import parse_time

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
        index=int(index) if str(index).isdecimal() else 0,
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


def job_pod(cluster: "Cluster", namespace: str, job_name: str, name: str) -> PodFacts | None:
    """One pod of the job, without its Events; None for a pod of any other job, or gone."""
    pod = cluster.get("v1", "Pod", name, namespace)
    if pod is None or (pod["metadata"].get("labels") or {}).get(JOB_LABEL) != job_name:
        return None
    return read_pod(pod)


def quota_held_until(
    cluster: "Cluster", namespace: str, job_name: str, now: datetime
) -> datetime | None:
    """Until when the job's pods still count in the namespace's ResourceQuota, as its pod
    evaluator counts them: a pod not yet ended counts, even while it stops, until its deletion
    time plus its grace period has passed (then one stuck on a lost node stops counting). None
    once none counts. `now` is timezone-aware."""
    pods = cluster.list("v1", "Pod", namespace=namespace, labels={JOB_LABEL: job_name})
    until = None
    for pod in pods:
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        meta = pod["metadata"]
        grace = meta.get("deletionGracePeriodSeconds")
        if meta.get("deletionTimestamp") is None or grace is None:
            return now + timedelta(days=1)  # not stopping: counts for as long as it runs
        stops = parse_time(meta["deletionTimestamp"])
        if stops is None:
            return now + timedelta(days=1)
        ends = stops + timedelta(seconds=grace)
        if ends > now:
            until = max(until or ends, ends)
    return until


# -- reading a log on from where the last read ended ------------------------------------------

# The time the container runtime wrote a line, before it in `pods/log?timestamps=true`.
_STAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]{1,9})?Z"
_STAMPED = re.compile(rb"(" + _STAMP.encode() + rb") ?")
_CURSOR = re.compile(rf"({_STAMP})/([0-9]{{1,9}})")
_SECONDS = "%Y-%m-%dT%H:%M:%S"


def _moment(stamp: str) -> tuple[str, int]:
    """A stamp as (whole seconds, nanoseconds), in the order of time."""
    seconds, _, fraction = stamp.rstrip("Z").partition(".")
    return seconds, int(fraction.ljust(9, "0"))


@dataclass(frozen=True)
class LogCursor:
    """Where a read of a log ended: the runtime's time of its last line, and how many lines of
    that very time it returned (lines may share one)."""

    stamp: str
    seen: int

    def __str__(self) -> str:
        return f"{self.stamp}/{self.seen}"

    @classmethod
    def parse(cls, text: str) -> Self | None:
        """The cursor a read returned; None for any other text (a time that does not exist
        too: the API server would refuse it)."""
        found = _CURSOR.fullmatch(text)
        if found is None:
            return None
        try:
            datetime.strptime(_moment(found.group(1))[0], _SECONDS)
        except ValueError:
            return None
        return cls(found.group(1), int(found.group(2)))

    @property
    def since_time(self) -> str:
        """Its whole second: `sinceTime` takes no finer."""
        return _moment(self.stamp)[0] + "Z"

    def next_second(self) -> Self:
        """The start of the second after its own, past every line of its second (for a second
        that holds more than one read: reading on from within it would get the same read)."""
        second = datetime.strptime(_moment(self.stamp)[0], _SECONDS) + timedelta(seconds=1)
        return type(self)(f"{second.strftime(_SECONDS)}.000000000Z", 0)


def lines_after(data: bytes, after: LogCursor | None) -> tuple[bytes, LogCursor | None]:
    """Of a stamped log (as `pods/log?timestamps=true` returns it), the lines after `after`,
    without their stamps, and the cursor past the last of them (`after` when there is none).
    A last line with no newline yet (still being written, or cut by `limitBytes`) is left for
    the next read. A line with no stamp is shown by a first read only (it has no place in
    time to read on from)."""
    skip = after.seen if after else 0
    cursor, out = after, []
    for line in data.split(b"\n")[:-1]:
        stamped = _STAMPED.match(line)
        if stamped is None:  # a kubelet stamps every line; a stand-in's fixed text has none
            if after is None:
                out.append(line + b"\n")
            continue
        stamp = stamped.group(1).decode()
        if after is not None:
            if _moment(stamp) < _moment(after.stamp):
                continue
            if _moment(stamp) == _moment(after.stamp) and skip:
                skip -= 1
                continue
        out.append(line[stamped.end() :] + b"\n")
        if cursor is not None and _moment(cursor.stamp) == _moment(stamp):
            cursor = LogCursor(stamp, cursor.seen + 1)
        else:
            cursor = LogCursor(stamp, 1)
    return b"".join(out), cursor
