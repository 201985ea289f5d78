"""The CLI says what went wrong in one line, never with a traceback: a portal it cannot reach,
an answer that is not the portal's API, and files or flags it cannot use."""

import http.server
import json
import socket
import threading

import pytest
from gpuportal import Client, JobEnded, PortalError, VolcanoJob

from tests.sdk.test_sdk import cli


@pytest.fixture
def closed_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once it is closed


@pytest.fixture
def sign_in_page():
    """A loopback server answering every request with an HTML page, as an SSO proxy in front
    of a wrong URL would."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the stdlib's name)
            body = b"<html><body>Sign in</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def one_line_error(result, *fragments):
    assert result.returncode != 0
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def logged_in(home, url):
    (home / "gpuportal").mkdir(parents=True, exist_ok=True)
    (home / "gpuportal" / "config.json").write_text(
        json.dumps({"url": url, "token": "gpp_x", "tenant": "vision", "ssh_host": ""})
    )


def test_a_portal_that_does_not_answer_is_said_so(tmp_path, closed_port):
    url = f"http://127.0.0.1:{closed_port}"
    result = cli("login", url, "--token", "gpp_x", config_home=tmp_path)
    one_line_error(result, "cannot reach the portal")
    assert not (tmp_path / "gpuportal" / "config.json").exists()


def test_a_page_that_is_not_the_api_is_said_so(tmp_path, sign_in_page):
    result = cli("login", sign_in_page, "--token", "gpp_x", config_home=tmp_path)
    one_line_error(result, "is not the portal's API", "sign-in page")


def test_the_token_can_come_from_the_environment(tmp_path, sign_in_page, monkeypatch):
    # Not on the command line, where `ps` and the shell's history show it.
    monkeypatch.setenv("GPUPORTAL_TOKEN", "gpp_from_env")
    result = cli("login", sign_in_page, config_home=tmp_path)
    one_line_error(result, "is not the portal's API")  # it got as far as asking


@pytest.mark.parametrize(
    ("content", "said"),
    [
        ("- just\n- a list\n", "holds no job"),
        ("name: a\nimage: i\ntasks: [main]\n", "a task is written as a mapping"),
        (
            "name: a\nimage: i\nexpose: [{name: web, task: main, port: 80}]\n",
            "an exposed port has no field port",
        ),
        ("name: a\nimage: i\ncommand: [unclosed\n", "cannot read"),
        ('name: a\nimage: i\ncommand: "python -c \'x"\n', "command: No closing quotation"),
        ("name: a\nimage: i\ncommand: [python, 3]\n", "command is a line of text"),
        ("name: a\nimage: i\nenv: [A=1]\n", "env is a mapping (NAME: value), not list"),
        ("name: a\nimage: i\nplugins: svc\n", "plugins is a list of names"),
    ],
)
def test_a_job_file_it_cannot_use_is_said_so(tmp_path, closed_port, content, said):
    logged_in(tmp_path, f"http://127.0.0.1:{closed_port}")
    (tmp_path / "job.yaml").write_text(content)
    one_line_error(
        cli("jobs", "submit", "-f", str(tmp_path / "job.yaml"), config_home=tmp_path), said
    )


def test_a_job_file_for_another_tenant_than_the_flag_is_refused(tmp_path, closed_port):
    logged_in(tmp_path, f"http://127.0.0.1:{closed_port}")
    (tmp_path / "job.yaml").write_text("name: a\nimage: i\nqueue: audio\n")
    result = cli(
        "jobs",
        "submit",
        "-f",
        str(tmp_path / "job.yaml"),
        "--tenant",
        "vision",
        config_home=tmp_path,
    )
    one_line_error(result, "says queue audio, --tenant says vision")


@pytest.mark.parametrize("replicas", ["worker", "worker=x", "=4", "worker=²"])
def test_replicas_that_are_not_task_equals_count_are_said_so(tmp_path, closed_port, replicas):
    logged_in(tmp_path, f"http://127.0.0.1:{closed_port}")
    result = cli("jobs", "launch", "ddp", "--replicas", replicas, config_home=tmp_path)
    one_line_error(result, "--replicas takes TASK=N")


@pytest.mark.parametrize("config", ["{not json", '{"url": "http://127.0.0.1:1"}', "[]"])
def test_settings_it_cannot_use_are_said_so_without_a_token_on_the_command_line(tmp_path, config):
    (tmp_path / "gpuportal").mkdir()
    (tmp_path / "gpuportal" / "config.json").write_text(config)
    result = cli("jobs", "list", config_home=tmp_path)
    one_line_error(result, "cannot be used", "gpuportal login URL` (it asks for the token")
    assert "--token" not in result.stderr


def test_a_launch_the_portal_did_not_answer_in_time_may_have_been_done(tmp_path):
    """The launch was sent: a second one would start a second GPU job."""
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()  # accepts, never answers
        logged_in(tmp_path, f"http://127.0.0.1:{listening.getsockname()[1]}")
        result = cli("jobs", "launch", "ddp", config_home=tmp_path, env={"GPUPORTAL_TIMEOUT": "1"})
    one_line_error(result, "did not answer in time", "may still have been done")


def polled(client, monkeypatch, *states):
    answers = iter({"name": "j", "state": s, "message": "exit 3" * (s == "failed")} for s in states)
    monkeypatch.setattr(client, "get", lambda job, queue=None: next(answers))


def test_waiting_for_running_returns_a_job_that_ran_and_succeeded_between_two_polls(monkeypatch):
    client = Client("http://127.0.0.1:1", "gpp_x")
    polled(client, monkeypatch, "pending", "succeeded")
    assert client.wait("j", "running", queue="t", interval=0)["state"] == "succeeded"


def test_waiting_goes_on_through_error_and_says_how_the_job_ended(monkeypatch):
    """A job in error is retried by the portal (and holds its GPUs): not the end."""
    client = Client("http://127.0.0.1:1", "gpp_x")
    polled(client, monkeypatch, "error", "pending", "failed")
    with pytest.raises(JobEnded, match="j ended failed before it was running: exit 3"):
        client.wait("j", "running", queue="t", interval=0)


def test_a_job_file_names_its_data_volume_beside_the_spec(monkeypatch):
    job = VolcanoJob.from_dict({"name": "a", "image": "i", "queue": "t", "data_volume": "corpus"})
    client, sent = Client("http://127.0.0.1:1", "gpp_x"), {}
    monkeypatch.setattr(client, "_call", lambda method, path, json: sent.update(json))
    client.submit(job)
    assert sent["data_volume"] == "corpus"
    assert "data_volume" not in sent["spec"]


def test_a_job_files_volumes_keep_its_workspace_size():
    """`volumes` beside `workspace_gib` replaced the whole mapping: the workspace silently got
    the server's default size."""
    job = VolcanoJob.from_dict(
        {
            "name": "a",
            "image": "i",
            "queue": "t",
            "workspace_gib": 200,
            "volumes": {"storage_class": "fast"},
        }
    )
    assert job.spec()["volumes"] == {"workspace_gib": 200, "storage_class": "fast"}


