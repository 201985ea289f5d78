"""The SDK and CLI against the real portal over HTTP."""

import json
import os
import subprocess
import sys

import pytest
from gpuportal import Client, PortalError, VolcanoJob

from jobs.models import Endpoint, Job
from k8s_adapters.volcano import VCJOB_API
from tenants.models import Tenant
from tests.helpers import attach_log, cri, wait_for
from tests.jobs.conftest import job_pods
from tests.router import RouterClient, endpoint_slice

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_readme_snippet_creates_the_job_and_endpoints_that_answer_for_the_owner(
    served, team, token, cluster, router_port, upstream
):
    portal = served
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
            lambda n=name: cluster.get(
                "v1",
                "Service",
                Endpoint.objects.get(job__name="llama-sft-001", name=n).service_name,
                ns,
            ),
            message=f"the {name} Service",
        )

    from jobs.tasks import resync_jobs

    def running():
        resync_jobs()  # what beat does every few seconds; the pod runs on a KWOK node
        return client.get(job)["state"] == "running"

    wait_for(running, timeout=60, interval=1, message="the job running")
    assert client.wait(job, "running", timeout=5, interval=0.5)["state"] == "running"
    urls = client.endpoints(job)
    rows = {e.name: e for e in Endpoint.objects.filter(job__name="llama-sft-001")}
    assert urls == {
        name: f"http://{rows[name].host}:{router_port}/" for name in ("jupyter", "tensorboard")
    }
    for name in urls:  # the pods' app: the echo app behind each Service
        service = cluster.get("v1", "Service", rows[name].service_name, ns)
        cluster.apply_one(endpoint_slice(service, *upstream))
    router = RouterClient(router_port)
    auth = {"Authorization": f"Bearer {token}"}
    host = rows["jupyter"].host
    for row in rows.values():
        wait_for(lambda r=row: router.get(r.host, **auth).status_code == 200, message=row.host)
    seen = dict(router.get(host, **auth).json()["headers"])
    assert seen["X-Auth-Request-User"] == "bob"
    assert "Authorization" not in seen
    anonymous = router.get(rows["tensorboard"].host, Accept="text/html")
    assert anonymous.status_code == 302, anonymous.text
    assert anonymous.headers["Location"].startswith(f"{portal}/auth/endpoint/")
    assert [e["kind"] for e in client.events(job)][-1] == "queued"


def test_errors_carry_the_servers_field_errors(served, team, token):
    client = Client(served, token)
    bad = VolcanoJob(name="Bad Name", image="not an image", queue=team["tenant"].slug, gpu=500)
    with pytest.raises(PortalError) as caught:
        client.submit(bad)
    assert caught.value.status == 400
    assert set(caught.value.errors) >= {"name", "image", "tasks[0].gpus"}
    assert "registry/path/name:tag" in caught.value.errors["image"][0]["message"]


