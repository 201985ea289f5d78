"""Small helpers shared by tests."""

import time

import pytest


def wait_for(predicate, timeout=15, interval=0.2, message="condition"):
    """Poll until predicate() is truthy; return its value or fail saying what was awaited."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)
