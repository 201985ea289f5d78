"""The Helm chart, rendered by the pinned Helm built from source (hack/helm.sh)."""

import secrets
import subprocess
from pathlib import Path

import yaml

from tests.processes import LATE_BUILD_TIMEOUT, hurry_late_builds

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "chart" / "gpu-portal"
DRIVERS = ("traefik", "gateway-api", "ingress-nginx")


def helm_binary():
    """The pinned Helm, built once and cached by version (hack/test.sh builds it first)."""
    hurry_late_builds()
    out = subprocess.run(
        ["bash", str(ROOT / "hack" / "helm.sh"), "build"],
        check=True,
        capture_output=True,
        text=True,
        timeout=LATE_BUILD_TIMEOUT,
    )
    return out.stdout.strip().splitlines()[-1]


def required_values():
    """What an install must give (PostgreSQL and Redis are external); nothing real."""
    return {
        "secretKey": secrets.token_urlsafe(32),
        "database.url": "postgres://portal:pw@db.example.org:5432/portal",
        "redis.url": "redis://redis.example.org:6379/0",
    }


def helm(helm_path, *args, check=True):
    return subprocess.run(
        [helm_path, *args], capture_output=True, text=True, check=check, timeout=120
    )


def set_args(values):
    args = []
    for key, value in values.items():
        args += ["--set-string" if isinstance(value, str) else "--set", f"{key}={value}"]
    return args


def render(helm_path, release="portal", namespace="gpu-portal", **values):
    """The chart's manifests (hooks included) as dicts, for these --set values."""
    merged = {**required_values(), **values}
    out = helm(
        helm_path, "template", release, str(CHART), "--namespace", namespace, *set_args(merged)
    )
    return [doc for doc in yaml.safe_load_all(out.stdout) if doc]


def refused(helm_path, **values):
    """What `helm template` says refusing these --set values (it must refuse them)."""
    result = helm(
        helm_path,
        "template",
        "p",
        str(CHART),
        *set_args({**required_values(), **values}),
        check=False,
    )
    assert result.returncode != 0, "rendered"
    return result.stderr


def of_kind(manifests, kind):
    return [m for m in manifests if m["kind"] == kind]


def named(manifests, kind, suffix):
    [found] = [m for m in of_kind(manifests, kind) if m["metadata"]["name"].endswith(suffix)]
    return found
