"""The CLI says what went wrong in one line, never with a traceback: a portal it cannot reach,
an answer that is not the portal's API, and files or flags it cannot use."""

import http.server
import json
import socket
import threading

import pytest
from gpuportal import Client, JobEnded, VolcanoJob

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
