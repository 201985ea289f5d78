"""The portal's own queue: jobs beyond the quota wait in order; admission is race-safe."""

import itertools
import threading
import time
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.models import Count
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from jobs import admission, services
from jobs.admission import queue_position, storage_in_use
from jobs.choices import JobState
from jobs.models import DataVolume, Job, JobEvent
from jobs.tasks import resync_jobs, workspace_deleted
from k8s_adapters.quantity import to_decimal
from k8s_adapters.volcano import VCJOB_API
from tenants.models import Tenant
from tests.helpers import wait_for
from tests.jobs.conftest import settle, submitted

FINISHES = "sh -c 'sleep 6; exit 0'"  # a simulated container with this command ends in 6 s


def launch(team, version, who="bob", gpus=8, name=None, command=None):
    overrides = {"gpus": gpus, **({"command": command} if command else {})}
    job, _ = services.launch_job(
        team["tenant"],
        team[who],
        actor=team[who],
        template_version=version,
        overrides=overrides,
        name=name or "",
    )
    return submitted(job)


ADMITTED = (JobState.SUBMITTING, JobState.PENDING, JobState.RUNNING)


def states(*jobs):
    """'admitted' for jobs the portal sent to Volcano (pending or already running there)."""
    found = [Job.objects.get(pk=j.pk).state for j in jobs]
    return ["admitted" if state in ADMITTED else state for state in found]


def cluster_gpus(cluster, namespace):
    """GPUs asked for by the Volcano jobs in the namespace that have not finished."""
    total = 0
    for job in cluster.list(VCJOB_API, "Job", namespace=namespace):
        phase = ((job.get("status") or {}).get("state") or {}).get("phase")
        if phase in ("Completed", "Failed", "Aborted", "Terminated"):
            continue
        for task in job["spec"]["tasks"]:
            limits = task["template"]["spec"]["containers"][0]["resources"]["limits"]
            total += int(to_decimal(limits.get("nvidia.com/gpu", 0))) * task["replicas"]
    return total


