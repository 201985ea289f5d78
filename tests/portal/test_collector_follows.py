"""Which changes of a Volcano job or a claim the collector turns into a reconcile at once (the
job resync reads the rest)."""

import uuid

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from jobs.choices import JobState
from jobs.models import Job
from portal.management.commands import collect_cluster
from tenants.constants import NAMESPACE_PREFIX
from tenants.models import Tenant


@pytest.fixture
def followed(monkeypatch):
    """The jobs the collector asks to reconcile, by name (what it writes at once is not
    looked at here)."""
    names = []
    monkeypatch.setattr(collect_cluster, "reconcile_job", lambda tenant, name: names.append(name))
    monkeypatch.setattr(collect_cluster, "observe_started", lambda *args: None)
    monkeypatch.setattr(collect_cluster, "observe_finished", lambda *args: None)
    return names


def job(phase, running=0, tenant="t", message=""):
    counts = {"pending": 0, "running": running, "succeeded": 0, "failed": 0}
    return {
        "tenant": tenant,
        "namespace": f"{NAMESPACE_PREFIX}{tenant}",
        "name": "train",
        "phase": phase,
        "counts": counts,
        "message": message,
    }


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


def test_a_job_a_list_found_is_reconciled_behind_the_changes_a_watch_heard(
    monkeypatch, transactional_db
):
    """At the collector's start a list finds every job, and each running one gets a run: those
    runs go behind a launch's, as a resync's do."""
    row = job_row(state=JobState.RUNNING)
    tenant = row.tenant
    sent = []
    monkeypatch.setattr(collect_cluster, "enqueue", lambda name, pk: sent.append(("change", pk)))
    monkeypatch.setattr(collect_cluster, "resync", lambda name, pks: sent.append(("list", *pks)))
    monkeypatch.setattr(collect_cluster, "listing", lambda: True)
    collect_cluster.reconcile_job(tenant.slug, "train")
    monkeypatch.setattr(collect_cluster, "listing", lambda: False)
    collect_cluster.reconcile_job(tenant.slug, "train")
    assert sent == [("list", row.pk), ("change", row.pk)]


def test_a_job_labelled_as_a_tenants_in_another_namespace_is_not_followed(followed):
    """Whoever may create a Volcano job somewhere could otherwise end a tenant's job of that
    name, or have it run again, by labelling theirs as the tenant's."""
    elsewhere = {**job("Running", 1), "namespace": "default"}
    collect_cluster.follow_job(job("Pending"), elsewhere)
    collect_cluster.follow_job(elsewhere, None)
    assert followed == []


def test_a_change_of_volcanos_message_alone_brings_no_run(followed):
    # The next run reads it; a running job's message must not cost a run each time it changes.
    collect_cluster.follow_job(job("Running", 1, message="a"), job("Running", 1, message="b"))
    assert followed == []


def test_a_start_the_collector_failed_to_write_is_still_reconciled(followed, monkeypatch):
    # The write is a shortcut: when it fails (the database went away a moment), the run that
    # writes the same and more must still come.
    def fails(*args):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(collect_cluster, "observe_started", fails)
    with pytest.raises(RuntimeError):
        collect_cluster.follow_job(job("Inqueue"), job("Running", 1))
    assert followed == ["train"]


@pytest.fixture
def runs(monkeypatch):
    """The jobs the collector asks to reconcile, by name, while writing what it writes."""
    names = []
    monkeypatch.setattr(collect_cluster, "reconcile_job", lambda tenant, name: names.append(name))
    return names


@pytest.fixture
def waiting(transactional_db, runs):
    """A job the portal submitted and that waits (committed: the collector's thread ends any
    transaction it finds open)."""
    return job_row(
        state=JobState.PENDING,
        phase="Inqueue",
        pending_reason="Waiting for GPUs.",
        submitted_at=timezone.now(),
    )