class Answer:
    def __init__(self, text, **headers):
        self.text, self.headers = text, {f"X-Log-{k}": v for k, v in headers.items()}


def test_following_a_log_says_a_wait_once_reads_on_from_each_cursor_and_stops_with_the_pod(
    monkeypatch,
):
    client = Client("http://127.0.0.1:1", "gpp_x")
    answers = iter(
        [
            Answer("[p-0 is Pending: no log yet]\n", Open="1", Started="0"),
            Answer("[p-0 is Pending: no log yet]\n", Open="1", Started="0"),
            Answer("step 1\n", Open="1", Started="1", Cursor="c1", More="1"),
            Answer("step 2\n", Open="1", Started="1", Cursor="c2", More="0"),
            Answer("", Open="1", Started="1", Cursor="c2", More="0"),
            Answer("done\n", Open="0", Started="1", Cursor="c3", More="0"),
        ]
    )
    asked = []

    def send(method, path, params):
        asked.append(dict(params))
        return next(answers)

    monkeypatch.setattr(client, "_send", send)
    monkeypatch.setattr("gpuportal.client.time.sleep", lambda seconds: asked.append("pause"))
    pieces = list(client.follow_log("j", "p-0", "t", tail=10))
    assert pieces == ["[p-0 is Pending: no log yet]\n", "step 1\n", "step 2\n", "done\n"]
    assert asked == [
        *[{"tail": 10}, "pause"] * 2,
        {"tail": 10},  # more is there already: read on at once
        {"after": "c1"},
        "pause",
        {"after": "c2"},
        "pause",
        {"after": "c2"},
    ]


def test_following_a_log_never_reads_again_at_once_without_getting_further(monkeypatch):
    """A read cut at its size with no complete line has no cursor to read on from: reading the
    same again at once would spin."""
    client = Client("http://127.0.0.1:1", "gpp_x")
    answers = iter([Answer("", Open="1", Started="1", More="1"), Answer("", Open="0")])
    asked = []
    monkeypatch.setattr(client, "_send", lambda method, path, params: answers.__next__())
    monkeypatch.setattr("gpuportal.client.time.sleep", lambda seconds: asked.append("pause"))
    assert list(client.follow_log("j", "p-0", "t")) == []
    assert asked == ["pause"]


def test_following_the_log_of_a_pod_that_goes_ends_with_it(monkeypatch):
    client = Client("http://127.0.0.1:1", "gpp_x")

    def send(method, path, params):
        if "after" in params:
            raise PortalError(404, "No such pod.")
        return Answer("last words\n", Open="1", Started="1", Cursor="c1", More="0")

    monkeypatch.setattr(client, "_send", send)
    monkeypatch.setattr("gpuportal.client.time.sleep", lambda seconds: None)
    assert list(client.follow_log("j", "p-0", "t")) == ["last words\n"]


def test_ssh_into_a_port_on_the_pod_ip_says_it_is_reachable_only_inside_the_cluster():
    from gpuportal.cli import ssh_command, why_no_ssh

    job = {
        "endpoints": [
            {
                "name": "ssh",
                "protocol": "ssh",
                "mode": "podip",
                "container_port": 22,
                "url": "ssh://ssh--dev--t.tenant-t.svc:22",
                "observed": {},
            }
        ]
    }
    assert ssh_command(job, "") is None
    said = why_no_ssh(job, "")
    assert "reachable only from inside the cluster (ssh://ssh--dev--t.tenant-t.svc:22)" in said
    assert "mode nodeport" in said
