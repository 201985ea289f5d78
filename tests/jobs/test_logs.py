"""Job logs and pod Events, read through the API server's `pods/log` from KWOK, which serves a
pod's log from the file a kwok.x-k8s.io Logs object names (CRI format, followed as it grows)."""

import json
import socket

import pytest
from rest_framework.test import APIClient

from jobs import services
from jobs.choices import JobState
from tests.helpers import attach_log, cri, wait_for
from tests.jobs.conftest import job_pods, settle, submitted

pytestmark = pytest.mark.django_db


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
    response = client.get(url)
    assert response.status_code == 200, response.content
    if response.streaming:
        return b"".join(response.streaming_content).decode()
    return response.content.decode()


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


def test_a_running_pods_log_is_followed_by_reading_on_from_each_answers_cursor(team, running):
    """Each read is a short answer: the last lines or those since the last read, with where it
    ended. No connection (and no web thread) is held while the pod runs."""
    job, pod, log = running
    bob = client_for(team["bob"])
    url = f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/{pod}/"
    wait_for(lambda: "epoch 2" in read_log(bob, url), timeout=20, message="the log served")
    first = bob.get(url, {"tail": "1000"})
    assert not first.streaming
    assert first.content.decode().splitlines() == ["epoch 1 loss 0.91", "epoch 2 loss 0.57"]
    assert first["X-Log-Open"] == "1"  # it runs: more may come
    cursor = first["X-Log-Cursor"]
    nothing = bob.get(url, {"after": cursor})
    assert (nothing.content, nothing["X-Log-Cursor"]) == (b"", cursor)
    # Two more writes: one in the very instant of the last line read (lines may share one).
    same_instant = log.read_text().splitlines()[-1].split(" ", 1)[0]
    with log.open("a") as more:
        more.write(f"{same_instant} stdout F epoch 2 checkpoint\n")
        more.write(cri("epoch 3 loss 0.40"))

    def read_on():
        answer = bob.get(url, {"after": cursor})
        return answer if answer.content else None

    answer = wait_for(read_on, timeout=20, message="the new lines")
    assert answer.content.decode().splitlines() == ["epoch 2 checkpoint", "epoch 3 loss 0.40"]
    again = bob.get(url, {"after": answer["X-Log-Cursor"]})
    assert again.content == b""  # none twice


def test_a_second_of_output_larger_than_a_read_is_skipped_once_and_reading_goes_on(
    team, running, settings
):
    """A container that writes more in one second than a read holds (a big tensor printed):
    the reads say lines were skipped, and go on to what comes after, never stuck on it."""
    job, pod, log = running
    settings.LOG_READ_LIMIT_BYTES = 150
    burst = "2026-12-06T10:00:01.000000000Z"
    log.write_text(
        "".join(f"{burst} stdout F burst line {n:02d}\n" for n in range(12))
        + "2026-12-06T10:00:05.000000000Z stdout F the late line\n"
    )
    bob = client_for(team["bob"])
    url = f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/{pod}/"
    first = wait_for(
        lambda: (a := bob.get(url, {"tail": "1000"})).content.startswith(b"burst") and a,
        timeout=20,
        message="the burst served",
    )
    assert first["X-Log-More"] == "1"  # cut at the read's size: more is there already
    shown, cursor = [first.content.decode()], first["X-Log-Cursor"]
    for _ in range(4):
        answer = bob.get(url, {"after": cursor})
        shown.append(answer.content.decode())
        cursor = answer["X-Log-Cursor"]
        if "the late line" in shown[-1]:
            break
    text = "".join(shown)
    assert "the late line" in text
    assert text.count("[lines skipped") == 1
    assert text.startswith("burst line 00\n")


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("tail=%C2%B2", "tail"),  # a superscript two: a digit to str.isdigit, not to int
        ("tail=" + "9" * 5000, "tail"),
        ("tail=-5", "tail"),
        ("tail=0", "tail"),
        ("tail=abc", "tail"),
        ("after=yesterday", "after"),
        ("after=2026-99-99T99:99:99Z/1", "after"),
        ("after=2026-12-06T10:00:01Z/1&tail=5", "tail"),
        ("follow=1", "follow"),
        ("download=yes", "download"),
    ],
)
def test_a_log_request_it_cannot_serve_says_what_to_send_instead(team, running, query, field):
    job, pod, _ = running
    slug = team["tenant"].slug
    bob = client_for(team["bob"])
    page = bob.get(f"/tenants/{slug}/jobs/{job.name}/logs/{pod}/?{query}")
    assert page.status_code == 400
    assert page.content.decode().startswith(f"{field}: ")
    api = f"/api/v1/tenants/{slug}/jobs/{job.name}/pods/{pod}/log/?{query}"
    for accept in ("application/json", "text/plain"):
        answer = bob.get(api, HTTP_ACCEPT=accept)
        assert answer.status_code == 400
        assert field in json.loads(answer.content)["errors"]


