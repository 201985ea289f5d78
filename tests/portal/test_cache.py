"""The shared cache (Redis) that de-duplicates reconcile runs and holds short-lived reads."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from django.core.cache import cache, caches

ROOT = Path(__file__).resolve().parents[2]


def test_the_cache_reuses_one_redis_client_for_every_operation():
    client = cache._cache.get_client(write=True)
    assert cache._cache.get_client() is client


def test_the_cache_keeps_its_meaning_for_the_reconcile_marks():
    # add is "only if absent", which the de-duplication of reconcile runs stands on.
    cache.delete_many(["mark-a", "mark-b"])
    assert cache.add("mark-a", 1, timeout=30)
    assert not cache.add("mark-a", 2, timeout=30)
    cache.set("mark-b", {"x": 1}, timeout=30)
    assert cache.get_many(["mark-a", "mark-b", "mark-c"]) == {"mark-a": 1, "mark-b": {"x": 1}}
    assert cache.delete("mark-a")
    assert not cache.delete("mark-a")
    cache.delete_many(["mark-b"])
    assert cache.get("mark-b") is None


def test_threads_sharing_one_client_each_read_their_own_keys():
    # Django gives each thread its own cache object; one shared on purpose shares its client.
    shared = caches.create_connection("default")
    errors = []

    def work(n):
        try:
            for i in range(200):
                shared.set(f"thread-{n}", i, timeout=30)
                assert shared.get(f"thread-{n}") == i
        except Exception as exc:  # reported below: a failure in a thread fails the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def _redis_url_of(preamble):
    """The Redis URL a process of the portal configures itself with, given no REDIS_URL."""
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    code = (
        f"{preamble}import django, os; os.environ['DJANGO_SETTINGS_MODULE'] = 'portal.settings'; "
        "django.setup(); from django.conf import settings; print(settings.REDIS_URL)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout.strip()


def test_a_plain_pytest_leaves_the_database_of_make_run_alone():
    """The tests empty their Redis database at start: without REDIS_URL set (a plain `pytest`
    beside `make run`) it is not the one the portal's own processes use."""
    if "REDIS_URL" in dotenv_keys():
        pytest.fail(".env sets REDIS_URL: this test reads the defaults")
    assert _redis_url_of("") == "redis://127.0.0.1:63790/0"
    assert _redis_url_of("import pytest; ") == "redis://127.0.0.1:63790/1"


def dotenv_keys():
    env_file = ROOT / ".env"
    if not env_file.exists():
        return set()
    return {line.split("=", 1)[0].strip() for line in env_file.read_text().splitlines()}
