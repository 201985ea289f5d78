"""LOG_FORMAT=json makes every log line one JSON object a log collector can index."""

import json
import os
import subprocess
import sys

from django.conf import settings

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