def job_row(**fields):
    """A job named train in a tenant of its own, as the portal saved it."""
    tenant = Tenant.objects.create(slug=f"follow-{uuid.uuid4().hex[:6]}", display_name="F")
    owner = get_user_model().objects.create(username=f"owner-{tenant.slug}")
    return Job.objects.create(
        tenant=tenant,
        owner=owner,
        name="train",
        spec={},
        gpus=1,
        queued_at=timezone.now(),
        **fields,
    )


def test_a_job_seen_starting_is_running_on_its_page_before_any_worker_runs(waiting, runs):
    slug = waiting.tenant.slug
    collect_cluster.follow_job(job("Inqueue", tenant=slug), job("Running", 1, tenant=slug))
    waiting.refresh_from_db()
    assert (waiting.state, waiting.phase, waiting.pending_reason) == ("running", "Running", "")
    assert waiting.counts["running"] == 1
    assert waiting.started_at is not None
    assert runs == []  # written: nothing is left for a run
    # Seen again (a relist): told once; the run comes, as the collector wrote nothing new.
    collect_cluster.follow_job(job("Inqueue", tenant=slug), job("Running", 1, tenant=slug))
    assert [e.message for e in waiting.events.filter(kind="state")] == ["pending → running"]
    assert runs == ["train"]


def test_a_job_cancelled_while_it_waited_is_left_to_the_run_that_aborts_it(waiting, runs):
    Job.objects.filter(pk=waiting.pk).update(cancel_requested=True)
    slug = waiting.tenant.slug
    collect_cluster.follow_job(job("Inqueue", tenant=slug), job("Running", 1, tenant=slug))
    waiting.refresh_from_db()
    assert (waiting.state, waiting.started_at) == ("pending", None)
    assert runs == ["train"]


@pytest.mark.parametrize(
    ("change", "new"),
    [
        ({"delete_requested": True}, job("Running", 1)),  # its deletion wins
        ({"state": JobState.QUEUED, "submitted_at": None}, job("Running", 1)),  # not its own
        ({}, job("Restarting", 1)),  # back after an eviction: the run notes it
        ({"delete_requested": True}, job("Completed")),
        ({"state": JobState.CANCELLED}, job("Failed")),  # ended already: told once
    ],
)
def test_the_collector_writes_nothing_but_a_job_starting_or_ending(waiting, runs, change, new):
    Job.objects.filter(pk=waiting.pk).update(**change)
    before = Job.objects.get(pk=waiting.pk)
    collect_cluster.follow_job(
        job("Inqueue", tenant=waiting.tenant.slug),
        {**new, "tenant": waiting.tenant.slug, "namespace": waiting.tenant.namespace},
    )
    after = Job.objects.get(pk=waiting.pk)
    assert (after.state, after.phase, after.started_at) == (
        before.state,
        before.phase,
        before.started_at,
    )
    assert runs == ["train"]  # a run reads and writes the change


@pytest.mark.parametrize(
    ("phase", "cancelled", "state"),
    [
        ("Completed", False, "succeeded"),
        ("Failed", False, "failed"),
        ("Aborted", True, "cancelled"),  # the abort the user asked for
    ],
)
def test_a_job_seen_ending_is_written_at_once_and_its_run_still_comes(
    waiting, runs, phase, cancelled, state
):
    """Volcano deletes a job with ttl_seconds_after_finished the moment it ends: its run may
    find nothing to read, and only the watch saw how it ended."""
    Job.objects.filter(pk=waiting.pk).update(
        state=JobState.RUNNING, phase="Running", cancel_requested=cancelled
    )
    slug = waiting.tenant.slug
    collect_cluster.follow_job(job("Running", 1, tenant=slug), job(phase, tenant=slug))
    waiting.refresh_from_db()
    assert (waiting.state, waiting.phase) == (state, phase)
    assert waiting.finished_at is not None
    assert runs == ["train"]  # to remove its routes
    collect_cluster.follow_job(None, job(phase, tenant=slug))  # seen again: a relist
    assert waiting.events.filter(kind="state").count() == 1