def cli(*args, config_home, env=None):
    env = {**os.environ, "XDG_CONFIG_HOME": str(config_home), **(env or {})}
    result = subprocess.run(
        [sys.executable, "-m", "gpuportal.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    return result


def test_the_cli_logs_in_submits_lists_extends_and_cancels(
    served, team, token, collector, tmp_path, cluster, router_port
):
    # The portal whole: web, worker, and the collector whose watch follows Volcano (a cancelled
    # job ends when Volcano's abort does).
    portal = served
    slug = team["tenant"].slug
    # SSH through a NodePort bypasses sign-in: a platform admin allowed it for this tenant.
    Tenant.objects.filter(pk=team["tenant"].pk).update(allow_direct_exposure=True)
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
    empty = cli("jobs", "list", config_home=tmp_path)  # a table with no rows is its header
    assert (empty.returncode, empty.stdout.split()) == (
        0,
        ["NAME", "STATE", "GPUS", "OWNER"] + ["QUEUE_POSITION"],
    )
    # A field the SDK does not model (copied from a portal spec) goes through as it is.
    (tmp_path / "job.yaml").write_text(
        "name: dev-box\nimage: quay.io/jupyter/pytorch-notebook:latest\ngpu: 1\n"
        "policies: [{event: PodEvicted, action: RestartJob}]\n"
        "command: start-notebook.py\nexpose:\n"
        "  - {name: jupyter, task: master, container_port: 8888, protocol: http}\n"
        "  - {name: ssh, task: master, container_port: 22, protocol: ssh}\n"
    )
    submitted = cli(
        "jobs", "submit", "-f", str(tmp_path / "job.yaml"), "-o", "json", config_home=tmp_path
    )
    assert submitted.returncode == 0, submitted.stderr
    assert json.loads(submitted.stdout)[0]["name"] == "dev-box"
    policies = Job.objects.get(name="dev-box").spec["policies"]
    assert policies == [{"event": "PodEvicted", "action": "RestartJob"}]
    listed = json.loads(cli("jobs", "list", "-o", "json", config_home=tmp_path).stdout)
    assert [j["name"] for j in listed] == ["dev-box"]
    wait_for(
        lambda: (
            "ssh" in cli("jobs", "status", "dev-box", "--endpoints", config_home=tmp_path).stdout
        ),
        message="the endpoints",
    )
    status = cli("jobs", "status", "dev-box", "--endpoints", config_home=tmp_path).stdout
    assert f"http://jupyter--dev-box--{slug}.endpoints.localhost:{router_port}/" in status
    ssh = wait_for(
        lambda: cli("ssh", "dev-box", "--print", config_home=tmp_path).stdout,
        message="the SSH NodePort",
    )
    ssh_service = Endpoint.objects.get(job__name="dev-box", name="ssh").service_name
    node_port = cluster.get("v1", "Service", ssh_service, team["tenant"].namespace)["spec"][
        "ports"
    ][0]["nodePort"]
    assert ssh.strip() == f"ssh -p {node_port} root@10.0.0.7"
    extended = cli("endpoints", "extend", "dev-box", "--hours", "4", config_home=tmp_path)
    assert extended.returncode == 0, extended.stderr
    assert "jupyter: expires" in extended.stdout
    # Its log, through the API server's pods/log from the file KWOK is told is the container's.
    job = Job.objects.get(name="dev-box")
    pod = wait_for(
        lambda: next(
            (p for p in job_pods(cluster, job) if p.get("status", {}).get("phase") == "Running"),
            None,
        ),
        timeout=60,
        message="the job's pod running",
    )
    log = tmp_path / "main.log"
    log.write_text(cri("[I 12:00:01] Jupyter Server is running", "[I 12:00:02] kernel started"))
    attach_log(cluster, pod, log)
    last = wait_for(
        lambda: cli("jobs", "logs", "dev-box", "--tail", "1", config_home=tmp_path).stdout or None,
        message="the pod's log",
    )
    assert last == "[I 12:00:02] kernel started\n"
    too_long = cli("endpoints", "extend", "dev-box", "--hours", "9999", config_home=tmp_path)
    assert too_long.returncode != 0
    assert "the tenant's maximum" in too_long.stderr
    cancelled = cli("jobs", "cancel", "dev-box", config_home=tmp_path)
    assert "dev-box: cancelling" in cancelled.stdout
    wait_for(
        lambda: (
            "closed: the job has ended"
            in cli("jobs", "status", "dev-box", "--endpoints", config_home=tmp_path).stdout
        ),
        timeout=60,
        message="the endpoints closed with the job",
    )
    refused = cli("endpoints", "extend", "dev-box", "--hours", "4", config_home=tmp_path)
    assert refused.returncode != 0
    assert "relaunch the job to open them again" in refused.stderr
    again = cli("jobs", "relaunch", "dev-box", "-o", "json", config_home=tmp_path)
    assert again.returncode == 0, again.stderr
    [relaunched] = json.loads(again.stdout)
    assert relaunched["name"].startswith("dev-box-")
    assert Job.objects.get(name=relaunched["name"]).spec["policies"] == policies
