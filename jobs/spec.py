"""Job templates' specs: validation with errors keyed by field path, and resolution of a template
plus a launch's overrides into the frozen JobSpec the manifest builders take."""

import difflib
import json
import math
import re
import shlex
from collections.abc import Collection, Iterable
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ValidationError

from core.validators import DNS1123_SUBDOMAIN as DNS_SUBDOMAIN
from k8s_adapters.jobspec import JobSpec, Policy, Port, Task
from k8s_adapters.names import JOB_OBJECT_SUFFIXES, meets_portal_object
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
JOB_NAME_MAX = 48
# Claims and Secrets a job creates: a data volume may not take such a name.
RESERVED_VOLUME_SUFFIXES = JOB_OBJECT_SUFFIXES
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


# A job's name becomes Volcano's Service for its pods, so it must be a DNS-1035 label.
JOB_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# IANA service names, what Kubernetes accepts as a port name: up to 15 characters, lowercase
# letters, digits and single hyphens, at least one letter, no hyphen at either end.
PORT_NAME = re.compile(r"^(?=.*[a-z])[a-z0-9]([a-z0-9]|-(?=[a-z0-9])){0,14}$")
TASK_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,18}[a-z0-9])?$")
# Label values (GPU products select nodes by label) and DNS subdomains (RuntimeClass names).
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$")
MAX_TTL_SECONDS = 30 * 24 * 3600


# The most a spec may hold: no real spec comes near, and a hostile one (YAML aliases nest a few
# hundred bytes into billions of values; merge keys copy a mapping into each that merges it;
# deep nesting exhausts the stack) is refused before anything walks or stores it.
MAX_SPEC_VALUES, MAX_SPEC_DEPTH = 20_000, 32
MAX_SOURCE_CHARS = 200_000  # a template's YAML text
_TOO_MANY = (
    f"The spec holds more than {MAX_SPEC_VALUES} values; no job needs that many (are YAML "
    "aliases or merge keys repeating a list?)."
)
_TOO_DEEP = f"The spec nests deeper than {MAX_SPEC_DEPTH} levels; no field of a job needs that."
_JSON_SCALARS = (str, bool, int, type(None))
_BAD_TEXT = (
    "This text holds characters that cannot be stored (NUL or a broken surrogate); remove them."
)


class _TooMany(yaml.YAMLError):
    pass


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """The safe loader (libyaml's parser where PyYAML has it), counting the pairs of the
    mappings it builds: a merge key (`<<: *defaults`) copies the whole merged mapping, so a
    short text could otherwise build billions of pairs before any check sees them."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.pairs = 0

    def flatten_mapping(self, node: Any) -> None:
        super().flatten_mapping(node)
        self.pairs += len(node.value)
        if self.pairs > MAX_SPEC_VALUES:
            raise _TooMany


def _not_json(value: Any) -> str:
    """Why a value YAML read cannot be stored as the spec's JSON ("" when it can)."""
    if isinstance(value, float):
        return "" if math.isfinite(value) else "is not a finite number"
    if isinstance(value, (*_JSON_SCALARS, dict, list)):
        return ""
    return f"was read as a {type(value).__name__}; put it in quotes to keep it as text"


