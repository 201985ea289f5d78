"""The resolved description of a job that the manifest builders take, and its one codec: to and
from the JSON stored with the job, and back to the template format a launch reads."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from .names import ssh_keys_secret, workspace_claim
from .quantity import to_decimal


@dataclass(frozen=True)
class Port:
    name: str
    task: str
    container_port: int
    protocol: str = "http"
    mode: str = ""  # empty: the cluster's default for the protocol
    private: bool = False  # only the job's owner may open it


@dataclass(frozen=True)
class Policy:
    event: str
    action: str


@dataclass(frozen=True)
class Task:
    name: str
    replicas: int = 1
    gpus: int = 0
    cpu: str = "4"
    memory: str = "16Gi"
    shm: str = "8Gi"
    gpu_product: str = ""
    runtime_class: str = "nvidia"
    policies: tuple[Policy, ...] = ()


@dataclass(frozen=True)
class JobSpec:
    """Everything a launch resolves to: the template with the user's overrides applied."""

    name: str
    namespace: str
    queue: str
    tenant: str
    owner: str
    image: str
    tasks: tuple[Task, ...]
    command: tuple[str, ...] = ()
    args: tuple[str, ...] = ()
    working_dir: str = ""
    env: tuple[tuple[str, str], ...] = ()
    min_available: int | None = None
    max_retry: int = 3
    ttl_seconds_after_finished: int | None = None
    policies: tuple[Policy, ...] = ()
    plugins: tuple[str, ...] = ("svc", "env")
    topology_mode: str = ""
    topology_highest_tier: int | None = None
    ports: tuple[Port, ...] = ()
    workspace_gib: int = 50
    data_volume: str = ""  # name of the data PVC to mount at /data, if any
    storage_class: str = ""
    ssh_keys: tuple[str, ...] = ()
    networks_annotation: str = ""
    extra_env: tuple[tuple[str, str], ...] = field(default=(), compare=False)

    @property
    def total_gpus(self) -> int:
        return sum(t.gpus * t.replicas for t in self.tasks)

    @property
    def total_cpu_millicores(self) -> int:
        """CPU requested by all pods together, as the ResourceQuota and the queue count it."""
        return sum(math.ceil(to_decimal(t.cpu) * 1000) * t.replicas for t in self.tasks)

    @property
    def total_memory_mib(self) -> int:
        # Rounded up per pod: rounded down, a gang of many small pods would count less than
        # the ResourceQuota counts, and be admitted to be refused halfway.
        return sum(math.ceil(to_decimal(t.memory) / 2**20) * t.replicas for t in self.tasks)

    @property
    def total_replicas(self) -> int:
        return sum(t.replicas for t in self.tasks)

    @property
    def workspace_claim(self) -> str:
        return workspace_claim(self.name)

    @property
    def ssh_secret(self) -> str:
        return ssh_keys_secret(self.name)

    # -- codec ---------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """Plain data for a JSON column; `from_dict` reads it back."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> JobSpec:
        """The spec stored by `to_dict` (lists where tuples were, after a JSON round trip)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["tasks"] = tuple(
            Task(**{**t, "policies": _policies(t.get("policies", ()))}) for t in data["tasks"]
        )
        values["policies"] = _policies(data.get("policies", ()))
        values["ports"] = tuple(Port(**p) for p in data.get("ports", ()))
        for key in ("command", "args", "plugins", "ssh_keys"):
            values[key] = tuple(data.get(key, ()))
        for key in ("env", "extra_env"):
            values[key] = tuple((str(k), str(v)) for k, v in data.get(key, ()))
        return cls(**values)

    def to_template(self, networks: list[dict[str, Any]] | tuple = ()) -> dict[str, Any]:
        """This spec in the template format a launch reads (a relaunch sends it again); the
        identity fields (name, namespace, queue, owner, keys) come from the new launch."""
        template: dict[str, Any] = {
            "image": self.image,
            "command": list(self.command),
            "args": list(self.args),
            "working_dir": self.working_dir,
            "env": dict(self.env),
            "tasks": [
                {**asdict(t), "policies": [asdict(p) for p in t.policies]} for t in self.tasks
            ],
            "min_available": self.min_available,
            "max_retry": self.max_retry,
            "ttl_seconds_after_finished": self.ttl_seconds_after_finished,
            "policies": [asdict(p) for p in self.policies],
            "plugins": list(self.plugins),
            "network_topology": {},
            "expose": [asdict(p) for p in self.ports],
            "volumes": {"workspace_gib": self.workspace_gib, "storage_class": self.storage_class},
            "networks": [dict(n) for n in networks],
        }
        if self.topology_mode:
            template["network_topology"] = {
                "mode": self.topology_mode,
                "highest_tier_allowed": self.topology_highest_tier,
            }
        return template


def _policies(items: Any) -> tuple[Policy, ...]:
    return tuple(Policy(**p) for p in items)
