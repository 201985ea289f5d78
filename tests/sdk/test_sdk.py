"""The SDK and CLI against the real portal over HTTP."""

import json
import os
import subprocess
import sys

import pytest
import requests
from gpuportal import Client, PortalError, VolcanoJob

from k8s_adapters.volcano import VCJOB_API
from tests.helpers import wait_for
from tests.jobs.conftest import set_phase

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_readme_snippet_creates_the_job_and_endpoints_that_answer_for_the_owner(
    served, team, token, cluster
):
    portal, _ = served
    client = Client(portal, token)
    job = VolcanoJob(
        name="llama-sft-001",
        image="registry.local/train/llama:latest",
        queue=team["tenant"].slug,
        gpu=8,
        command="python train.py",
        expose=[
            {"name": "jupyter", "task": "master", "container_port": 8888, "protocol": "http"},
            {"name": "tensorboard", "task": "master", "container_port": 6006, "protocol": "http"},
        ],
    )
    created = client.submit(job)
    assert (created["name"], created["gpus"]) == ("llama-sft-001", 8)
    ns = team["tenant"].namespace
    wait_for(lambda: cluster.get(VCJOB_API, "Job", "llama-sft-001", ns), message="the Volcano job")
    for name in ("jupyter", "tensorboard"):
        wait_for(
            lambda n=name: cluster.get("v1", "Service", f"llama-sft-001-{n}", ns),
            message=f"the {name} Service",
        )

    from jobs.models import Job

    set_phase(cluster, Job.objects.get(name="llama-sft-001"), "Running", running=1)
    from jobs.tasks import resync_jobs

    resync_jobs()
    assert client.wait(job, "running", timeout=30, interval=0.5)["state"] == "running"
    urls = client.endpoints(job)
    slug = team["tenant"].slug
    assert urls == {
        "jupyter": f"{portal}/jobs/{slug}/llama-sft-001/jupyter/",
        "tensorboard": f"{portal}/jobs/{slug}/llama-sft-001/tensorboard/",
    }
    with_token = requests.get(
        urls["jupyter"], headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert (with_token.status_code, with_token.text) == (200, "user=bob\n")
    anonymous = requests.get(urls["tensorboard"], allow_redirects=False, timeout=10)
    assert anonymous.status_code == 302
    assert [e["kind"] for e in client.events(job)][-1] == "queued"


def test_errors_carry_the_servers_field_errors(served, team, token):
    client = Client(served[0], token)
    bad = VolcanoJob(name="Bad Name", image="not an image", queue=team["tenant"].slug, gpu=500)
    with pytest.raises(PortalError) as caught:
        client.submit(bad)
    assert caught.value.status == 400
    assert set(caught.value.errors) >= {"name", "image", "tasks[0].gpus"}
    assert "registry/path/name:tag" in caught.value.errors["image"][0]["message"]


def cli(*args, config_home):
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home)}
    result = subprocess.run(
        [sys.executable, "-m", "gpuportal.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result


def test_the_cli_logs_in_submits_lists_extends_and_cancels(served, team, token, tmp_path, cluster):
    portal, _ = served
    slug = team["tenant"].slug
    assert (
        cli(
            "login",
            portal,
            "--token",
            token,
            "--tenant",
            slug,
            "--ssh-host",
            "10.0.0.7",
            config_home=tmp_path,
        ).returncode
        == 0
    )
    assert oct((tmp_path / "gpuportal" / "config.json").stat().st_mode)[-3:] == "600"
    (tmp_path / "job.yaml").write_text(
        "name: dev-box\nimage: quay.io/jupyter/pytorch-notebook:latest\ngpu: 1\n"
        "command: start-notebook.py\nexpose:\n"
        "  - {name: jupyter, task: master, container_port: 8888, protocol: http}\n"
        "  - {name: ssh, task: master, container_port: 22, protocol: ssh}\n"
    )
    submitted = cli(
        "jobs", "submit", "-f", str(tmp_path / "job.yaml"), "-o", "json", config_home=tmp_path
    )
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)[0]["name"] == "dev-box"
    listed = json.loads(cli("jobs", "list", "-o", "json", config_home=tmp_path).stdout)
    assert [j["name"] for j in listed] == ["dev-box"]
    wait_for(
        lambda: (
            "ssh" in cli("jobs", "status", "dev-box", "--endpoints", config_home=tmp_path).stdout
        ),
        message="the endpoints",
    )
    status = cli("jobs", "status", "dev-box", "--endpoints", config_home=tmp_path).stdout
    assert f"{portal}/jobs/{slug}/dev-box/jupyter/" in status
    ssh = wait_for(
        lambda: cli("ssh", "dev-box", "--print", config_home=tmp_path).stdout,
        message="the SSH NodePort",
    )
    node_port = cluster.get("v1", "Service", "dev-box-ssh", team["tenant"].namespace)["spec"][
        "ports"
    ][0]["nodePort"]
    assert ssh.strip() == f"ssh -p {node_port} root@10.0.0.7"
    extended = cli("endpoints", "extend", "dev-box", "--hours", "4", config_home=tmp_path)
    assert extended.returncode == 0, extended.stderr
    assert "jupyter: expires" in extended.stdout
    too_long = cli("endpoints", "extend", "dev-box", "--hours", "9999", config_home=tmp_path)
    assert too_long.returncode != 0
    assert "the tenant's maximum" in too_long.stderr
    cancelled = cli("jobs", "cancel", "dev-box", config_home=tmp_path)
    assert "dev-box: cancelling" in cancelled.stdout
