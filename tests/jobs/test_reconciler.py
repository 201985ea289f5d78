"""The one reconciler shape, through real workers: a cluster that does not answer is recorded as
`retrying` beside the object's own state, and the next run against a live cluster converges."""

import json
import os
import socket
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import pytest
import time_machine
from django.core.cache import cache
from django.utils import timezone

from accounts.models import SSHKey
from core.models import SyncState
from core.reconcile import BACKGROUND, Requeue, enqueue, exclusive, nothing_waiting, resync, send
from jobs import services
from jobs.choices import JobState
from jobs.models import Job, JobEvent
from jobs.tasks import reconcile_job
from k8s_adapters.names import ssh_keys_secret
from k8s_adapters.volcano import VCJOB_API, build_job
from k8s_adapters.waiting import wait_bound
from portal.celery import app as celery_app
from tests.conftest import ROOT, worker_process
from tests.helpers import wait_for
from tests.jobs.conftest import settle

ED25519 = (
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl bob@laptop"
)


def dead_kubeconfig(path):
    """A kubeconfig naming a loopback port where nothing listens: every request is refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dead",
                "cluster": {
                    "server": f"https://127.0.0.1:{port}",
                    "insecure-skip-tls-verify": True,
                },
            }
        ],
        "users": [{"name": "nobody", "user": {"token": "none"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "dead", "user": "nobody"}}],
        "current-context": "dead",
    }
    path.write_text(json.dumps(config))  # JSON is YAML
    return path


def test_an_unreachable_cluster_leaves_the_job_running_and_says_it_retries(
    cluster, team, templates, session_worker, queued_tasks, tmp_path, settings
):
    settings.RECONCILE_DEDUP_SECONDS = 1
    session_worker.stop()  # only the workers of this test take these tasks
    job, _ = services.launch_job(
        team["tenant"],
        team["bob"],
        actor=team["bob"],
        template_version=templates["single-gpu"],
        name="outage",
    )
    with worker_process(tmp_path / "live.log"):
        wait_for(
            lambda: Job.objects.get(pk=job.pk).state in (JobState.PENDING, JobState.RUNNING),
            timeout=60,
            message="the job to reach the cluster",
        )
    before = Job.objects.get(pk=job.pk).state
    kubeconfig = dead_kubeconfig(tmp_path / "dead-kubeconfig")
    with worker_process(tmp_path / "dead.log", KUBECONFIG=str(kubeconfig)):
        enqueue("jobs.reconcile_job", job.pk)
        outage = wait_for(
            lambda: Job.objects.filter(pk=job.pk, sync_state=SyncState.RETRYING).first(),
            timeout=60,
            message="the reconcile to record the outage",
        )
    assert outage.state == before  # its lifecycle is not the sync's business
    assert "unreachable" in outage.sync_message
    assert outage.sync_message.endswith("(retrying)")

    with worker_process(tmp_path / "back.log"):

        def caught_up():
            enqueue("jobs.reconcile_job", job.pk)  # what the resync and the watches do
            return Job.objects.filter(
                pk=job.pk, sync_state=SyncState.IN_SYNC, state=JobState.RUNNING
            ).first()

        back = wait_for(
            caught_up,
            timeout=60,
            interval=1,
            message="the next run to converge",
        )
    assert back.state == JobState.RUNNING  # its pod ran on a KWOK node meanwhile: caught up
    assert back.sync_message == ""


def test_a_permanent_refusal_ends_in_error_with_the_reason(
    cluster, team, templates, launch, caplog
):
    cluster.delete("scheduling.volcano.sh/v1beta1", "Queue", team["tenant"].queue_name)
    job = launch(templates["single-gpu"], name="no-queue")
    job.refresh_from_db()
    assert job.state == JobState.ERROR
    assert job.sync_state == SyncState.ERROR
    assert job.message == job.sync_message
    assert f"Volcano queue {team['tenant'].queue_name} does not exist" in job.message
    assert job.events.filter(kind="state", message__contains="→ error").exists()
    logged = [r for r in caplog.records if r.getMessage().startswith(f"reconcile job {job.pk}")]
    assert logged, "the failure was not logged"
    assert logged[0].exc_info  # the worker log has the object's key and the traceback


def test_a_volcano_job_a_run_created_before_it_stopped_is_followed_not_refused(
    cluster, team, templates
):
    # A job's first run creates its Volcano job without reading it first. A run that created
    # it and stopped before recording it (or whose apply timed out after the API server took
    # it) leaves one that Volcano's webhook refuses to create again: the next run follows it.
    job, _ = services.launch_job(  # no run: the launch's transaction never commits here
        team["tenant"],
        team["bob"],
        actor=team["bob"],
        template_version=templates["single-gpu"],
        name="half-done",
    )
    namespace = team["tenant"].namespace
    *volumes, vcjob = build_job(job.job_spec())  # what that run applied
    claims = [o for o in cluster.apply(volumes) if o["kind"] == "PersistentVolumeClaim"]
    assert not wait_bound(cluster, namespace, claims, 30), "the claim never bound"
    cluster.apply_one(vcjob)
    assert Job.objects.get(pk=job.pk).state == JobState.SUBMITTING

    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state in (JobState.PENDING, JobState.RUNNING), job.message
    assert job.sync_message == ""
    job = settle(job, JobState.RUNNING)
    assert job.events.filter(kind="submitted").count() == 1
    assert not job.events.filter(message__contains="error").exists()
    assert len(cluster.list(VCJOB_API, "Job", namespace=namespace)) == 1


RESOLVE_IN_THREADS = """
import threading, django
django.setup()
from core.reconcile import _task
barrier, found = threading.Barrier(8), []
def resolve():
    barrier.wait()
    try:
        found.append(_task("jobs.reconcile_job").name)
    except Exception as exc:
        found.append(repr(exc))
