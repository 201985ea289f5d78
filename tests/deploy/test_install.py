"""`helm install` and `helm uninstall` against the API server: the migration Job and its copy of
the settings come first (pre-install hooks), and nothing else is created until the migrations
finished; the copies go once it succeeded, and an uninstall leaves no settings behind.
The test plays the Job controller (there is none in the local control plane)."""

import os
import subprocess
import uuid
from datetime import UTC, datetime

import pytest
from django.conf import settings

from tests.helpers import wait_for

from .chart import CHART, required_values, set_args

pytestmark = pytest.mark.timeout(300)


def _helm(helm_path, *args):
    env = {**os.environ, "KUBECONFIG": settings.KUBECONFIG}
    return subprocess.Popen(
        [helm_path, *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _finish(cluster, name, namespace):
    """What the Job controller would write once the migration pod succeeded."""
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [
        {"type": kind, "status": "True", "lastProbeTime": now, "lastTransitionTime": now}
        for kind in ("SuccessCriteriaMet", "Complete")
    ]
    cluster.apply_status(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "status": {
                "startTime": now,
                "completionTime": now,
                "succeeded": 1,
                "ready": 0,
                "terminating": 0,
                "uncountedTerminatedPods": {},
                "conditions": conditions,
            },
        }
    )


def test_install_runs_migrations_before_anything_else_and_uninstall_cleans_up(
    helm_path, cluster, namespace
):
    release = f"install-{uuid.uuid4().hex[:6]}"  # ClusterRoles are named after it
    name = f"{release}-gpu-portal"
    install = _helm(
        helm_path,
        "install",
        release,
        str(CHART),
        "--namespace",
        namespace,
        "--timeout",
        "120s",
        *set_args({**required_values(), "volcano.namespace": namespace}),
    )
    try:
        wait_for(
            lambda: cluster.get("batch/v1", "Job", f"{name}-migrate", namespace),
            timeout=60,
            message="the migration hook Job",
        )
        assert cluster.get("v1", "ConfigMap", f"{name}-migrate-config", namespace)
        assert cluster.get("v1", "Secret", f"{name}-migrate-secret", namespace)
        assert cluster.get("apps/v1", "Deployment", f"{name}-web", namespace) is None
        _finish(cluster, f"{name}-migrate", namespace)
        output, _ = install.communicate(timeout=120)
    finally:
        install.kill()
    assert install.returncode == 0, output
    for component in ("web", "worker", "beat", "collector"):
        assert cluster.get("apps/v1", "Deployment", f"{name}-{component}", namespace)
    assert cluster.get("rbac.authorization.k8s.io/v1", "ClusterRole", f"{name}-{namespace}-worker")
    wait_for(
        lambda: cluster.get("batch/v1", "Job", f"{name}-migrate", namespace) is None,
        message="the succeeded hook Job to be deleted",
    )
    assert cluster.get("v1", "Secret", f"{name}-migrate-secret", namespace) is None
    assert cluster.get("v1", "Secret", f"{name}-secret", namespace)
    uninstall = _helm(helm_path, "uninstall", release, "--namespace", namespace)
    output, _ = uninstall.communicate(timeout=120)
    assert uninstall.returncode == 0, output
    assert cluster.get("apps/v1", "Deployment", f"{name}-web", namespace) is None
    for kind, left in (("ConfigMap", "config"), ("Secret", "secret")):  # no copy left either
        for copy in (left, f"migrate-{left}"):
            assert cluster.get("v1", kind, f"{name}-{copy}", namespace) is None, copy
    shared = f"{name}-{namespace}-worker"
    assert cluster.get("rbac.authorization.k8s.io/v1", "ClusterRole", shared) is None
    policy = ("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", shared)
    assert cluster.get(*policy) is None
