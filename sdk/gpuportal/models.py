"""A typed job description that turns into the portal's job spec."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field


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


@dataclass
class VolcanoJob:
    """One job. `queue` is the tenant (its Volcano queue). With `tasks` empty, one task named
    `master` with `gpu` GPUs runs `command`."""

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
    max_retry: int = 3
    plugins: list[str] = field(default_factory=lambda: ["svc", "env"])

    def spec(self) -> dict:
        tasks = self.tasks or [Task("master", gpus=self.gpu)]
        command = shlex.split(self.command) if isinstance(self.command, str) else self.command
        spec = {
            "image": self.image,
            "command": list(command),
            "env": dict(self.env),
            "tasks": [{k: v for k, v in t.__dict__.items() if v != ""} for t in tasks],
            "expose": [e.to_dict() if isinstance(e, Expose) else dict(e) for e in self.expose],
            "volumes": {"workspace_gib": self.workspace_gib},
            "max_retry": self.max_retry,
            "plugins": list(self.plugins),
        }
        if self.working_dir:
            spec["working_dir"] = self.working_dir
        if self.networks:
            spec["networks"] = list(self.networks)
        return spec

    @classmethod
    def from_dict(cls, data: dict) -> VolcanoJob:
        data = dict(data)
        data["tasks"] = [Task(**t) for t in data.get("tasks", [])]
        data["expose"] = [Expose(**e) for e in data.get("expose", [])]
        return cls(**data)