threads = [threading.Thread(target=resolve) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print("\\n".join(found))
"""


def test_tasks_resolve_by_name_in_threads_that_ask_at_once():
    # The collector enqueues from its informers' threads, several at once as it starts; in a
    # fresh process (this one has imported every task already) all must find the task.
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "portal.settings"}
    done = subprocess.run(
        [sys.executable, "-c", RESOLVE_IN_THREADS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["jobs.reconcile_job"] * 8, done.stdout


def running_job(team, templates, name):
    """A job launched through the real worker and seen Running."""
    job, _ = services.launch_job(
        team["tenant"],
        team["bob"],
        actor=team["bob"],
        template_version=templates["single-gpu"],
        name=name,
    )
    wait_for(
        lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING,
        timeout=60,
        message="the job to run",
    )
    return job


def wait_aborting(cluster, job, *, timeout, message):
    """Until Volcano has the job aborting (the portal's cancel reached it)."""
    namespace = job.tenant.namespace
    wait_for(
        lambda: (
            (cluster.get(VCJOB_API, "Job", job.name, namespace) or {})
            .get("status", {})
            .get("state", {})
            .get("phase")
            in ("Aborting", "Aborted")
        ),
        timeout=timeout,
        message=message,
    )


def test_a_change_seen_while_a_delayed_run_waits_is_acted_on_at_once(
    cluster, team, templates, worker, collector
):
    # A job waiting for its claim is requeued in a few seconds; when the collector sees the
    # claim bind meanwhile, that run must not wait for the delayed one.
    job = running_job(team, templates, "prompt")
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)  # a change nobody enqueued yet
    enqueue("jobs.reconcile_job", job.pk, countdown=300)  # a delayed run is waiting
    enqueue("jobs.reconcile_job", job.pk)  # what a watch does when it sees a change
    wait_aborting(
        cluster,
        job,
        timeout=30,
        message="the cancel to reach Volcano without waiting for the delayed run",
    )


def test_a_change_seen_while_another_run_holds_the_job_is_acted_on_right_after_it(
    cluster, team, templates, worker, collector
):
    # A job waiting for its claim requeues itself in 5 s; when its claim binds while that run
    # still holds the job, the run the collector sends finds the job busy and must come back
    # as soon as the job is free, not wait for the requeued run (it did: the benchmark's
    # slowest launches all waited those 5 s).
    job = running_job(team, templates, "busy")
    time.sleep(6)  # the launch's own claim-wait requeue (5 s) has come and gone
    enqueue("jobs.reconcile_job", job.pk, countdown=300)  # the run that requeued itself
    with exclusive("jobs.reconcile_job", "job", job.pk):  # a run still holding the job
        Job.objects.filter(pk=job.pk).update(cancel_requested=True)
        enqueue("jobs.reconcile_job", job.pk)  # what the collector does when it sees a change
        time.sleep(2)  # the worker finds the job busy meanwhile
        assert not Job.objects.get(pk=job.pk).phase.startswith("Abort")
    wait_aborting(
        cluster,
        job,
        timeout=15,
        message="the cancel to reach Volcano once the job is free, not with the requeued run",
    )


def delayed_run(pk, retries=0):
    """Run the job's task as the worker runs one sent with a countdown."""
    reconcile_job.push_request(eta=timezone.now().isoformat(), retries=retries)
    try:
        reconcile_job.run(pk)
    finally:
        reconcile_job.pop_request()


def test_a_delayed_recheck_is_skipped_once_a_run_ended_without_waiting(
    team, templates, launch, monkeypatch
):
    # A job waiting for its claim is re-checked in 5 s. When the claim bound before that and
    # the run the collector brought submitted the job, the re-check has nothing left to check:
    # it cost every launch a whole run (queries, reads of the cluster) for nothing.
    from jobs import tasks

    job = launch(templates["single-gpu"], name="recheck")
    runs, waits = [], [True]

    def ensure(job):
        runs.append(job.pk)
        if isinstance(waits[0], Exception):
            error, waits[0] = waits[0], False
            raise error
        if waits[0]:
            raise Requeue(5)  # its claim is not bound yet

    monkeypatch.setattr(tasks, "_ensure", ensure)
    reconcile_job(job.pk)  # waits for its claim
    delayed_run(job.pk)  # the re-check: still waiting
    assert len(runs) == 2
    waits[0] = False
    reconcile_job(job.pk)  # the claim bound: the collector's run submits it
    delayed_run(job.pk)  # the re-check the first run asked for
    assert len(runs) == 3, "a re-check after a run that did not wait must do nothing"

    cache.set(f"busy:jobs.reconcile_job:{job.pk}", 1)  # a run that found the job held
    delayed_run(job.pk)
    assert len(runs) == 4, "the retry of a run that found the job busy must run"
    delayed_run(job.pk, retries=1)  # a retry after the cluster did not answer
    assert len(runs) == 5, "a retry after a transient error must run"

    cache.delete(f"settled:jobs.reconcile_job:{job.pk}")  # the mark expired, or Redis lost it
    delayed_run(job.pk)
    assert len(runs) == 6, "only a mark that says the job settled may skip a re-check"
    waits[0] = RuntimeError("the worker died")
    with pytest.raises(RuntimeError):
        reconcile_job(job.pk)  # a run that ends halfway
    delayed_run(job.pk)
    assert len(runs) == 8, "a re-check after a run that ended halfway must run"


def test_the_frequent_resync_rereads_waiting_jobs_and_the_full_one_every_job(
    team, templates, launch, monkeypatch
):
    # Running jobs are followed by the collector's watch on Volcano jobs; re-reading them all
    # every few seconds kept the workers busy in proportion to the cluster's size.
    from jobs import tasks

    running = settle(launch(templates["single-gpu"], name="runs"), JobState.RUNNING)
    waiting = launch(templates["single-gpu"], name="waits")
    Job.objects.filter(pk=waiting.pk).update(state=JobState.PENDING)  # e.g. its queue is full
    sent = []
    monkeypatch.setattr(tasks, "resync", lambda name, pks: sent.extend(pks))
    tasks.resync_jobs()
    assert waiting.pk in sent
    assert running.pk not in sent
    sent.clear()
    tasks.resync_jobs(everything=True)
    assert {waiting.pk, running.pk} <= set(sent)


def test_jobs_that_have_waited_long_are_reread_by_every_third_frequent_resync(
    team, templates, launch, monkeypatch, settings
):
    # Why a job waits is read from Events, several LISTs a run: a backlog of jobs waiting for
    # many minutes must not cost that every few seconds each.
    from jobs import tasks

    old = launch(templates["single-gpu"], name="waits-long")
    new = launch(templates["single-gpu"], name="waits-now")
    interval = settings.JOB_SYNC_INTERVAL
    first = (int(time.time() // interval) // 3 + 1) * 3 * interval  # a third tick
    Job.objects.filter(pk=new.pk).update(
        state=JobState.PENDING, submitted_at=datetime.fromtimestamp(first, UTC)
    )
    Job.objects.filter(pk=old.pk).update(
        state=JobState.PENDING, submitted_at=datetime.fromtimestamp(first, UTC) - timedelta(hours=1)
    )
    sent = []
    monkeypatch.setattr(tasks, "resync", lambda name, pks: sent.extend(pks))
    seen = []
    for tick in range(3):
        sent.clear()
        with time_machine.travel(first + tick * interval + 1, tick=False):
            tasks.resync_jobs()
        seen.append({old.pk, new.pk} & set(sent))
    assert seen == [{old.pk, new.pk}, {new.pk}, {new.pk}]


def test_a_submitted_jobs_secret_deleted_by_hand_comes_back_within_the_resync_interval(
    cluster, team, templates, launch, settings
):
    # The runs the collector's watch brings (every phase change) only follow the phase: the
    # job's claim and Secret are applied again at most once a resync interval.
    settings.RESYNC_INTERVAL = 8
    SSHKey.objects.create(user=team["bob"], name="laptop", public_key=ED25519)
    job = launch(templates["single-gpu"], name="keys")
    namespace = team["tenant"].namespace
    name = ssh_keys_secret(job.name)
    assert cluster.get("v1", "Secret", name, namespace) is not None
    cluster.delete("v1", "Secret", name, namespace)
    reconcile_job(job.pk)
    assert cluster.get("v1", "Secret", name, namespace) is None  # the run just after submission
    time.sleep(settings.RESYNC_INTERVAL)
    reconcile_job(job.pk)
    assert cluster.get("v1", "Secret", name, namespace) is not None


def test_a_job_whose_claim_binds_soon_is_submitted_by_its_first_run(
    cluster, team, templates, session_worker, queued_tasks, tmp_path
):
    # A job's claim must be bound before its Volcano job exists. While no other task waits for
    # a worker, its first run waits a moment for that and submits it; before, the job went
    # Pending, and a second run came when the collector saw the claim bind. No collector runs
    # here, and the wait is long enough for a busy machine: only the first run can submit it.
    session_worker.stop()  # only this test's worker takes these tasks
    with worker_process(tmp_path / "worker.log", JOB_BIND_WAIT="60"):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            name="bound-soon",
        )
        submitted = wait_for(
            lambda: JobEvent.objects.filter(job=job, kind="submitted").first(),
            timeout=90,
            message="the job's submission",
        )
    before = JobEvent.objects.filter(job=job, kind="state", pk__lt=submitted.pk)
    assert not [e.message for e in before if "pending" in e.message], "it waited as Pending"


def test_a_run_waits_for_the_cluster_only_while_no_other_task_waits(queued_tasks, session_worker):
    # A run that waits for a claim to bind holds a worker thread: with launches queued behind
    # it (a burst, a slow provisioner), it requeues itself instead and frees the thread.
    session_worker.stop()  # nothing takes the task sent here
    with celery_app.connection_for_write() as connection:
        queue = celery_app.conf.task_default_queue
        connection.default_channel.queue_purge(queue)
        assert nothing_waiting()
        send("jobs.resync_jobs")
        assert not nothing_waiting(), "a task waits for a worker"
        connection.default_channel.queue_purge(queue)
    celery_app.conf.task_always_eager = True
    assert not nothing_waiting(), "an inline run never waits: its caller does"


def waiting_runs(channel, queue):
    """(pk, priority) of every run waiting in the broker, in the order workers take them."""
    runs = []
    while (message := channel.basic_get(queue, no_ack=True)) is not None:
        args, _kwargs, _embed = message.decode()
        runs.append((args[0], message.properties.get("priority")))
    return runs


def test_a_resync_sends_its_runs_behind_those_a_change_sends(queued_tasks, session_worker):
    # The full resync sends a run for every job at once. A launch's run sent just after waited
    # behind them all (1.4 s in the benchmark); now it goes first, and the resync's runs do
    # not keep it from waiting a moment for its claim either.
    session_worker.stop()  # nothing takes the tasks sent here
    backlog = list(range(10**9, 10**9 + 20))  # keys of no job: only the broker is read here
    changed = 10**9 + 100
    with celery_app.connection_for_write() as connection:
        channel, queue = connection.default_channel, celery_app.conf.task_default_queue
        channel.queue_purge(queue)
        try:
            resync("jobs.reconcile_job", backlog)
            resync("jobs.reconcile_job", backlog)  # its runs still wait: none sent again
            assert nothing_waiting(), "a resync's runs kept a run from waiting for its claim"
            enqueue("jobs.reconcile_job", backlog[0])  # a change to one of them: sent anyway
            enqueue("jobs.reconcile_job", changed)
            resync("jobs.reconcile_job", [changed])  # the change's run waits: no resync run
            assert not nothing_waiting()
            runs = waiting_runs(channel, queue)
        finally:
            channel.queue_purge(queue)
    assert runs[:2] == [(backlog[0], 0), (changed, 0)], "the changes' runs must go first"
    assert runs[2:] == [(pk, BACKGROUND) for pk in backlog]


def test_a_launch_runs_before_a_resync_sent_before_it_is_through(
    cluster, team, templates, session_worker, queued_tasks, tmp_path
):
    # Through a real worker with one thread: the launch's run is taken before the resync's
    # runs that waited before it, and those all run after it.
    session_worker.stop()  # only this test's worker takes these tasks
    backlog = range(2 * 10**9, 2 * 10**9 + 500)  # keys of no job: each run finds nothing to do
    with celery_app.connection_for_write() as connection:
        channel, queue = connection.default_channel, celery_app.conf.task_default_queue
        channel.queue_purge(queue)

        def waiting():
            return channel.queue_declare(queue=queue).message_count

        resync("jobs.reconcile_job", backlog)
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            name="before-resync",
        )
        assert waiting() == len(backlog) + 1
        with worker_process(tmp_path / "worker.log", WORKER_CONCURRENCY="1"):
            wait_for(
                lambda: Job.objects.filter(pk=job.pk, synced_at__isnull=False).exists(),
                timeout=60,
                interval=0.05,
                message="the launch's run",
            )
            left = waiting()
            wait_for(lambda: waiting() == 0, timeout=120, message="the resync's runs")
    assert left > len(backlog) // 2, f"the launch's run came after {len(backlog) - left} others"


QUOTA = "gpu-portal"  # the tenant's own ResourceQuota


@pytest.mark.parametrize(
    ("limited", "reason"),
    [
        ("requests.storage=200Gi", "releasing"),  # the tenant's own: a deleted claim counts
        ("persistentvolumeclaims=20", "releasing"),
        ("persistentvolumeclaims=20,requests.storage=200Gi", "releasing"),
        ("requests.storage=100Gi", "behind"),  # below the tenant's: raised or edited by hand,
        ("persistentvolumeclaims=10", "behind"),  # and set again by the tenant's next run
        ("persistentvolumeclaims=20,requests.storage=100Gi", "behind"),
        ("requests.nvidia.com/gpu=8", ""),  # not a volume's
    ],
)
def test_a_volume_refusal_by_the_resource_quota_is_a_wait_saying_why(limited, reason):
    """The portal's admission counted the room free: the ResourceQuota still counts a claim
    being deleted, or still has the tenant's old limit (the portal sets it again)."""
    from jobs import pending
    from jobs.tasks import _quota_lags
    from k8s_adapters.errors import PermanentK8sError
    from tenants.models import Tenant

    tenant = Tenant(slug="t", storage_quota_gib=200, pvc_quota=20)
    message = (
        f'persistentvolumeclaims "j-workspace" is forbidden: exceeded quota: {QUOTA}, '
        f"requested: {limited}, used: {limited}, limited: {limited}"
    )
    said = {"releasing": pending.STORAGE_RELEASING, "behind": pending.QUOTA_BEHIND, "": ""}
    assert _quota_lags(PermanentK8sError(message, status=403), tenant) == said[reason]
    # a ResourceQuota someone else made refuses for good: no run of the portal's ends it
    foreign = message.replace(f"exceeded quota: {QUOTA},", "exceeded quota: hand-made,")
    assert _quota_lags(PermanentK8sError(foreign, status=403), tenant) == ""
    assert _quota_lags(PermanentK8sError(message, status=422), tenant) == ""


def test_a_volcano_job_deleted_before_the_portal_saw_its_phase_is_not_created_again(
    cluster, team, templates, launch
):
    """Its creation is recorded: gone before a phase reached the portal (Volcano's TTL during a
    collector's reconnect, or someone's delete while it waited), it ends; created again, it ran
    twice."""
    job = launch(templates["single-gpu"], name="ttl-gone")
    namespace = team["tenant"].namespace
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, phase="")
    cluster.delete(VCJOB_API, "Job", "ttl-gone", namespace)
    wait_for(lambda: cluster.get(VCJOB_API, "Job", "ttl-gone", namespace) is None)
    reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert "deleted outside the portal (last phase none yet)" in job.message
    assert cluster.get(VCJOB_API, "Job", "ttl-gone", namespace) is None
    assert job.events.filter(kind="submitted").count() == 1


