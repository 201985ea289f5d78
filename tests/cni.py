"""The test bed's CNI runner (hack/cni/runner.py): plays the container runtime and Multus for
pods bound to a node, calling the real Whereabouts and static IPAM plugins."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

from tests import processes
from tests.processes import ROOT


def cni_path() -> Path:
    """The plugins' directory, built (or reused from the cache) by hack/whereabouts.sh."""
    script = str(ROOT / "hack" / "whereabouts.sh")
    processes.hurry_late_builds()
    subprocess.run(["bash", script, "build"], check=True)
    out = subprocess.run(["bash", script, "cni-path"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


@contextlib.contextmanager
def runner(kubeconfig: str, state: Path, *, workers: int = 8, plugins: Path | None = None):
    """The runner, watching pods until the block ends; stopped whatever happened. `plugins`
    replaces the built plugins' directory."""
    if os.geteuid() != 0:
        raise AssertionError("the CNI runner creates a network namespace: run the tests as root")
    log = state / "runner.log"
    args = [
        sys.executable,
        str(ROOT / "hack" / "cni" / "runner.py"),
        "--kubeconfig",
        kubeconfig,
        "--cni-path",
        str(plugins or cni_path()),
        "--state-dir",
        str(state),
        "--workers",
        str(workers),
    ]
    with processes.running(
        args, log=log, ready=lambda: "runner ready" in log.read_text(), what="the CNI runner"
    ) as proc:
        yield proc
