"""The CLI says what went wrong in one line, never with a traceback: a portal it cannot reach,
an answer that is not the portal's API, and files or flags it cannot use."""

import http.server
import json
import socket
import threading

import pytest

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
