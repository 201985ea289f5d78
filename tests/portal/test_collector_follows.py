"""Which changes of a Volcano job or a claim the collector turns into a reconcile at once (the
job resync reads the rest)."""

import pytest

from portal.management.commands import collect_cluster


@pytest.fixture
def followed(monkeypatch):
    """The jobs the collector asks to reconcile, by name."""
    names = []
    monkeypatch.setattr(collect_cluster, "reconcile_job", lambda tenant, name: names.append(name))
    return names


def job(phase, running=0):
    counts = {"pending": 0, "running": running, "succeeded": 0, "failed": 0}
    return {"tenant": "t", "name": "train", "phase": phase, "counts": counts}


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (None, job("")),  # just created: the run that created it saw it
        (job(""), job("Pending")),
        (job("Pending"), job("Inqueue")),
        (job("Inqueue"), job("Pending")),  # back from Inqueue: it still waits
        (job("Pending", 0), job("Pending", 1)),  # pods being created
        (None, job("Pending")),  # listed at start while waiting: the resync reads it
    ],
)
def test_a_job_that_only_moves_between_waiting_phases_is_left_to_the_resync(followed, old, new):
    collect_cluster.follow_job(old, new)
    assert followed == []


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (job("Pending"), job("Running", 1)),
        (job("Inqueue"), job("Running", 1)),
        (job("Running", 1), job("Pending")),  # evicted: the page says so at once
        (job("Running", 1), job("Running", 2)),
        (job("Running", 1), job("Completed")),
        (job("Running", 1), None),  # deleted outside the portal
        (None, job("Running", 1)),
    ],
)
def test_a_job_that_starts_changes_or_ends_is_reconciled_at_once(followed, old, new):
    collect_cluster.follow_job(old, new)
    assert followed == ["train"]