def test_an_api_client_asking_for_text_gets_the_log(team, running):
    job, pod, _ = running
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{job.name}/pods/{pod}/log/?tail=1"
    bob = client_for(team["bob"])
    answer = wait_for(
        lambda: (a := bob.get(url, HTTP_ACCEPT="text/plain")).content and a,
        timeout=20,
        message="the log served",
    )
    assert answer.status_code == 200
    assert answer.content.decode() == "epoch 2 loss 0.57\n"


def test_a_cluster_that_does_not_answer_is_a_503_saying_so(team, running, monkeypatch, tmp_path):
    from jobs import logs
    from k8s_adapters.client import Cluster

    job, pod, _ = running
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # a port nothing listens on (bound, never listening)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: 'http://127.0.0.1:{closed.getsockname()[1]}'}}}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    gone = Cluster.connect(kubeconfig)
    monkeypatch.setattr(logs, "get_cluster", lambda: gone)
    bob, slug = client_for(team["bob"]), team["tenant"].slug
    try:
        log = bob.get(f"/tenants/{slug}/jobs/{job.name}/logs/{pod}/")
        page = bob.get(f"/tenants/{slug}/jobs/{job.name}/logs/")
        listed = bob.get(f"/api/v1/tenants/{slug}/jobs/{job.name}/pods/")
    finally:
        closed.close()
    assert log.status_code == 503
    assert log.content.decode().startswith("The log could not be read: the cluster did not answer")
    assert page.status_code == 503
    assert 'data-testid="unanswered"' in page.content.decode()
    assert listed.status_code == 503
    assert listed.json()["detail"].startswith("The cluster did not answer; try again in a moment")


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
    assert "data-follow" in html  # the viewer follows a running pod


def test_a_pod_not_started_yet_is_followed_until_it_starts(
    cluster, team, django_capture_on_commit_callbacks
):
    """The page used to fill a Pending pod's pane with 'No log yet' and never read it, even
    once the pod ran: now it follows it, and each read says whether the container started."""
    spec = {
        "image": "python:3.12",
        "command": ["python", "train.py"],
        "tasks": [{"name": "main", "gpus": 1, "gpu_product": "NO-SUCH-GPU"}],
    }
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            team["tenant"], team["bob"], actor=team["bob"], spec_data=spec, name="waiting"
        )
    job = submitted(job)
    pods = wait_for(lambda: job_pods(cluster, job), timeout=60, message="the job's pod")
    name = pods[0]["metadata"]["name"]
    client = client_for(team["bob"])
    base = f"/tenants/{team['tenant'].slug}/jobs/waiting"
    page = client.get(f"{base}/logs/").content.decode()
    pane = page.split(f'data-testid="pod-{name}"', 1)[1].split("</pre>", 1)[0]
    assert "data-follow" in pane
    answer = client.get(f"{base}/logs/{name}/", {"tail": "1000"})
    assert (answer["X-Log-Started"], answer["X-Log-Open"]) == ("0", "1")
    assert answer.content.decode() == f"[{name} is Pending: no log yet]\n"


def test_a_started_pods_reads_say_it_started(team, running):
    job, pod, _ = running
    answer = client_for(team["bob"]).get(
        f"/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/{pod}/", {"tail": "10"}
    )
    assert answer["X-Log-Started"] == "1"
