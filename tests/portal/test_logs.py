"""LOG_FORMAT=json makes every log line one JSON object a log collector can index."""

import json
import os
import subprocess
import sys

import pytest
from django.conf import settings

from jobs import template_views
from tests.tenants.conftest import make_user

CODE = (
    "import logging\n"
    "logging.getLogger('jobs.tasks').warning('job %s is late', 'train-1')\n"
    "try:\n"
    "    1 / 0\n"
    "except ZeroDivisionError:\n"
    "    logging.getLogger('core.reconcile').exception('reconcile crashed')\n"
)


def _log_lines(log_format):
    env = {**os.environ, "LOG_FORMAT": log_format, "KUBECONFIG": settings.KUBECONFIG}
    result = subprocess.run(
        [sys.executable, "manage.py", "shell", "-c", CODE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stderr.strip().splitlines()


def test_json_logs_are_one_object_a_line_with_level_logger_and_exception():
    lines = _log_lines("json")
    entries = [json.loads(line) for line in lines]
    assert [(e["level"], e["logger"], e["message"]) for e in entries] == [
        ("WARNING", "jobs.tasks", "job train-1 is late"),
        ("ERROR", "core.reconcile", "reconcile crashed"),
    ]
    assert "ZeroDivisionError" in entries[1]["exception"]
    assert entries[0]["time"].endswith("+00:00")


def test_text_logs_stay_readable_lines():
    lines = _log_lines("text")
    assert lines[0].endswith("WARNING jobs.tasks: job train-1 is late")


@pytest.mark.django_db
def test_a_crash_answers_the_portals_own_page_and_logs_the_traceback(
    client, monkeypatch, caplog, settings
):
    """As deployed (DEBUG off): the user reads what to do, never Django's technical page, and
    the log keeps the traceback."""
    settings.DEBUG = False

    class Broken:
        class objects:  # noqa: N801  (stands where the model's manager is read)
            @staticmethod
            def for_user(user):
                raise RuntimeError("the database said no")

    monkeypatch.setattr(template_views, "JobTemplate", Broken)
    client.raise_request_exception = False
    client.force_login(make_user("crashy"))
    answer = client.get("/templates/")
    assert answer.status_code == 500
    page = answer.content.decode()
    assert "Something went wrong" in page
    assert "tell a platform admin the time it happened" in page
    assert "RuntimeError" not in page
    assert "Traceback" not in page
    crash = [r for r in caplog.records if r.levelname == "ERROR" and r.name == "django.request"]
    assert crash
    assert crash[0].exc_info[0] is RuntimeError