def test_a_cancel_reaches_volcano_though_the_jobs_endpoints_are_refused(
    cluster, team, templates, launch, monkeypatch
):
    """The abort goes first: a Service quota or a route kind not served refused the endpoints
    for good, and the job the user cancelled kept running."""
    from jobs import tasks
    from k8s_adapters.errors import PermanentK8sError

    job = settle(launch(templates["single-gpu"], name="cancel-me"), JobState.RUNNING)
    Job.objects.filter(pk=job.pk).update(cancel_requested=True)

    def refused(*args, **kwargs):
        raise PermanentK8sError('services "x" is forbidden: exceeded quota', status=403)

    monkeypatch.setattr(tasks, "_ensure_endpoints", refused)
    reconcile_job(job.pk)

    def aborted():  # Volcano's controller takes the Command (and deletes it) at once
        vcjob = cluster.get(VCJOB_API, "Job", "cancel-me", team["tenant"].namespace)
        return vcjob["status"]["state"]["phase"] in ("Aborting", "Aborted")

    wait_for(aborted, timeout=30, message="Volcano to abort the job")


def test_a_job_cancelled_before_volcano_had_it_never_goes_back_to_error(team, templates):
    """A refusal while removing what it had (its volumes made ahead) put it in error: error
    counts the job's quota again, and it showed Error after its cancel."""
    from jobs import tasks
    from k8s_adapters.errors import PermanentK8sError

    job, _ = services.launch_job(
        team["tenant"], team["bob"], actor=team["bob"], template_version=templates["single-gpu"]
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.CANCELLED, phase="")
    job.refresh_from_db()
    tasks._failed(job, PermanentK8sError("persistentvolumeclaims is forbidden", status=403))
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED


