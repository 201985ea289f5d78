"""The shared cache (Redis) that de-duplicates reconcile runs and holds short-lived reads."""

import threading

from django.core.cache import cache, caches


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