def claim(phase, tenant, job_name="train"):
    return {
        "tenant": tenant,
        "namespace": f"{NAMESPACE_PREFIX}{tenant}",
        "job": job_name,
        "phase": phase,
    }


@pytest.mark.parametrize(
    ("state", "phase", "followed"),
    [
        (JobState.PENDING, "", True),  # its run found the claim unbound and left it waiting
        (JobState.SUBMITTING, "", False),  # its first run still waits for the bind itself
        (JobState.QUEUED, "", False),  # its claim was made ahead: admission submits it
        (JobState.PENDING, "Inqueue", False),  # already submitted: Volcano's watch follows it
    ],
)
def test_a_claim_bound_brings_a_run_only_to_a_job_left_waiting_for_it(
    waiting, monkeypatch, state, phase, followed
):
    sent = []
    monkeypatch.setattr(collect_cluster, "enqueue", lambda name, pk: sent.append(pk))
    Job.objects.filter(pk=waiting.pk).update(state=state, phase=phase)
    slug = waiting.tenant.slug
    collect_cluster.follow_claim(claim("Pending", slug), claim("Bound", slug))
    assert sent == ([waiting.pk] if followed else [])
    collect_cluster.follow_claim(None, claim("Bound", slug))  # listed at start: its re-check
    collect_cluster.follow_claim(claim("Bound", slug), claim("Bound", slug))
    assert sent == ([waiting.pk] if followed else [])


def test_a_deleted_claim_of_the_portals_is_told_to_the_jobs_app(monkeypatch):
    """Whether it was a finished job's workspace (whose storage then counts no more) is the
    jobs app's to decide; claims of others and changes that are no deletion are not told."""
    told = []
    monkeypatch.setattr(collect_cluster, "workspace_deleted", lambda *args: told.append(args))
    monkeypatch.setattr(collect_cluster, "close_old_connections", lambda: None)
    claim = {"portal": True, "tenant": "t", "job": "train", "name": "train-workspace"}
    claim["namespace"] = f"{NAMESPACE_PREFIX}t"
    collect_cluster.follow_claim({**claim, "phase": "Bound"}, None)
    # Labelled as the tenant's, elsewhere: labels are anyone's to write.
    collect_cluster.follow_claim({**claim, "namespace": "default", "phase": "Bound"}, None)
    collect_cluster.follow_claim({**claim, "portal": False, "phase": "Bound"}, None)
    collect_cluster.follow_claim({**claim, "job": "", "phase": "Bound"}, None)
    collect_cluster.follow_claim({**claim, "phase": "Bound"}, {**claim, "phase": "Bound"})
    assert told == [("t", "train", "train-workspace")]


def quota(used, tenant="qt", name="gpu-portal"):
    return {
        "namespace": f"{NAMESPACE_PREFIX}{tenant}",
        "name": name,
        "tenant": tenant,
        "gpus": 8,
        "used": used,
    }


def test_a_tenants_usage_is_written_as_soon_as_its_quota_counts_again(transactional_db):
    """The tenant pages show GPUs in use from the tenant's row: a job starting shows there
    within the collector's watch, not at the tenant's next resync. Quotas not the portal's
    tenant quota change nothing."""
    tenant = Tenant.objects.create(slug="qt", display_name="Q")  # committed, as the thread needs
    running = {"requests.nvidia.com/gpu": "4", "requests.storage": "1Gi"}
    collect_cluster.follow_quota(quota({}), quota(running))
    tenant.refresh_from_db()
    assert tenant.gpus_in_use == "4"
    collect_cluster.follow_quota(quota(running), quota({"requests.nvidia.com/gpu": "8"}, "qt", "x"))
    collect_cluster.follow_quota(None, quota({"requests.nvidia.com/gpu": "8"}, "other"))
    tenant.refresh_from_db()
    assert tenant.observed_usage == running
    collect_cluster.follow_quota(quota(running), quota({"requests.nvidia.com/gpu": "0"}))
    tenant.refresh_from_db()
    assert tenant.gpus_in_use == "0"