def test_a_run_that_crashes_says_so_on_the_job(team, templates, launch, monkeypatch):
    """Not 'in sync' while every run crashes on something unforeseen."""
    from jobs import tasks

    job = launch(templates["single-gpu"], name="crashes")

    def broken(job):
        raise KeyError("status")

    monkeypatch.setattr(tasks, "_ensure", broken)
    with pytest.raises(KeyError):
        reconcile_job(job.pk)
    job.refresh_from_db()
    assert job.sync_state == SyncState.ERROR
    assert "The portal failed applying this (KeyError, logged)" in job.sync_message


def test_the_resync_removes_volumes_left_by_a_job_cancelled_in_the_queue(
    team, templates, monkeypatch
):
    """The one run its cancel sent may be lost: the volumes made ahead for it counted against
    the tenant's storage until someone deleted the job."""
    from jobs import tasks

    job, _ = services.launch_job(
        team["tenant"], team["bob"], actor=team["bob"], template_version=templates["single-gpu"]
    )
    Job.objects.filter(pk=job.pk).update(
        state=JobState.CANCELLED, submitted_at=None, volumes_ahead_at=timezone.now()
    )
    sent = []
    monkeypatch.setattr(tasks, "resync", lambda name, pks: sent.extend(pks))
    tasks.resync_jobs()
    assert job.pk in sent