def _unstorable(text: str) -> bool:
    """Text PostgreSQL and the API server cannot hold: NUL and lone surrogates."""
    return "\x00" in text or any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def check_shape(data: Any) -> None:
    """Refuse a spec with more values or deeper nesting than any job needs, keys that are not
    text, values JSON cannot hold (YAML reads dates, sets, binary and .nan), or text that
    cannot be stored. Walks without recursion and stops at the limit, so a spec that expands
    to billions of values (YAML aliases) is refused as fast as a small one."""
    errors = Errors()
    seen, stack = 0, [(data, 0, "")]
    while stack:
        value, depth, path = stack.pop()
        seen += 1
        if seen > MAX_SPEC_VALUES:
            raise ValidationError({"spec": [_TOO_MANY]})
        if depth > MAX_SPEC_DEPTH:
            raise ValidationError({"spec": [_TOO_DEEP]})
        if why := _not_json(value):
            errors.add(path or "spec", f"This value {why}.")
        elif isinstance(value, str) and _unstorable(value):
            errors.add(path, _BAD_TEXT, "bad_text")
        elif isinstance(value, dict):
            for key, item in value.items():
                if not isinstance(key, str):
                    errors.add(path or "spec", f"The key {key!r} must be text (put it in quotes).")
                    continue
                if _unstorable(key):  # a key holding them: named by where it sits
                    errors.add(path or "spec", _BAD_TEXT, "bad_text")
                stack.append((item, depth + 1, f"{path}.{key}".lstrip(".")))
        elif isinstance(value, list):
            stack.extend((v, depth + 1, f"{path}[{i}]") for i, v in enumerate(value))
    errors.raise_if_any()


def from_yaml(text: str) -> dict[str, Any]:
    """A spec mapping from YAML text, or a ValidationError on `spec` saying what is wrong."""
    try:
        data = yaml.load(text, Loader=_Loader)  # noqa: S506  (a safe loader)
    except _TooMany as exc:
        raise ValidationError({"spec": [_TOO_MANY]}) from exc
    except yaml.YAMLError as exc:
        raise ValidationError({"spec": [f"This is not valid YAML: {exc}"]}) from exc
    except RecursionError as exc:
        raise ValidationError({"spec": [_TOO_DEEP]}) from exc
    if not isinstance(data, dict):
        raise ValidationError({"spec": ["The spec must be a YAML mapping."]})
    check_shape(data)
    return data


def validate_job_name(name: str) -> None:
    if len(name) > JOB_NAME_MAX or not JOB_NAME.match(name):
        raise ValidationError(
            f"Use at most {JOB_NAME_MAX} lowercase letters, digits and '-', starting with a "
            "letter and ending with a letter or digit, for example 'llama-sft-001'.",
            code="invalid_name",
        )
    if meets_portal_object(name):
        raise ValidationError(
            "Names starting with 'gpu-portal' or with 'ep' and a number and '-' (like "
            "'ep12-') are the portal's own; choose another name.",
            code="reserved_name",
        )


