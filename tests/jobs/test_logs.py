"""Job logs and pod Events, read through the API server's `pods/log` from KWOK, which serves a
pod's log from the file a kwok.x-k8s.io Logs object names (CRI format, followed as it grows)."""

import threading
import time
from datetime import UTC, datetime

import pytest
from rest_framework.test import APIClient

from jobs.choices import JobState
from tests.helpers import wait_for
from tests.jobs.conftest import job_pods, settle

pytestmark = pytest.mark.django_db


def cri(*lines):
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return "".join(f"{stamp} stdout F {line}\n" for line in lines)


def attach_log(cluster, pod, path):
    """Tell KWOK which file is this pod's container log."""
    cluster.apply_one(
        {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "Logs",
            "metadata": {
                "name": pod["metadata"]["name"],
                "namespace": pod["metadata"]["namespace"],
            },
            "spec": {"logs": [{"containers": ["main"], "logsFile": str(path), "follow": True}]},
        }
    )


def client_for(user):
    client = APIClient()
    client.force_login(user)
    return client


@pytest.fixture
def running(cluster, team, templates, launch, tmp_path):
    """bob's running job whose pod logs two lines of training output."""
    job = settle(launch(templates["single-gpu"], name="trainer"), JobState.RUNNING)
    [pod] = job_pods(cluster, job)
    log = tmp_path / "main.log"
    log.write_text(cri("epoch 1 loss 0.91", "epoch 2 loss 0.57"))
    attach_log(cluster, pod, log)
    return job, pod["metadata"]["name"], log


def read_log(client, url):
    return b"".join(client.get(url).streaming_content).decode()


def test_the_api_lists_the_pods_and_serves_their_logs(team, running):
    job, pod, _ = running
    base = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{job.name}"
    bob = client_for(team["bob"])
    [listed] = bob.get(f"{base}/pods/").json()
    assert (listed["name"], listed["task"], listed["index"], listed["phase"]) == (
        pod,
        "main",
        0,
        "Running",
    )
    assert listed["node"].startswith("kwok-")
    assert listed["containers"][0]["state"] == "running"

    def log_served():
        text = read_log(bob, f"{base}/pods/{pod}/log/")
        return text if "epoch 2" in text else None

    text = wait_for(log_served, timeout=20, message="the pod's log through the API server")
    assert text.splitlines() == ["epoch 1 loss 0.91", "epoch 2 loss 0.57"]
    assert read_log(bob, f"{base}/pods/{pod}/log/?tail=1").splitlines() == ["epoch 2 loss 0.57"]


def test_following_a_running_pod_streams_new_lines(team, running):
    job, pod, log = running
    url = f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/{pod}/?follow=1"
    wait_for(
        lambda: "epoch 2" in read_log(client_for(team["bob"]), url.replace("?follow=1", "")),
        timeout=20,
        message="the log served",
    )
    response = client_for(team["bob"]).get(url)
    seen = []
    chunks = iter(response.streaming_content)
    seen.append(next(chunks).decode())
    threading.Timer(1, lambda: log.open("a").write(cri("epoch 3 loss 0.40"))).start()
    deadline = time.monotonic() + 20
    while "epoch 3" not in "".join(seen) and time.monotonic() < deadline:
        seen.append(next(chunks).decode())
    response.close()
    assert "epoch 3 loss 0.40" in "".join(seen)


def test_a_download_is_an_attachment_named_after_job_and_pod(team, running):
    job, pod, _ = running
    url = f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/{pod}/?download=1"
    response = client_for(team["dave"]).get(url)  # viewers read logs too
    assert response["Content-Disposition"] == f'attachment; filename="{job.name}-{pod}.log"'
    assert response["Content-Type"].startswith("text/plain")


def test_outsiders_and_other_jobs_pods_get_404(team, running, launch, templates, cluster):
    job, pod, _ = running
    other = settle(launch(templates["jupyter-ssh"], name="other"), JobState.RUNNING)
    [theirs] = job_pods(cluster, other)
    slug = team["tenant"].slug
    charlie, bob = client_for(team["charlie"]), client_for(team["bob"])
    assert charlie.get(f"/tenants/{slug}/jobs/{job.name}/logs/").status_code == 404
    assert charlie.get(f"/api/v1/tenants/{slug}/jobs/{job.name}/pods/{pod}/log/").status_code == 404
    # A pod of another job is not reachable through this job's URL.
    name = theirs["metadata"]["name"]
    assert bob.get(f"/api/v1/tenants/{slug}/jobs/{job.name}/pods/{name}/log/").status_code == 404
    assert bob.get(f"/tenants/{slug}/jobs/{job.name}/logs/{pod}/?container=x").status_code == 404


def test_the_logs_page_shows_each_pod_with_its_node_and_events(team, running):
    job, pod, _ = running
    page = client_for(team["bob"]).get(f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/")
    html = page.content.decode()
    assert f'data-testid="pod-{pod}"' in html
    assert "main #0" in html
    assert "on kwok-" in html
    assert "follow=1" in html  # the viewer follows a running pod
