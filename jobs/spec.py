"""Job templates' specs: validation with errors keyed by field path, and resolution of a template
plus a launch's overrides into the frozen JobSpec the manifest builders take."""

import re
import shlex
from collections.abc import Collection, Iterable
from typing import Any

from django.core.exceptions import ValidationError

from core.validators import DNS1123_LABEL
from k8s_adapters.jobspec import JobSpec, Policy, Port, Task
from k8s_adapters.quantity import to_decimal
from k8s_adapters.volcano import KNOWN_PLUGINS

from .choices import POLICY_ACTIONS, POLICY_EVENTS, Protocol

IMAGE = re.compile(
    # a registry host has a dot or a port, or is localhost (the Docker reference grammar)
    r"^(?:(?:localhost|[a-zA-Z0-9-]+(?:\.[a-zA-Z0-9-]+)+)(?::[0-9]+)?/|[a-zA-Z0-9-]+:[0-9]+/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[\w][\w.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
# Variables that choose devices or belong to the portal: the device plugin and the portal set
# them, and a job that overrode them could reach GPUs it was not given or lie about itself.
RESERVED_ENV = ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES")
RESERVED_ENV_PREFIXES = ("NVIDIA_", "GPU_PORTAL_")
JOB_NAME_MAX = 48  # leaves room for "-workspace" and Volcano's "-<task>-<index>" pod names
RESERVED_PORT_NAMES = ("auth", "api", "static", "admin")
ENDPOINT_MODES = ("ingress", "nodeport", "loadbalancer", "podip")
OVERRIDABLE = ("image", "command", "gpus", "replicas", "data_volume", "workspace_gib")
MAX_GPUS_PER_REPLICA = 64
MAX_REPLICAS = 1000
MAX_DISK_GIB = 100_000


class Errors:
    """Collects errors keyed by field path, raised once at the end."""

    def __init__(self) -> None:
        self.errors: dict[str, list[ValidationError]] = {}

    def add(self, path: str, message: str, code: str | None = "invalid") -> None:
        self.errors.setdefault(path, []).append(ValidationError(message, code=code))

    def raise_if_any(self) -> None:
        if self.errors:
            raise ValidationError(self.errors)


def validate_job_name(name: str) -> None:
    if len(name) > JOB_NAME_MAX or not DNS1123_LABEL.match(name):
        raise ValidationError(
            f"Use at most {JOB_NAME_MAX} lowercase letters, digits and '-', starting and ending "
            "with a letter or digit, for example 'llama-sft-001'.",
            code="invalid_name",
        )


def validate_image(image: Any) -> None:
    if not isinstance(image, str) or not IMAGE.match(image):
        raise ValidationError(
            f"'{image}' is not an image reference; use registry/path/name:tag, for example "
            "'nvcr.io/nvidia/pytorch:24.10-py3'.",
            code="invalid_image",
        )


def _int(errors: Errors, path: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        errors.add(path, f"Must be a whole number (got {value!r}).")
        return low
    if not low <= value <= high:
        errors.add(path, f"Must be between {low} and {high} (got {value}).", "out_of_range")
    return value


def _quantity(errors: Errors, path: str, value: Any) -> str:
    try:
        ok = to_decimal(value) > 0
    except (ValueError, ArithmeticError, TypeError):
        ok = False
    if not ok:
        errors.add(
            path,
            f"'{value}' is not a positive Kubernetes quantity such as '8', '500m' or '64Gi'.",
            "invalid_quantity",
        )
    return str(value)


def _argv(errors: Errors, path: str, value: Any) -> list[str]:
    if isinstance(value, str):
        try:
            return shlex.split(value)
        except ValueError as exc:
            errors.add(path, f"Cannot split the command line: {exc}.")
            return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.add(path, "Give a list of strings (argv) or one command line.")
        return []
    return list(value)


def _policies(errors: Errors, path: str, items: Any) -> tuple[Policy, ...]:
    policies = []
    for i, item in enumerate(items or []):
        event, action = item.get("event"), item.get("action")
        if event not in POLICY_EVENTS:
            errors.add(
                f"{path}[{i}].event",
                f"Unknown event {event!r}; use one of {', '.join(POLICY_EVENTS)}.",
            )
        if action not in POLICY_ACTIONS:
            errors.add(
                f"{path}[{i}].action",
                f"Unknown action {action!r}; use one of {', '.join(POLICY_ACTIONS)}.",
            )
        policies.append(Policy(str(event), str(action)))
    return tuple(policies)


def _tasks(errors: Errors, items: Any) -> tuple[Task, ...]:
    if not items:
        errors.add("tasks", "A job needs at least one task.", "required")
        return ()
    tasks, seen = [], set()
    for i, item in enumerate(items):
        path = f"tasks[{i}]"
        name = str(item.get("name", ""))
        if not DNS1123_LABEL.match(name) or len(name) > 20:
            errors.add(f"{path}.name", "Task names are up to 20 lowercase letters, digits and '-'.")
        if name in seen:
            errors.add(f"{path}.name", f"Task '{name}' appears twice.", "duplicate")
        seen.add(name)
        tasks.append(
            Task(
                name=name,
                replicas=_int(errors, f"{path}.replicas", item.get("replicas", 1), 1, MAX_REPLICAS),
                gpus=_int(errors, f"{path}.gpus", item.get("gpus", 0), 0, MAX_GPUS_PER_REPLICA),
                cpu=_quantity(errors, f"{path}.cpu", item.get("cpu", "4")),
                memory=_quantity(errors, f"{path}.memory", item.get("memory", "16Gi")),
                shm=_quantity(errors, f"{path}.shm", item.get("shm", "8Gi")),
                gpu_product=str(item.get("gpu_product", "")),
                runtime_class=str(item.get("runtime_class", "nvidia")),
                policies=_policies(errors, f"{path}.policies", item.get("policies")),
            )
        )
    return tuple(tasks)


def _ports(errors: Errors, items: Any, task_names: set[str]) -> tuple[Port, ...]:
    ports, seen = [], set()
    for i, item in enumerate(items or []):
        path = f"expose[{i}]"
        name, task = str(item.get("name", "")), str(item.get("task", ""))
        if not DNS1123_LABEL.match(name) or len(name) > 15:
            errors.add(
                f"{path}.name",
                "Port names are up to 15 lowercase letters, digits and '-', for example 'jupyter'.",
            )
        if name in seen:
            errors.add(f"{path}.name", f"The port name '{name}' is used twice.", "duplicate")
        seen.add(name)
        if task not in task_names:
            errors.add(
                f"{path}.task",
                f"No task named '{task}'; tasks are {', '.join(sorted(task_names))}.",
            )
        protocol = item.get("protocol", "http")
        if protocol not in Protocol.values:
            errors.add(f"{path}.protocol", "Use http, tcp or ssh.")
        if name in RESERVED_PORT_NAMES:
            errors.add(f"{path}.name", f"'{name}' is reserved; pick another name.", "reserved")
        mode = item.get("mode", "")
        if mode and mode not in ENDPOINT_MODES:
            errors.add(f"{path}.mode", f"Use one of {', '.join(ENDPOINT_MODES)}.")
        if mode == "ingress" and protocol != "http":
            errors.add(
                f"{path}.mode",
                (
                    f"{protocol.upper()} cannot go through the HTTP ingress. Use mode "
                    "'nodeport' or 'loadbalancer' (or 'podip' from inside the cluster); for "
                    "SSH, leave the mode empty and the cluster's TCP mode is used."
                ),
                "not_http",
            )
        port = _int(errors, f"{path}.container_port", item.get("container_port"), 1, 65535)
        ports.append(Port(name, task, port, protocol, mode, bool(item.get("private", False))))
    return tuple(ports)


def _networks(errors: Errors, networks: Any) -> None:
    if not isinstance(networks, list):
        errors.add("networks", "Give a list of {pool, static_ip} entries.")
        return
    for i, item in enumerate(networks):
        if not isinstance(item, dict) or not isinstance(item.get("pool"), str):
            errors.add(f"networks[{i}].pool", "Name the IP pool, for example 'compute-a'.")
        elif set(item) - {"pool", "static_ip", "pinned"}:
            errors.add(
                f"networks[{i}]",
                f"Unknown keys: {', '.join(sorted(set(item) - {'pool', 'static_ip', 'pinned'}))}.",
            )


def _env(errors: Errors, env: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(env, dict):
        errors.add("env", "Give environment variables as NAME: value pairs.")
        return ()
    for name in env:
        if not ENV_NAME.match(str(name)):
            errors.add(
                "env",
                f"'{name}' is not a valid environment variable name; use letters, "
                "digits, '_', '-' and '.', not starting with a digit.",
            )
        elif str(name) in RESERVED_ENV or str(name).startswith(RESERVED_ENV_PREFIXES):
            errors.add(
                "env",
                f"'{name}' is set by the cluster or the portal (devices, GPU_PORTAL_*); "
                "leave it out.",
                "reserved",
            )
    return tuple((str(k), str(v)) for k, v in env.items())


def parse(
    data: Any,
    *,
    name: str = "job",
    namespace: str = "",
    queue: str = "",
    tenant: str = "",
    owner: str = "",
    ssh_keys: Iterable[str] = (),
    data_volume: str = "",
    networks_annotation: str = "",
    extra_env: Iterable[tuple[str, str]] = (),
) -> JobSpec:
    """A JobSpec from a template's spec dict (after overrides), or a ValidationError listing
    every problem by field path."""
    if not isinstance(data, dict):
        raise ValidationError({"spec": ["The spec must be a mapping of fields."]})
    errors = Errors()
    try:
        validate_image(data.get("image"))
    except ValidationError as exc:
        errors.add("image", exc.messages[0], exc.code)
    tasks = _tasks(errors, data.get("tasks"))
    plugins = tuple(data.get("plugins", ("svc", "env")))
    for plugin in plugins:
        if plugin not in KNOWN_PLUGINS:
            errors.add(
                "plugins", f"Unknown Volcano plugin '{plugin}'; use {', '.join(KNOWN_PLUGINS)}."
            )
    topology = data.get("network_topology") or {}
    if topology and topology.get("mode") not in ("hard", "soft"):
        errors.add("network_topology.mode", "Use 'hard' or 'soft'.")
    tier = topology.get("highest_tier_allowed")
    if tier is not None:
        _int(errors, "network_topology.highest_tier_allowed", tier, 1, 10)
    volumes = data.get("volumes") or {}
    workspace = _int(
        errors, "volumes.workspace_gib", volumes.get("workspace_gib", 50), 1, MAX_DISK_GIB
    )
    _networks(errors, data.get("networks") or [])
    min_available = data.get("min_available")
    total = sum(t.replicas for t in tasks)
    if min_available is not None:
        _int(errors, "min_available", min_available, 1, max(total, 1))
    spec = JobSpec(
        name=name,
        namespace=namespace,
        queue=queue,
        tenant=tenant,
        owner=owner,
        image=str(data.get("image")),
        tasks=tasks,
        command=tuple(_argv(errors, "command", data.get("command", []))),
        args=tuple(_argv(errors, "args", data.get("args", []))),
        working_dir=str(data.get("working_dir", "")),
        env=_env(errors, data.get("env", {})),
        min_available=min_available,
        max_retry=_int(errors, "max_retry", data.get("max_retry", 3), 0, 100),
        ttl_seconds_after_finished=data.get("ttl_seconds_after_finished"),
        policies=_policies(errors, "policies", data.get("policies")),
        plugins=plugins,
        topology_mode=topology.get("mode", ""),
        topology_highest_tier=tier,
        ports=_ports(errors, data.get("expose"), {t.name for t in tasks}),
        workspace_gib=workspace,
        storage_class=str(volumes.get("storage_class", "")),
        data_volume=data_volume,
        ssh_keys=tuple(ssh_keys),
        networks_annotation=networks_annotation,
        extra_env=tuple(extra_env),
    )
    errors.raise_if_any()
    return spec


def apply_overrides(
    template_spec: dict[str, Any], overrides: dict[str, Any], allowed: Collection[str]
) -> dict[str, Any]:
    """The template's spec with the launch's overrides, refusing fields the template locks."""
    spec = {
        **template_spec,
        "tasks": [dict(t) for t in template_spec.get("tasks", [])],
        "volumes": dict(template_spec.get("volumes") or {}),
    }
    errors = Errors()
    for key, value in overrides.items():
        if value in (None, "", {}):
            continue
        if key not in allowed:
            errors.add(key, f"This template does not allow changing '{key}'.", "locked")
        elif key in ("image", "command"):
            spec[key] = value
        elif key == "gpus":  # per replica, for every task that uses GPUs
            for task in spec["tasks"]:
                if task.get("gpus"):
                    task["gpus"] = value
        elif key == "replicas":  # {task name: replicas}
            for task in spec["tasks"]:
                if task["name"] in value:
                    task["replicas"] = value[task["name"]]
        elif key == "workspace_gib":
            spec["volumes"]["workspace_gib"] = value
    errors.raise_if_any()
    return spec