def _mapping(errors: "Errors", path: str, value: Any) -> dict[str, Any]:
    """A mapping where the spec needs one; anything else is a field error, never a crash."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        errors.add(path, f"Give a mapping of fields here, not {type(value).__name__}.")
        return {}
    return value


def _items(errors: "Errors", path: str, value: Any) -> list[tuple[int, dict[str, Any]]]:
    """(index, entry) of a list of mappings; entries of another type are field errors."""
    if value is None:
        return []
    if not isinstance(value, list):
        errors.add(path, f"Give a list here, not {type(value).__name__}.")
        return []
    items = []
    for i, item in enumerate(value):
        if isinstance(item, dict):
            items.append((i, item))
        else:
            errors.add(f"{path}[{i}]", "Each entry is a mapping of fields.")
    return items


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


# Above any node's CPU or memory by far, and within what sums of millicores or bytes can hold.
QUANTITY_MAX = 2**53


# Kubernetes' quantity grammar (apimachinery's): no spaces, no '_', which Python's Decimal takes.
QUANTITY = re.compile(r"[+-]?[0-9.]+[eEinumkKMGTP]*[-+]?[0-9]*")


def _quantity(errors: Errors, path: str, value: Any) -> str:
    try:
        amount = to_decimal(value)
        ok = (
            not isinstance(value, bool)
            and bool(QUANTITY.fullmatch(str(value)))
            and amount.is_finite()
            and 0 < amount < QUANTITY_MAX
        )
    except (ValueError, ArithmeticError, TypeError):
        ok = False
    if not ok:
        errors.add(
            path,
            f"'{value}' is not a positive Kubernetes quantity such as '8', '500m' or '64Gi'.",
            "invalid_quantity",
        )
    return str(value)


def _text(errors: Errors, path: str, value: Any) -> str:
    """A text field as YAML read it: a blank one (null) is empty, a number its digits; true,
    false, yes or no were read as a boolean, which is said (the text meant is in quotes)."""
    if value is None:
        return ""
    if isinstance(value, bool):
        errors.add(path, f"This was read as {str(value).lower()}; put it in quotes if it is text.")
        return ""
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


def _working_dir(errors: Errors, value: Any) -> str:
    path = _text(errors, "working_dir", value)
    if path and not path.startswith("/"):
        errors.add("working_dir", f"'{path}' is not an absolute path; start it with '/'.")
    return path


def _policies(errors: Errors, path: str, items: Any) -> tuple[Policy, ...]:
    """Lifecycle policies, one action per event in a list, and '*' (any event) alone in its
    list: Volcano's job webhook refuses both, after the portal admitted the job."""
    policies: list[Policy] = []
    first: dict[str, int] = {}
    for i, item in _items(errors, path, items):
        event, action = item.get("event"), item.get("action")
        if isinstance(event, str) and event in first:
            errors.add(
                f"{path}[{i}].event",
                f"{event} already has a policy in this list ({path}[{first[event]}]); give "
                "each event one action.",
                "duplicate",
            )
        elif isinstance(event, str):
            first[event] = i
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
    if "*" in first and len(first) > 1:
        errors.add(
            f"{path}[{first['*']}].event",
            "'*' (any event) stands alone in its list: name the events instead, or keep only it.",
        )
    return tuple(policies)


# What a spec and each of its tasks may hold: a key beyond these is a typo ('comand') that
# would otherwise be dropped without a word.
SPEC_KEYS = (
    "image",
    "command",
    "args",
    "working_dir",
    "env",
    "tasks",
    "plugins",
    "policies",
    "max_retry",
    "min_available",
    "ttl_seconds_after_finished",
    "network_topology",
    "networks",
    "volumes",
    "expose",
)
TASK_KEYS = (
    "name",
    "replicas",
    "gpus",
    "cpu",
    "memory",
    "shm",
    "gpu_product",
    "runtime_class",
    "policies",
)


def _unknown_keys(
    errors: Errors, prefix: str, item: dict[str, Any], known: tuple[str, ...]
) -> None:
    for key in item:
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"did you mean '{close[0]}'?" if close else f"use {', '.join(known)}."
            errors.add(f"{prefix}{key}", f"Unknown field '{key}'; {hint}", "unknown")


def _tasks(errors: Errors, items: Any) -> tuple[Task, ...]:
    entries = _items(errors, "tasks", items)
    if not entries:
        errors.add("tasks", "A job needs at least one task.", "required")
        return ()
    tasks, seen = [], set()
    for i, item in entries:
        path = f"tasks[{i}]"
        _unknown_keys(errors, f"{path}.", item, TASK_KEYS)
        name = str(item.get("name", ""))
        if not TASK_NAME.match(name):
            errors.add(
                f"{path}.name",
                "Task names are up to 20 lowercase letters, digits and '-', starting with a "
                "letter, for example 'worker'.",
            )
        product = _text(errors, f"{path}.gpu_product", item.get("gpu_product"))
        if not LABEL_VALUE.match(product):
            errors.add(
                f"{path}.gpu_product",
                "A GPU product is a node label value such as 'NVIDIA-H100-80GB-HBM3' (letters, "
                "digits, '-', '_', '.', at most 63).",
            )
        gpus = _int(errors, f"{path}.gpus", item.get("gpus", 0), 0, MAX_GPUS_PER_REPLICA)
        offered = settings.RUNTIME_CLASSES or ["nvidia"]
        runtime = _text(errors, f"{path}.runtime_class", item.get("runtime_class")) or offered[0]
        if not DNS_SUBDOMAIN.match(runtime) or len(runtime) > 253:
            errors.add(f"{path}.runtime_class", "Name a RuntimeClass, for example 'nvidia'.")
        elif gpus and runtime not in offered:  # only GPU tasks run under one
            errors.add(
                f"{path}.runtime_class",
                f"Jobs here run under {', '.join(offered)}, not '{runtime}' "
                "(platform admins choose the RuntimeClasses jobs may use).",
            )
        if name in seen:
            errors.add(f"{path}.name", f"Task '{name}' appears twice.", "duplicate")
        seen.add(name)
        tasks.append(
            Task(
                name=name,
                replicas=_int(errors, f"{path}.replicas", item.get("replicas", 1), 1, MAX_REPLICAS),
                gpus=gpus,
                cpu=_quantity(errors, f"{path}.cpu", item.get("cpu", "4")),
                memory=_quantity(errors, f"{path}.memory", item.get("memory", "16Gi")),
                shm=_quantity(errors, f"{path}.shm", item.get("shm", "8Gi")),
                gpu_product=product,
                runtime_class=runtime,
                policies=_policies(errors, f"{path}.policies", item.get("policies")),
            )
        )
    return tuple(tasks)


