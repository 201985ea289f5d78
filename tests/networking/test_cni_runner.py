"""The test bed's CNI runner stops when told to, even with a plugin call that never ends: with
the API server already gone, Whereabouts waits for its lease until its own timeout, and a
runner waiting for it outlived `make run`'s stop."""

import json
import os
import signal
import time
import uuid

import pytest

from tests import cni
from tests.helpers import wait_for

NAD_API = "k8s.cni.cncf.io/v1"


@pytest.fixture
def namespace(cluster):
    name = f"cni-stop-{uuid.uuid4().hex[:6]}"
    cluster.apply_one({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    yield name
    cluster.delete("v1", "Namespace", name)


def test_a_stop_kills_a_plugin_call_that_never_ends_and_the_runner_exits(
    cluster, namespace, tmp_path
):
    plugins, mark = tmp_path / "plugins", tmp_path / "hung.pid"
    plugins.mkdir()
    hang = plugins / "hang"
    hang.write_text(f"#!/bin/sh\necho $$ > {mark}\nexec sleep 600\n")
    hang.chmod(0o755)
    config = {"cniVersion": "0.3.1", "name": "hang", "type": "macvlan", "ipam": {"type": "hang"}}
    cluster.apply_one(
        {
            "apiVersion": NAD_API,
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "hang", "namespace": namespace},
            "spec": {"config": json.dumps(config)},
        }
    )
    state = tmp_path / "state"
    state.mkdir()
    try:
        took, plugin = stop_while_hung(cluster, namespace, state, plugins, mark)
    finally:  # a runner killed after all leaves its plugin: stop what this test started
        if mark.exists() and os.path.exists(f"/proc/{mark.read_text().strip()}"):
            os.kill(int(mark.read_text()), signal.SIGKILL)
    assert took < 20, f"the runner took {took:.1f}s to stop"
    assert not os.path.exists(f"/proc/{plugin}"), "the hung plugin outlived the runner"
    assert "killed" in (state / "runner.log").read_text()


def stop_while_hung(cluster, namespace, state, plugins, mark):
    """Seconds from SIGTERM until the runner exited, and the hung plugin's pid."""
    from django.conf import settings

    with cni.runner(settings.KUBECONFIG, state, plugins=plugins) as runner:
        cluster.apply_one(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": "p",
                    "namespace": namespace,
                    "annotations": {"k8s.v1.cni.cncf.io/networks": "hang"},
                },
                "spec": {
                    "nodeName": "nowhere",  # bound: the runner sets up its networks
                    "containers": [{"name": "c", "image": "registry.local/none:1"}],
                },
            }
        )
        plugin = int(wait_for(lambda: mark.exists() and mark.read_text().strip(), timeout=60))
        asked = time.monotonic()
        runner.send_signal(signal.SIGTERM)
        runner.wait(30)  # raises if it does not exit
        return time.monotonic() - asked, plugin