@pytest.mark.django_db
def test_jobs_beyond_the_quota_wait_in_order_and_start_as_gpus_free(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        first, second, third, fourth, fifth = (
            launch(team, single, name=f"j{i}", command=FINISHES if i == 1 else None)
            for i in range(1, 6)
        )
    assert states(first, second, third, fourth, fifth) == ["admitted"] * 3 + ["queued"] * 2
    assert (queue_position(fourth), queue_position(fifth)) == (1, 2)
    assert cluster.get(VCJOB_API, "Job", "j4", team["tenant"].namespace) is None

    with django_capture_on_commit_callbacks(execute=True):
        settle(first, JobState.SUCCEEDED)
    assert states(first, fourth, fifth) == ["succeeded", "admitted", "queued"]
    assert queue_position(Job.objects.get(pk=fifth.pk)) == 1
    submitted(fourth)
    assert cluster.get(VCJOB_API, "Job", "j4", team["tenant"].namespace) is not None


@pytest.mark.django_db
def test_a_member_at_their_cap_does_not_block_teammates(
    team, templates, cluster, django_capture_on_commit_callbacks
):
    Tenant.objects.filter(pk=team["tenant"].pk).update(member_gpu_cap=8)
    team["tenant"].refresh_from_db()
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        bob_1 = launch(team, single, "bob")
        bob_2 = launch(team, single, "bob")
        alice_1 = launch(team, single, "alice")
    assert states(bob_1, bob_2, alice_1) == ["admitted", "queued", "admitted"]
    # waiting for bob's cap alone, bob_2 takes no storage ahead a teammate's job may need
    assert claim(cluster, bob_2) is None
    # and a cap it could never start under is refused while it waits
    from django.core.exceptions import ValidationError

    from tenants import services as tenant_services

    with pytest.raises(ValidationError) as caught:
        tenant_services.update_tenant(team["tenant"], actor=team["admin"], member_gpu_cap=4)
    assert caught.value.message_dict["member_gpu_cap"] == [
        f"The queued job {bob_2.name} asks for 8 GPUs: it could never start under this cap. "
        "Cancel it first."
    ]


def claim(cluster, job):
    return cluster.get(
        "v1", "PersistentVolumeClaim", job.job_spec().workspace_claim, job.tenant.namespace
    )


def wait_bound(cluster, job, timeout=30):
    deadline = time.monotonic() + timeout
    while ((claim(cluster, job) or {}).get("status") or {}).get("phase") != "Bound":
        assert time.monotonic() < deadline, f"{job.name}'s claim never bound"
        time.sleep(0.2)


@pytest.mark.django_db
def test_the_jobs_next_in_line_get_their_workspace_ahead_and_go_straight_to_volcano(
    client, cluster, team, templates, django_capture_on_commit_callbacks
):
    """The next quota's worth of queued jobs gets its claims while it waits: as GPUs free up,
    the head of the queue is in Volcano at its first run, not after its claim binds."""
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        jobs = [
            launch(team, single, name=f"a{i}", command=FINISHES if i == 0 else None)
            for i in range(7)
        ]
    assert states(*jobs) == ["admitted"] * 3 + ["queued"] * 4
    # The 24-GPU quota's worth after the three running: a3, a4 and a5, not a6.
    assert [claim(cluster, job) is not None for job in jobs[3:]] == [True, True, True, False]
    assert cluster.get(VCJOB_API, "Job", "a3", team["tenant"].namespace) is None
    client.force_login(team["bob"])
    slug = team["tenant"].slug
    page = client.get(f"/tenants/{slug}/jobs/a3/status/").content.decode()
    assert "Waiting in the tenant's queue at position 1" in page
    assert "position 1: it asks for 8 GPUs (0 of the tenant&#x27;s 24 free)." in page
    assert "Its workspace volume is made already" in page
    assert "workspace volume" not in client.get(f"/tenants/{slug}/jobs/a6/status/").content.decode()
    wait_bound(cluster, jobs[3])

    with django_capture_on_commit_callbacks(execute=True):
        settle(jobs[0], JobState.SUCCEEDED)  # its release admits a3, whose run submits it
    assert states(jobs[3]) == ["admitted"]
    assert cluster.get(VCJOB_API, "Job", "a3", team["tenant"].namespace) is not None
    assert claim(cluster, jobs[6]) is not None  # now within the next quota's worth


@pytest.mark.django_db
def test_a_queued_job_says_which_limit_holds_it_in_the_tenants_own_numbers(
    client, team, templates, django_capture_on_commit_callbacks
):
    """GPUs may be free while CPU cores, memory or storage are not: the page names what is
    short, with how much is free, and that finished jobs keep their workspaces."""
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        first = launch(team, single, gpus=1, name="q0", command=FINISHES)
    first.refresh_from_db()
    cores = first.cpu_millicores // 1000
    Tenant.objects.filter(pk=team["tenant"].pk).update(
        cpu_quota=cores + cores // 2, storage_quota_gib=first.storage_gib * 2 - 1
    )
    with django_capture_on_commit_callbacks(execute=True):
        second = launch(team, single, gpus=1, name="q1")
    assert states(second) == ["queued"]
    client.force_login(team["bob"])
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/q1/status/").content.decode()
    free_storage = first.storage_gib - 1
    assert (
        f"it asks for {cores} CPU cores ({cores // 2} of the tenant&#x27;s "
        f"{cores + cores // 2} free); {first.storage_gib} GiB of storage ({free_storage} of "
        f"the tenant&#x27;s {first.storage_gib * 2 - 1} GiB free)."
    ) in page
    assert "GPU" not in page.split("it asks for", 1)[1].split("</p>", 1)[0]

    with django_capture_on_commit_callbacks(execute=True):
        settle(first, JobState.SUCCEEDED)  # its workspace stays until it is deleted
    page = client.get(f"/tenants/{team['tenant'].slug}/jobs/q1/status/").content.decode()
    assert f"finished jobs keep {first.storage_gib} GiB of workspaces until deleted" in page, page


def gone_for_good(cluster, claim, namespace):
    """A claim deleted by hand stays while the finished job's pods exist (its protection
    finalizer), and the ResourceQuota counts it meanwhile; here it goes at once, as when its
    pods went too or the cluster was rebuilt without it."""
    cluster.delete("v1", "PersistentVolumeClaim", claim, namespace)
    cluster.patch_merge(
        "v1", "PersistentVolumeClaim", claim, {"metadata": {"finalizers": None}}, namespace
    )
    wait_for(
        lambda: cluster.get("v1", "PersistentVolumeClaim", claim, namespace) is None,
        timeout=30,
        message=f"{claim} to go",
    )


@pytest.mark.django_db
def test_a_finished_jobs_workspace_deleted_outside_the_portal_no_longer_counts(
    client, cluster, team, templates, django_capture_on_commit_callbacks
):
    """Finished jobs keep their workspace until deleted, and it counts against the tenant's
    storage; when the claim goes some other way (by hand, or with a rebuilt cluster), the
    collector's watch or the full resync notices, the storage counts no more, the job's page
    says why, and a job waiting for that storage goes."""
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        done = [launch(team, single, gpus=1, name=f"w{i}", command=FINISHES) for i in range(2)]
        for job in done:
            settle(job, JobState.SUCCEEDED)
    size = Job.objects.get(pk=done[0].pk).storage_gib
    Tenant.objects.filter(pk=team["tenant"].pk).update(storage_quota_gib=3 * size - 1)
    with django_capture_on_commit_callbacks(execute=True):
        waiting = launch(team, single, gpus=1, name="w2")
    assert states(waiting) == ["queued"]
    assert storage_in_use(team["tenant"])[0] == 2 * size

    namespace = team["tenant"].namespace
    gone_for_good(cluster, "w0-workspace", namespace)
    with django_capture_on_commit_callbacks(execute=True):
        workspace_deleted(team["tenant"].slug, "w0", "w0-workspace")  # the collector saw it
    assert states(waiting) == ["admitted"]  # into the storage w0 held
    assert storage_in_use(team["tenant"])[0] == 2 * size  # w1's and w2's
    events = Job.objects.get(pk=done[0].pk).events.filter(kind="workspace-gone")
    assert [e.message for e in events] == [
        f"Its workspace volume ({size} GiB) was deleted outside the portal; it no longer counts "
        "against the tenant's storage."
    ]

    gone_for_good(cluster, "w1-workspace", namespace)  # while the collector was away
    assert storage_in_use(team["tenant"])[0] == 2 * size
    with django_capture_on_commit_callbacks(execute=True):
        resync_jobs(everything=True)
        resync_jobs(everything=True)  # once is enough: said once
    assert storage_in_use(team["tenant"])[0] == size  # w2's own workspace only
    assert Job.objects.get(pk=done[1].pk).events.filter(kind="workspace-gone").count() == 1
    assert JobEvent.objects.filter(job__tenant=team["tenant"], kind="workspace-gone").count() == 2


@pytest.mark.django_db
def test_cancelling_a_queued_job_never_starts_it_and_frees_its_workspace(
    team, templates, cluster, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        jobs = [launch(team, templates["single-gpu"], name=f"c{i}") for i in range(4)]
    assert claim(cluster, jobs[3]) is not None  # next in line: made ahead
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(jobs[3], actor=team["bob"])
    assert states(*jobs) == ["admitted"] * 3 + ["cancelled"]
    assert cluster.get(VCJOB_API, "Job", "c3", team["tenant"].namespace) is None
    gone = claim(cluster, jobs[3])
    assert gone is None or gone["metadata"].get("deletionTimestamp")
    assert storage_in_use(team["tenant"])[1] == 3  # the three admitted jobs' claims only


# Every 3 s while its tab is visible.
POLLS = "hx-trigger=\"every 3s [document.visibilityState == 'visible']\""


@pytest.mark.django_db
def test_the_status_panel_polls_until_the_job_ends_and_reads_the_quota_only_while_it_waits(
    client, team, templates, cluster, django_capture_on_commit_callbacks
):
    """Every open job page polls its status panel every few seconds: the tenant's free GPUs and
    storage are read only for a job waiting in the queue (the one state that shows them), and
    a job that ended is polled for a few seconds more, then no longer."""
    with django_capture_on_commit_callbacks(execute=True):
        jobs = [launch(team, templates["single-gpu"], name=f"s{i}") for i in range(5)]
    assert states(*jobs) == ["admitted"] * 3 + ["queued"] * 2
    client.force_login(team["bob"])
    slug = team["tenant"].slug

    def panel(job):
        with CaptureQueriesContext(connection) as queries:
            page = client.get(f"/tenants/{slug}/jobs/{job.name}/status/").content.decode()
        return page, [q["sql"] for q in queries.captured_queries]

    waiting, waiting_reads = panel(jobs[3])
    assert "Waiting in the tenant's queue at position 1" in waiting
    assert POLLS in waiting
    assert any("jobs_datavolume" in sql for sql in waiting_reads)

    admitted, admitted_reads = panel(jobs[0])
    assert "Waiting in the tenant's queue" not in admitted
    assert POLLS in admitted
    assert not any("jobs_datavolume" in sql or "SUM(" in sql for sql in admitted_reads)
    assert len(admitted_reads) < len(waiting_reads)

    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(jobs[4], actor=team["bob"])
    just_ended, _ = panel(jobs[4])  # what is written just after the end still shows
    assert "Cancelled" in just_ended
    assert POLLS in just_ended
    Job.objects.filter(pk=jobs[4].pk).update(finished_at=timezone.now() - timedelta(seconds=11))
    ended, _ = panel(jobs[4])
    assert "Cancelled" in ended
    assert "hx-trigger" not in ended


@pytest.mark.django_db(transaction=True)
def test_parallel_launches_never_put_more_gpus_in_the_cluster_than_the_quota(
    cluster, team, templates
):
    errors = []

    def worker(i):
        try:
            launch(team, templates["single-gpu"], gpus=4, name=f"p{i:02d}")
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    namespace = team["tenant"].namespace
    holding = Job.objects.filter(tenant=team["tenant"]).holding()
    assert sum(j.gpus for j in holding) == 24
    assert holding.count() == 6
    assert Job.objects.filter(state=JobState.QUEUED).count() == 10
    assert cluster_gpus(cluster, namespace) == 24

    done = holding.order_by("queued_at").first()
    services.cancel_job(done, actor=team["bob"])  # through Volcano's abort, for real
    settle(done, JobState.CANCELLED)
    head = Job.objects.filter(state=JobState.QUEUED).order_by("queued_at").first()
    admitted = (
        Job.objects.filter(tenant=team["tenant"], submitted_at__isnull=False)
        .exclude(pk__in=[j.pk for j in holding])
        .get()
    )
    submitted(admitted)
    assert cluster_gpus(cluster, namespace) == 24  # 20 still held + the next 4 admitted
    assert admitted.queued_at <= head.queued_at


@pytest.mark.django_db
def test_jobs_wait_for_storage_quota_instead_of_failing_in_the_cluster(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    """Workspaces count against requests.storage as the ResourceQuota will: a job that would
    exceed it waits queued and starts once a finished job is deleted."""
    from tenants import services as tenant_services

    with django_capture_on_commit_callbacks(execute=True):
        tenant_services.update_tenant(team["tenant"], actor=team["admin"], storage_quota_gib=100)
    single = templates["single-gpu"]

    def launch_disk(name, **overrides):
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=single,
            overrides={"gpus": 1, "workspace_gib": 40, **overrides},
            name=name,
        )
        return job

    with django_capture_on_commit_callbacks(execute=True):
        first = launch_disk("disk-0", command=FINISHES)
        second, third = (launch_disk(f"disk-{i}") for i in range(1, 3))
    assert states(first, second, third) == ["admitted", "admitted", "queued"]
    assert Job.objects.get(pk=third.pk).message == ""
    assert claim(cluster, third) is None  # no storage left to make it ahead either
    assert Job.objects.filter(state=JobState.ERROR).count() == 0

    with django_capture_on_commit_callbacks(execute=True):
        settle(first, JobState.SUCCEEDED)
    assert states(third) == ["queued"]  # a finished job's workspace still holds its storage
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_job(Job.objects.get(pk=first.pk), actor=team["bob"])
    # Admitted at once; the ResourceQuota may count the deleted claim a moment longer: the job
    # waits for that instead of failing, and is submitted once the claim is gone.
    assert states(third) == ["admitted"]
    submitted(third)
    assert cluster.get(VCJOB_API, "Job", "disk-2", team["tenant"].namespace) is not None

    with pytest.raises(services.ValidationError) as caught:
        services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=single,
            overrides={"workspace_gib": 200},
            name="too-big",
        )
    assert (
        "larger than the tenant's whole storage quota (100 GiB)"
        in caught.value.message_dict["volumes.workspace_gib"][0]
    )


def queued(tenant, owner, name, at):
    """A one-GPU job waiting in the tenant's queue since `at` (as a launch beyond the quota
    leaves it)."""
    return Job.objects.create(
        tenant=tenant,
        owner=owner,
        name=name,
        spec={},
        gpus=1,
        storage_gib=1,
        state=JobState.QUEUED,
        queued_at=at,
    )


@pytest.mark.django_db
def test_a_queue_longer_than_a_page_is_admitted_in_order(monkeypatch):
    # The queue is read a page at a time: jobs queued in the same instant keep their order
    # across pages, and none is skipped or read twice.
    monkeypatch.setattr(admission, "QUEUE_PAGE", 2)
    tenant = Tenant.objects.create(
        slug="long-queue", display_name="Q", gpu_quota=5, max_running_jobs=10
    )
    owner = get_user_model().objects.create(username="queuer")
    same = timezone.now()
    jobs = [
        queued(tenant, owner, f"q{i}", same if i in (1, 2, 3) else same + timedelta(seconds=i))
        for i in range(7)
    ]
    jobs[0].queued_at = same - timedelta(seconds=1)
    jobs[0].save(update_fields=["queued_at"])
    admitted = admission.admit(tenant.pk)
    assert admitted == [j.pk for j in jobs[:5]]  # the quota's five, oldest first
    assert states(*jobs) == ["admitted"] * 5 + ["queued"] * 2


@pytest.mark.django_db
def test_a_job_cancelled_while_admission_reads_the_queue_stays_cancelled(monkeypatch):
    """Admission reads the queue without locking its rows: a cancel that commits between that
    read and admission's write keeps the job cancelled, never sends it to the cluster, and
    admission says it admitted only the others."""
    tenant = Tenant.objects.create(
        slug="cancel-race", display_name="C", gpu_quota=4, max_running_jobs=10
    )
    owner = get_user_model().objects.create(username="racer")
    start = timezone.now()
    jobs = [queued(tenant, owner, f"r{i}", start + timedelta(seconds=i)) for i in range(3)]
    read = admission._queue

    def read_then_cancel(tenant):
        found = list(read(tenant))
        # the commit of a cancel_job, in between (the service's own row lock is not held here)
        Job.objects.filter(pk=jobs[1].pk).update(
            state=JobState.CANCELLED, cancel_requested=True, finished_at=timezone.now()
        )
        return iter(found)

    monkeypatch.setattr(admission, "_queue", read_then_cancel)
    admitted = admission.admit(tenant.pk)
    assert admitted == [jobs[0].pk, jobs[2].pk]
    assert states(*jobs) == ["admitted", "cancelled", "admitted"]
    assert Job.objects.get(pk=jobs[1].pk).submitted_at is None


@pytest.mark.django_db
def test_data_volumes_take_storage_quota_that_jobs_then_wait_for():
    # The tenant's data volumes count with the workspaces, as the ResourceQuota counts them:
    # a workspace that would not fit beside them waits, and goes once a volume is deleted.
    tenant = Tenant.objects.create(
        slug="volumes", display_name="V", gpu_quota=8, storage_quota_gib=100, pvc_quota=10
    )
    owner = get_user_model().objects.create(username="storer")
    corpus = DataVolume.objects.create(tenant=tenant, name="corpus", size_gib=70, created_by=owner)
    DataVolume.objects.create(tenant=tenant, name="old", size_gib=20, delete_requested=True)
    assert storage_in_use(tenant) == (70, 1)  # a volume being deleted no longer counts
    job = Job.objects.create(
        tenant=tenant,
        owner=owner,
        name="big-workspace",
        spec={},
        gpus=1,
        storage_gib=40,
        state=JobState.QUEUED,
        queued_at=timezone.now(),
    )
    assert admission.admit(tenant.pk) == []
    assert states(job) == ["queued"]
    DataVolume.objects.filter(pk=corpus.pk).update(delete_requested=True)
    assert admission.admit(tenant.pk) == [job.pk]
    assert storage_in_use(tenant) == (40, 1)


def test_a_page_of_jobs_in_the_api_costs_the_same_queries_however_many_it_lists(
    team, templates, django_capture_on_commit_callbacks
):
    """Each listed job's endpoints and place in the queue are read once for the page, not once
    per job (the jobs are launched only: their runs are not sent)."""
    client = APIClient()
    client.force_login(team["bob"])
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/"
    notebook = templates["jupyter-ssh"]

    def launch(count, who="bob"):
        for _ in range(count):
            with django_capture_on_commit_callbacks(execute=False):
                services.launch_job(
                    team["tenant"], team[who], actor=team[who], template_version=notebook
                )

    def listed(query=""):
        with CaptureQueriesContext(connection) as queries:
            body = client.get(url + query).json()
        return body["results"], len(queries.captured_queries)

    launch(team["tenant"].gpu_quota + 1)  # one GPU each: the last waits in the portal's queue
    few, few_queries = listed()
    for _ in range(5):  # alice's queued jobs between bob's
        launch(1, who="alice")
        launch(1)
    many, many_queries = listed()
    assert len(many) == len(few) + 10
    assert many_queries == few_queries
    jobs = {job.name: job for job in Job.objects.filter(tenant=team["tenant"])}
    assert sorted(job["queue_position"] for job in many if job["queue_position"]) == list(
        range(1, 1 + sum(1 for job in jobs.values() if job.state == JobState.QUEUED))
    )
    for body in many:
        job = jobs[body["name"]]
        assert body["queue_position"] == queue_position(job)
        assert [e["name"] for e in body["endpoints"]] == [e.name for e in job.endpoints.all()]
        assert {e["name"] for e in body["endpoints"]} == {"jupyter", "ssh"}
    alices, _ = listed("?owner=alice")  # her places count bob's jobs ahead of hers
    assert [job["queue_position"] for job in alices] == [
        queue_position(jobs[job["name"]]) for job in alices
    ]


@pytest.mark.django_db
def test_a_quota_is_not_lowered_below_what_admitted_jobs_hold_or_a_queued_job_needs():
    """The ResourceQuota counts pods that exist; admission counts jobs admitted whose pods do
    not yet, and serves its queue in order. A quota lowered below either left the tenant's
    queue stuck for good: Volcano never ran the admitted jobs, or the head of the queue never
    fit and every job behind it waited."""
    from tenants import services as tenant_services

    tenant = Tenant.objects.create(
        slug="lowered", display_name="L", gpu_quota=8, max_running_jobs=10
    )
    admin = get_user_model().objects.create(username="lowerer", is_staff=True)
    owner = get_user_model().objects.create(username="holder")
    now = timezone.now()
    first, big = queued(tenant, owner, "first", now), queued(tenant, owner, "big", now)
    Job.objects.filter(pk=first.pk).update(gpus=4)
    Job.objects.filter(pk=big.pk).update(gpus=8)
    assert admission.admit(tenant.pk) == [first.pk]  # big waits for the other 4

    def refused(**change):
        with pytest.raises(tenant_services.ValidationError) as caught:
            tenant_services.update_tenant(tenant, actor=admin, **change)
        return caught.value.message_dict

    assert refused(gpu_quota=6)["gpu_quota"] == [
        "The queued job big asks for 8 GPUs: it could never start under this quota, and the "
        "jobs queued behind it would wait for good. Cancel it first."
    ]
    Job.objects.filter(pk=big.pk).update(state=JobState.CANCELLED)
    assert refused(gpu_quota=2)["gpu_quota"] == [
        "Admitted jobs hold 4 GPUs now: lower it once they end, or cancel some first."
    ]
    assert tenant_services.update_tenant(tenant, actor=admin, gpu_quota=4).gpu_quota == 4


@pytest.mark.django_db
def test_jobs_beyond_the_pod_quota_wait_and_say_so_and_the_quota_keeps_above_what_runs():
    tenant = Tenant.objects.create(
        slug="pods", display_name="P", gpu_quota=8, max_running_jobs=10, pod_quota=5
    )
    admin = get_user_model().objects.create(username="pod-admin", is_staff=True)
    owner = get_user_model().objects.create(username="pod-owner")
    now = timezone.now()
    wide, next_one = queued(tenant, owner, "wide", now), queued(tenant, owner, "next", now)
    Job.objects.filter(pk__in=[wide.pk, next_one.pk]).update(pods=3)
    assert admission.admit(tenant.pk) == [wide.pk]  # 3 of 5 pods held: 3 more do not fit
    next_one.refresh_from_db()
    assert admission.why_queued(next_one) == ["3 pods (2 of the tenant's 5 free)"]

    from tenants import services as tenant_services

    with pytest.raises(tenant_services.ValidationError) as caught:
        tenant_services.update_tenant(tenant, actor=admin, pod_quota=2)
    assert caught.value.message_dict["pod_quota"] == [
        "Admitted jobs hold 3 pods now: lower it once they end, or cancel some first."
    ]
    Job.objects.filter(pk=wide.pk).update(
        state=JobState.SUCCEEDED, quota_released_at=timezone.now()
    )
    assert admission.admit(tenant.pk) == [next_one.pk]


@pytest.mark.django_db
def test_admission_reads_a_queue_in_the_same_queries_however_long_it_is():
    """It runs with the tenant's row locked, at every launch and every job's end: a field it
    compares read one query per queued job."""
    tenant = Tenant.objects.create(slug="long", display_name="L", gpu_quota=0, max_running_jobs=5)
    owner = get_user_model().objects.create(username="queuer")

    def queries_for(count):
        now = timezone.now()
        for i in range(count):
            queued(tenant, owner, f"q-{count}-{i}", now)
        with CaptureQueriesContext(connection) as seen:
            assert admission.admit(tenant.pk) == []  # no GPUs: all wait
        Job.objects.filter(tenant=tenant).delete()
        return len(seen)

    assert queries_for(2) == queries_for(4)


@pytest.mark.django_db
def test_a_launch_right_after_a_storage_raise_waits_for_the_cluster_instead_of_failing(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    """Admission counts the new quota at once; the ResourceQuota has the old one until the
    tenant's run sets it. The job's claim, refused meanwhile, waits (the tenant's run is sent)."""
    from jobs import pending
    from tenants import services as tenant_services

    with django_capture_on_commit_callbacks(execute=True):
        tenant_services.update_tenant(team["tenant"], actor=team["admin"], storage_quota_gib=50)
    with django_capture_on_commit_callbacks(execute=False):  # the tenant's run comes later
        tenant_services.update_tenant(team["tenant"], actor=team["admin"], storage_quota_gib=100)
    with django_capture_on_commit_callbacks(execute=True) as sent:
        job, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            overrides={"gpus": 1, "workspace_gib": 80},
            name="big-disk",
        )
    job.refresh_from_db()
    assert (job.state, job.pending_reason) == (JobState.PENDING, pending.QUOTA_BEHIND)
    assert len(sent) >= 2  # the job's run, and the tenant's it sent
    assert submitted(Job.objects.get(pk=job.pk)).state != JobState.ERROR
    assert cluster.get(VCJOB_API, "Job", "big-disk", team["tenant"].namespace) is not None


@pytest.mark.django_db
def test_cancelling_the_job_at_the_head_of_the_queue_lets_the_next_in_at_once(
    team, templates, cluster, django_capture_on_commit_callbacks
):
    """The queue is served in order: a big job at its head holds back a small one that fits.
    Cancelled, it no longer does, and the small one need not wait for the next resync."""
    single = templates["single-gpu"]
    with django_capture_on_commit_callbacks(execute=True):
        first, second = (launch(team, single, name=f"h{i}") for i in range(2))
        big = launch(team, single, gpus=16, name="big")
        small = launch(team, single, name="small")
    assert states(first, second, big, small) == ["admitted", "admitted", "queued", "queued"]
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(Job.objects.get(pk=big.pk), actor=team["bob"])
    assert states(big, small) == ["cancelled", "admitted"]


@pytest.mark.django_db
def test_admission_counts_what_a_queued_jobs_reasons_and_the_quota_form_count():
    """Admission reads the tenant's jobs grouped by what it tells apart; a queued job's reasons
    and the quota form read them with a filter per sum. Over jobs in every state, submitted or
    not, with volumes ahead or not, quota released or not, workspace gone or not, cancel or
    delete asked or not, they count the same: a job admitted would otherwise be said to wait,
    or a quota refused that admission would fill."""
    tenant = Tenant.objects.create(slug="mixed", display_name="M", gpu_quota=0)
    owner = get_user_model().objects.create(username="mixer")
    now = timezone.now()
    combinations = itertools.product(JobState.values, *[(None, now)] * 4, *[(False, True)] * 2)
    Job.objects.bulk_create(
        Job(
            tenant=tenant,
            owner=owner,
            name=f"j-{i}",
            spec={},
            gpus=i % 5 + 1,
            cpu_millicores=1000 + i,
            memory_mib=512 + i,
            pods=i % 3 + 1,
            storage_gib=i % 7 + 1,
            state=state,
            queued_at=now,
            submitted_at=submitted,
            volumes_ahead_at=ahead,
            quota_released_at=released,
            workspace_gone_at=gone,
            cancel_requested=cancel,
            delete_requested=delete,
        )
        for i, (state, submitted, ahead, released, gone, cancel, delete) in enumerate(combinations)
    )
    by_filters = Job.objects.filter(tenant=tenant).aggregate(
        waiting=Count("id", filter=admission._WAITING), **admission._HELD, **admission._WORKSPACES
    )
    assert by_filters["jobs"]
    assert by_filters["waiting"]
    assert by_filters["workspaces"]
    assert admission._totals(tenant) == by_filters