def _ports(errors: Errors, items: Any, task_names: set[str]) -> tuple[Port, ...]:
    ports: list[Port] = []
    seen: set[str] = set()
    used: dict[tuple[str, int], str] = {}
    for i, item in _items(errors, "expose", items):
        path = f"expose[{i}]"
        name, task = str(item.get("name", "")), str(item.get("task", ""))
        if not PORT_NAME.match(name):
            errors.add(
                f"{path}.name",
                "Port names are up to 15 lowercase letters, digits and single '-', with at least "
                "one letter, for example 'jupyter' (Kubernetes' rule for port names).",
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
        if not isinstance(protocol, str) or protocol not in Protocol.values:
            errors.add(f"{path}.protocol", "Use http, tcp or ssh.")
            protocol = "http"  # said; the mode is checked as for the default
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
        if (task, port) in used:
            errors.add(
                f"{path}.container_port",
                f"Port {port} of task '{task}' is already exposed as '{used[task, port]}'; "
                "expose each port once.",
                "duplicate",
            )
        used.setdefault((task, port), name)
        ports.append(Port(name, task, port, protocol, mode, bool(item.get("private", False))))
    return tuple(ports)


FLAGS = {
    "static_ip": "true reserves one address of the pool for the job; the portal picks it",
    "pinned": "true keeps that address reserved after the job is deleted",
}


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
        else:
            for flag, meaning in FLAGS.items():
                if not isinstance(item.get(flag, False), bool):
                    errors.add(
                        f"networks[{i}].{flag}",
                        f"Give true or false ({meaning}), not {json.dumps(item[flag])[:60]}.",
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
    return tuple((str(k), _text(errors, f"env.{k}", v)) for k, v in env.items())


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
    check_shape(data)
    errors = Errors()
    _unknown_keys(errors, "", data, SPEC_KEYS)
    try:
        validate_image(data.get("image"))
    except ValidationError as exc:
        errors.add("image", exc.messages[0], exc.code)
    tasks = _tasks(errors, data.get("tasks"))
    for i, task in enumerate(tasks):
        # Volcano names pods <job>-<task>-<index>, and its svc plugin makes that the pod's
        # host name: a DNS label.
        longest = len(f"{name}-{task.name}-{max(task.replicas - 1, 0)}")
        if longest > 63:
            errors.add(
                f"tasks[{i}].name",
                f"With the job name '{name}', task '{task.name}' makes pod names of {longest} "
                "characters; Kubernetes allows 63. Shorten the job or the task name.",
            )
    plugins = data.get("plugins", ("svc", "env"))
    if not isinstance(plugins, list | tuple):
        errors.add("plugins", "Give a list of Volcano plugin names, for example [svc, env].")
        plugins = ()
    for plugin in plugins:
        if plugin not in KNOWN_PLUGINS:
            errors.add(
                "plugins", f"Unknown Volcano plugin '{plugin}'; use {', '.join(KNOWN_PLUGINS)}."
            )
    plugins = tuple(str(p) for p in plugins)
    topology = _mapping(errors, "network_topology", data.get("network_topology"))
    if topology and topology.get("mode") not in ("hard", "soft"):
        errors.add("network_topology.mode", "Use 'hard' or 'soft'.")
    tier = topology.get("highest_tier_allowed")
    if tier is not None:
        _int(errors, "network_topology.highest_tier_allowed", tier, 1, 10)
    volumes = _mapping(errors, "volumes", data.get("volumes"))
    storage_class = _text(errors, "volumes.storage_class", volumes.get("storage_class"))
    if storage_class and (not DNS_SUBDOMAIN.match(storage_class) or len(storage_class) > 253):
        errors.add("volumes.storage_class", "Name a StorageClass, for example 'fast-nvme'.")
    ttl = data.get("ttl_seconds_after_finished")
    if ttl is not None:
        ttl = _int(errors, "ttl_seconds_after_finished", ttl, 0, MAX_TTL_SECONDS)
    workspace = _int(
        errors, "volumes.workspace_gib", volumes.get("workspace_gib", 50), 1, MAX_DISK_GIB
    )
    _networks(errors, data.get("networks") or [])
    min_available = data.get("min_available")
    total = sum(t.replicas for t in tasks)
    if min_available is not None:
        min_available = _int(errors, "min_available", min_available, 1, max(total, 1))
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
        working_dir=_working_dir(errors, data.get("working_dir")),
        env=_env(errors, data.get("env", {})),
        min_available=min_available,
        max_retry=_int(errors, "max_retry", data.get("max_retry", 3), 0, 100),
        ttl_seconds_after_finished=ttl,
        policies=_policies(errors, "policies", data.get("policies")),
        plugins=plugins,
        topology_mode=topology.get("mode", ""),
        topology_highest_tier=tier,
        ports=_ports(errors, data.get("expose"), {t.name for t in tasks}),
        workspace_gib=workspace,
        storage_class=storage_class,
        data_volume=data_volume,
        ssh_keys=tuple(ssh_keys),
        networks_annotation=networks_annotation,
        extra_env=tuple(extra_env),
    )
    errors.raise_if_any()
    return spec


def in_reading_order(data: Any) -> Any:
    """A spec's keys in the order this module documents them (image and command first, each
    task's name first): the database keeps a spec as JSON whose key order it chooses, and a
    spec shown back to its author in that order reads scrambled. Anything else is left as is."""
    if not isinstance(data, dict):
        return data

    def ordered(item: dict[str, Any], known: tuple[str, ...]) -> dict[str, Any]:
        rank = {key: i for i, key in enumerate(known)}
        return dict(sorted(item.items(), key=lambda kv: rank.get(kv[0], len(known))))

    spec = ordered(data, SPEC_KEYS)
    if isinstance(spec.get("tasks"), list):
        spec["tasks"] = [
            ordered(task, TASK_KEYS) if isinstance(task, dict) else task for task in spec["tasks"]
        ]
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
            if not isinstance(value, dict):
                errors.add(key, "Give replicas per task, for example {worker: 4}.")
                continue
            names = [task["name"] for task in spec["tasks"]]
            for unknown in [name for name in value if name not in names]:
                errors.add(
                    f"{key}.{unknown}",
                    f"No task named '{unknown}'; this template's tasks are {', '.join(names)}.",
                )
            for task in spec["tasks"]:
                if task["name"] in value:
                    task["replicas"] = value[task["name"]]
        elif key == "workspace_gib":
            spec["volumes"]["workspace_gib"] = value
    errors.raise_if_any()
    return spec
