"""A typed job description that turns into the portal's job spec."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field, fields


@dataclass
class Expose:
    name: str
    task: str
    container_port: int
    protocol: str = "http"
    mode: str = ""
    private: bool = False

    def to_dict(self):
        data = {
            "name": self.name,
            "task": self.task,
            "container_port": self.container_port,
            "protocol": self.protocol,
        }
        if self.mode:
            data["mode"] = self.mode
        if self.private:
            data["private"] = True
        return data


@dataclass
class Task:
    name: str
    replicas: int = 1
    gpus: int = 0
    cpu: str = "4"
    memory: str = "16Gi"
    shm: str = "8Gi"
    gpu_product: str = ""
    # The task's other spec fields (runtime_class, policies, ...), sent as they are.
    extra: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        known = {k: v for k, v in self.__dict__.items() if k != "extra" and v != ""}
        return {**known, **self.extra}


@dataclass
class VolcanoJob:
    """One job. `queue` is the tenant's slug (`vision`, not its Volcano queue's name
    `tenant-vision`). With `tasks` empty, one task named `master` with `gpu` GPUs runs
    `command`."""

    name: str
    image: str
    queue: str
    gpu: int = 0
    command: str | list[str] = ""
    tasks: list[Task] = field(default_factory=list)
    expose: list[Expose | dict] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    working_dir: str = ""
    networks: list[dict] = field(default_factory=list)
    workspace_gib: int = 50
    data_volume: str = ""  # a data volume of the tenant's, mounted at /data
    max_retry: int = 3
    plugins: list[str] = field(default_factory=lambda: ["svc", "env"])
    # The spec's other fields (policies, min_available, network_topology, volumes, ...), sent
    # as they are: a template's spec copied from the portal submits whole; the portal checks
    # every field. `volumes` here adds to `workspace_gib` (one given in both wins here).
    extra: dict = field(default_factory=dict)

    def spec(self) -> dict:
        """The portal's job spec; ValueError, saying which field, for fields of the wrong kind
        (the portal checks the rest)."""
        tasks = self.tasks or [Task("master", gpus=self.gpu)]
        spec = {
            "image": self.image,
            "command": _command(self.command),
            "env": _mapping(self.env, "env", "NAME: value"),
            "tasks": [t.to_dict() for t in tasks],
            "expose": [e.to_dict() if isinstance(e, Expose) else dict(e) for e in self.expose],
            "volumes": {"workspace_gib": self.workspace_gib},
            "max_retry": self.max_retry,
            "plugins": _names(self.plugins, "plugins"),
        }
        if self.working_dir:
            spec["working_dir"] = self.working_dir
        if self.networks:
            if not isinstance(self.networks, list):
                raise ValueError("networks is a list of networks, each a mapping with a pool")
            spec["networks"] = list(self.networks)
        extra = dict(self.extra)
        if "volumes" in extra:  # the rest of the volumes: workspace_gib is not lost to them
            volumes = _mapping(extra.pop("volumes"), "volumes", "workspace_gib: 50, ...")
            spec["volumes"] = {**spec["volumes"], **volumes}
        return {**spec, **extra}

    @classmethod
    def from_dict(cls, data: dict) -> VolcanoJob:
        """A job from its fields as a YAML file gives them (this class's fields, and any field
        of a template's spec as the portal's template pages and API show it); ValueError,
        saying which, for a file that is not one. Not a launched job as the API returns it:
        its `spec` is resolved for the cluster (see `Client.get`), not a job to submit."""
        data = _split(cls, data, "the job")
        if not isinstance(data.get("tasks", []), list):
            raise ValueError("tasks is a list of tasks, each a mapping with a name")
        if not isinstance(data.get("expose", []), list):
            raise ValueError("expose is a list of ports, each a mapping")
        data["tasks"] = [Task(**_split(Task, t, "a task")) for t in data.get("tasks", [])]
        exposed = data.get("expose", [])
        data["expose"] = [Expose(**_known(Expose, e, "an exposed port")) for e in exposed]
        for required in ("name", "image", "queue"):
            if not data.get(required):
                raise ValueError(f"the job needs a {required}")
        job = cls(**data)
        job.spec()  # says now what it could not turn into a spec
        return job


def _split(kind, data, what) -> dict:
    """`data`'s fields `kind` names, the rest under `extra`."""
    if not isinstance(data, dict):
        raise ValueError(f"{what} is written as a mapping of its fields (got {data!r:.60})")
    names = {f.name for f in fields(kind)} - {"extra"}
    known = {k: v for k, v in data.items() if k in names}
    extra = {k: v for k, v in data.items() if k not in names}
    return {**known, "extra": {**data.get("extra", {}), **extra}} if extra else known


def _known(kind, data, what) -> dict:
    if not isinstance(data, dict):
        raise ValueError(f"{what} is written as a mapping of its fields (got {data!r:.60})")
    unknown = sorted(set(data) - {f.name for f in fields(kind)})
    if unknown:
        known = ", ".join(f.name for f in fields(kind))
        raise ValueError(f"{what} has no field {', '.join(unknown)}; its fields are {known}")
    if "name" not in data:
        raise ValueError(f"{what} needs a name")
    return data


def _command(command) -> list[str]:
    if isinstance(command, str):
        try:
            return shlex.split(command)
        except ValueError as exc:  # an unclosed quote
            raise ValueError(f"command: {exc} in {command!r:.80}") from exc
    if command is None:
        return []
    if not isinstance(command, list) or not all(isinstance(a, str) for a in command):
        raise ValueError("command is a line of text, or a list of its words as text")
    return list(command)


def _mapping(value, name, shape) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{name} is a mapping ({shape}), not {type(value).__name__}")
    return dict(value)


def _names(value, name) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{name} is a list of names")
    return list(value)
