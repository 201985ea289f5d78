"""Jobs against the real Volcano scheduler, controllers and admission webhooks, on KWOK
simulated GPU nodes (started with the local control plane: 8 H100 nodes under a two-tier
HyperNode tree, 2 A100 nodes, 8 GPUs each). No test here writes a Volcano object's status:
pods are scheduled, run and end as the test bed makes them (a simulated container whose command
names `exit N` ends with that code after the `sleep S` it names; any other command runs on)."""

import copy
import time
import uuid

import pytest
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from jobs import services, tasks
from jobs.choices import JobState
from jobs.models import Job
from jobs.seed import PYTORCH_DDP
from jobs.tasks import reconcile_job
from k8s_adapters import names
from k8s_adapters.client import Cluster
from k8s_adapters.events import TELLING_REASONS
from k8s_adapters.tenant import QUEUE_API
from k8s_adapters.volcano import VCJOB_API
from tenants import services as tenant_services
from tests.helpers import cluster_lists, wait_for
from tests.jobs.conftest import job_pods, launch_as, settle, submitted

A100 = "NVIDIA-A100-SXM4-80GB"


def exits(code, after=1):
    return {"command": f"sh -c 'sleep {after}; exit {code}'"}


@pytest.fixture
def launch_spec(team, django_capture_on_commit_callbacks):
    """Launch a whole spec (not a template) as bob, reconciled inline."""

    def launch(spec, name, who="bob"):
        with django_capture_on_commit_callbacks(execute=True):
            job, _ = services.launch_job(
                team["tenant"], team[who], actor=team[who], spec_data=spec, name=name
            )
        job.refresh_from_db()
        return job

    return launch


def ddp(**task_fields):
    spec = copy.deepcopy(PYTORCH_DDP)
    for task in spec["tasks"]:
        task.update(task_fields)
    return spec


def bound(pods):
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


def test_a_job_runs_and_completes_when_its_command_exits_0(cluster, team, templates, launch):
    job = launch(templates["single-gpu"], name="done-ok", overrides=exits(0, after=2))
    job = settle(job, JobState.RUNNING)
    [pod] = job_pods(cluster, job)
    assert pod["spec"]["nodeName"].startswith("kwok-")
    assert job.counts["running"] == 1
    job = settle(job, JobState.SUCCEEDED)
    assert job.phase == "Completed"
    assert job.started_at is not None
    assert job.finished_at >= job.started_at
    assert [e.message for e in job.events.filter(kind="state")][0] == "running → succeeded"


def test_a_failing_command_fails_the_job(cluster, team, templates, launch):
    job = launch(templates["single-gpu"], name="done-bad", overrides=exits(3))
    job = settle(job, JobState.FAILED, timeout=90)
    assert job.phase == "Failed"


def test_a_gang_that_does_not_fit_starts_no_pod_and_says_why(team, launch_spec, cluster):
    # 3 pods x 8 A100s; the cluster has 2 A100 nodes: all or nothing, so nothing runs.
    job = launch_spec(ddp(gpu_product=A100, cpu="8", memory="64Gi"), "gang-a100")
    job = settle(job, JobState.PENDING)
    deadline = time.monotonic() + 20
    while "GPUs" not in job.pending_reason and time.monotonic() < deadline:
        job = settle(job, JobState.PENDING)
    assert job.pending_reason.startswith("Not enough free GPUs on any node right now")
    time.sleep(2)  # several scheduling cycles
    assert bound(job_pods(cluster, job)) == []


def test_a_full_queue_keeps_the_job_pending_and_says_so(cluster, team, templates, launch):
    # Someone lowered the tenant's Volcano queue by hand: Volcano reports this only in Events
    # on the PodGroup, with no condition.
    by_hand = Cluster(cluster.api_client, field_manager="someone-by-hand")
    cap = {"nvidia.com/gpu": "0"}
    by_hand.apply_one(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": {"name": team["tenant"].queue_name},
            "spec": {"capability": cap, "deserved": cap},
        }
    )
    job = launch(templates["single-gpu"], name="queue-full")
    deadline = time.monotonic() + 30
    while "queue" not in job.pending_reason and time.monotonic() < deadline:
        job = settle(job, JobState.PENDING)
    assert job.pending_reason.startswith("The tenant's Volcano queue has no GPUs left")
    assert job_pods(cluster, job) == []


def test_jobs_waiting_in_one_namespace_share_one_read_of_its_events(
    cluster, team, templates, launch
):
    # The API server keeps no watch cache for Events: each LIST reads the namespace's whole
    # Event history from etcd. Reading why each waiting job waits with LISTs of its own cost
    # the waiting jobs times that history every few seconds; the namespace's jobs share one.
    by_hand = Cluster(cluster.api_client, field_manager="someone-by-hand")
    cap = {"nvidia.com/gpu": "0"}
    queue = {"name": team["tenant"].queue_name}
    by_hand.apply_one(
        {
            "apiVersion": QUEUE_API,
            "kind": "Queue",
            "metadata": queue,
            "spec": {"capability": cap, "deserved": cap},
        }
    )
    jobs = [launch(templates["single-gpu"], name=f"full-{n}") for n in range(4)]
    for n, job in enumerate(jobs):
        deadline = time.monotonic() + 30
        while "queue" not in job.pending_reason and time.monotonic() < deadline:
            job = settle(job, JobState.PENDING)
        assert job.pending_reason.startswith("The tenant's Volcano queue has no GPUs left")
        jobs[n] = job
    time.sleep(tasks.PENDING_REASON_EVERY + 0.5)  # why each job waits is due to be read again
    Job.objects.filter(pk__in=[job.pk for job in jobs]).update(pending_reason="")
    with cluster_lists() as lists:
        for job in jobs:
            reconcile_job(job.pk)
    reads = [options.get("fields") for kind, options in lists if kind == "Event"]
    for job in jobs:
        job.refresh_from_db()
        assert job.pending_reason.startswith("The tenant's Volcano queue has no GPUs left")
    assert len(reads) == 1 + len(TELLING_REASONS), reads  # Warnings, and each telling reason


def test_pods_the_resource_quota_refuses_are_explained(cluster, team, templates, launch):
    # The ResourceQuota edited by hand below what the portal admitted: Volcano's controller
    # cannot create the pod. The job says so instead of waiting silently.
    by_hand = Cluster(cluster.api_client, field_manager="someone-by-hand")
    quota = cluster.list("v1", "ResourceQuota", namespace=team["tenant"].namespace)[0]
    by_hand.apply_one(
        {
            "apiVersion": "v1",
            "kind": "ResourceQuota",
            "metadata": {"name": quota["metadata"]["name"], "namespace": team["tenant"].namespace},
            "spec": {"hard": {"requests.cpu": "1"}},
        }
    )
    time.sleep(1)  # the quota's status follows within the controller's sync
    job = launch(templates["single-gpu"], name="quota-cut")
    deadline = time.monotonic() + 40
    while "ResourceQuota" not in job.pending_reason and time.monotonic() < deadline:
        job = settle(job, JobState.PENDING)
    assert "The tenant's ResourceQuota refused some of the job's pods" in job.pending_reason
    assert "exceeded quota" in job.pending_reason


def test_a_claim_the_resource_quota_still_counts_against_waits_and_goes_ahead_once_freed(
    cluster, team, templates, django_capture_on_commit_callbacks
):
    # A claim the ResourceQuota counts and the portal does not (as one being deleted after its
    # job, or made by hand): the quota refuses the job's claim with the tenant's own limit. The
    # job waits, saying why, and is submitted once the storage is free.
    tenant = team["tenant"]
    stray = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "made-by-hand", "namespace": tenant.namespace},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": f"{tenant.storage_quota_gib}Gi"}},
        },
    }
    Cluster(cluster.api_client, field_manager="someone-by-hand").apply_one(stray)
    with django_capture_on_commit_callbacks(execute=True):
        job, _ = services.launch_job(
            tenant, team["bob"], actor=team["bob"], template_version=templates["single-gpu"]
        )
    job = settle(job, JobState.PENDING)
    assert job.pending_reason.startswith("The tenant's ResourceQuota has no room")
    assert cluster.get(VCJOB_API, "Job", job.name, tenant.namespace) is None
    cluster.delete("v1", "PersistentVolumeClaim", "made-by-hand", tenant.namespace)
    deadline = time.monotonic() + 60
    while cluster.get(VCJOB_API, "Job", job.name, tenant.namespace) is None:
        assert time.monotonic() < deadline, job.pending_reason
        job = settle(job, JobState.PENDING, JobState.RUNNING)
    assert job.sync_state == "in_sync"


def test_a_job_beyond_the_tenants_cpu_quota_is_refused_at_launch(team, launch_spec):
    # 9 pods x 32 cores = 288 > the tenant's 256: the queue and the quota would never let it run.
    spec = ddp(gpus=0)
    spec["tasks"][1]["replicas"] = 8
    with pytest.raises(ValidationError) as caught:
        launch_spec(spec, "too-much-cpu")
    assert "288 CPU cores" in str(caught.value.message_dict["tasks.cpu"])


def test_jobs_beyond_the_free_cpu_wait_in_the_portal_not_half_created(cluster, team, launch_spec):
    # Each 3 pods x 64 cores (GPUs to spare): the second waits in the portal's queue until the
    # first finishes, instead of being sent to a queue and a quota that cannot hold it.
    spec = ddp(cpu="64", gpus=1)
    spec["command"] = ["sh", "-c", "sleep 3; exit 0"]
    first = launch_spec(spec, "cpu-1")
    second = launch_spec(spec, "cpu-2")
    assert second.state == JobState.QUEUED
    settle(first, JobState.SUCCEEDED, timeout=90)
    second.refresh_from_db()
    assert second.state != JobState.QUEUED
    settle(second, JobState.SUCCEEDED, timeout=90)


def test_cancel_aborts_through_volcanos_command(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    job = launch(templates["single-gpu"], name="to-cancel")
    job = settle(job, JobState.RUNNING)
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(job, actor=team["bob"])
    job = settle(job, JobState.CANCELLED, timeout=60)
    assert job.phase in ("Aborted", "Terminated")
    vcjob = cluster.get(VCJOB_API, "Job", job.name, team["tenant"].namespace)
    assert vcjob["status"]["state"]["phase"] == job.phase
    deadline = time.monotonic() + 30
    while job_pods(cluster, job) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert job_pods(cluster, job) == []


def test_deleting_a_running_job_removes_its_pods(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    job = launch(templates["jupyter-ssh"], name="to-delete")
    job = settle(job, JobState.RUNNING)
    assert len(job_pods(cluster, job)) == 1
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_job(job, actor=team["bob"])
    deadline = time.monotonic() + 30
    while job_pods(cluster, job) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert job_pods(cluster, job) == []
    assert cluster.get(VCJOB_API, "Job", job.name, team["tenant"].namespace) is None


def slow_stopper_and_next(team, templates, launch, capture, name, next_name):
    """In a tenant of 1 GPU: a running job whose pod takes 6 s to stop (a trainer saving a
    checkpoint on SIGTERM), and the next job, queued behind it."""
    with capture(execute=True):
        tenant_services.update_tenant(team["tenant"], actor=team["admin"], gpu_quota=1)
    saving = {"command": "sh -c \"trap 'sleep 6' TERM; python train.py\""}
    first = settle(launch(templates["single-gpu"], name=name, overrides=saving), JobState.RUNNING)
    with capture(execute=True):
        second, _ = services.launch_job(
            team["tenant"],
            team["bob"],
            actor=team["bob"],
            template_version=templates["single-gpu"],
            name=next_name,
        )
    assert Job.objects.get(pk=second.pk).state == JobState.QUEUED
    return first, second


def test_a_deleted_job_holds_its_quota_until_its_pods_have_stopped(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    # A trainer saving a checkpoint on SIGTERM takes seconds to stop, and the tenant's
    # ResourceQuota counts its pod until then. The next job admitted sooner would have Volcano
    # take its gang while the ResourceQuota refused its pods: half-created.
    tenant = team["tenant"]
    first, second = slow_stopper_and_next(
        team, templates, launch, django_capture_on_commit_callbacks, "saving", "next-in-line"
    )
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_job(first, actor=team["bob"])
    assert cluster.get(VCJOB_API, "Job", first.name, tenant.namespace) is None
    with pytest.raises(ValidationError) as caught:  # its name is free once it is gone
        launch(templates["single-gpu"], name="saving")
    assert "still being deleted while its pods stop" in caught.value.message_dict["name"][0]
    deleted_at = time.monotonic()
    while time.monotonic() < deleted_at + 30:
        reconcile_job(first.pk)  # what the worker's requeue does every few seconds
        if not Job.objects.filter(pk=first.pk).exists():
            break
        assert Job.objects.get(pk=second.pk).state == JobState.QUEUED
        time.sleep(0.5)
    assert job_pods(cluster, first) == []  # its row went once its pod had
    assert time.monotonic() - deleted_at >= 5  # its pod stopped for seconds, not at once
    second = settle(submitted(Job.objects.get(pk=second.pk)), JobState.RUNNING)
    assert second.counts["running"] == 1


def test_a_job_that_ended_while_its_pods_stop_holds_its_quota_until_they_have(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    """Volcano may end a job while its pods still stop: its last retry failed (RestartJob says
    Failed at once while it kills the other pods), or its Volcano job was deleted by hand, as
    here. The ResourceQuota counts a stopping pod: the next job admitted sooner would have
    Volcano take its gang while the ResourceQuota refused its pods, half-created."""
    tenant = team["tenant"]
    first, second = slow_stopper_and_next(
        team, templates, launch, django_capture_on_commit_callbacks, "ending", "after-it"
    )
    cluster.delete(VCJOB_API, "Job", first.name, tenant.namespace)  # someone's kubectl delete
    ended_at = time.monotonic()
    while time.monotonic() < ended_at + 30:
        reconcile_job(first.pk)  # what the worker's requeue does every few seconds
        first.refresh_from_db()
        if first.quota_released_at:
            break
        assert Job.objects.get(pk=second.pk).state == JobState.QUEUED
        time.sleep(0.5)
    assert first.state == JobState.FAILED
    assert "deleted outside the portal" in first.message
    assert time.monotonic() - ended_at >= 5  # its pod stopped for seconds, not at once
    second = settle(submitted(Job.objects.get(pk=second.pk)), JobState.RUNNING)
    assert second.counts["running"] == 1


def test_a_job_whose_data_volume_was_deleted_is_not_relaunched_without_it(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    """Relaunched without /data, it would read nothing and write its outputs to a disk that
    goes with it."""
    with django_capture_on_commit_callbacks(execute=True):
        volume = services.create_data_volume(
            team["tenant"], name="corpus", size_gib=10, actor=team["bob"]
        )
    job = launch(templates["single-gpu"], name="reads", overrides=exits(0), data_volume=volume)
    job = settle(job, JobState.SUCCEEDED, timeout=60)
    with django_capture_on_commit_callbacks(execute=True):
        services.delete_data_volume(volume, actor=team["bob"])
    job.refresh_from_db()
    assert job.data_volume is None
    with pytest.raises(ValidationError) as caught:
        services.relaunch_job(job, actor=team["bob"])
    assert caught.value.message_dict["data_volume"] == [
        "Its data volume corpus was deleted; launch it from its template with another volume, "
        "or none."
    ]
    assert not Job.objects.exclude(pk=job.pk).filter(tenant=team["tenant"]).exists()

    api = APIClient()  # nor is `delete_data=yes` (or any word but true/false) taken as no
    api.force_login(team["bob"])
    url = f"/api/v1/tenants/{team['tenant'].slug}/jobs/{job.name}/"
    refused = api.delete(f"{url}?delete_data=yes")
    assert refused.status_code == 400
    assert refused.json()["errors"]["delete_data"][0]["message"] == "Use true or false."
    assert Job.objects.filter(pk=job.pk, delete_requested=False).exists()


def test_a_claim_bound_just_after_the_run_stopped_waiting_is_submitted_by_that_run(
    cluster, team, templates, monkeypatch, django_capture_on_commit_callbacks
):
    """A run that does not wait for the claim to bind (a task waits for a worker) shows the job
    Pending, and the collector submits it when the claim binds. A bind that comes between the
    two, after the run read the claim and before the job shows Pending, the collector passes
    over (the job is not Pending yet): without a second read, the job waited for the run's
    re-check, seconds later. Here the claim binds in that instant: the run submits the job."""
    namespace = team["tenant"].namespace
    real = tasks.wait_bound

    def bound_just_after(cluster_, namespace_, claims, seconds):
        unbound = real(cluster_, namespace_, claims, 0)  # no wait, as with a task waiting

        def all_bound():
            phases = [
                (cluster.get("v1", "PersistentVolumeClaim", n, namespace) or {}).get("status", {})
                for n in unbound
            ]
            return all(p.get("phase") == "Bound" for p in phases)

        wait_for(all_bound, timeout=30, message="the claim to bind")
        return unbound  # as this run read them: before the bind

    monkeypatch.setattr(tasks, "wait_bound", bound_just_after)
    with django_capture_on_commit_callbacks(execute=True):  # the launch's own run, inline
        job = launch_as(team, "bob", templates["single-gpu"], name="bound-late")
    job.refresh_from_db()
    assert job.events.filter(kind="submitted").exists(), job.pending_reason
    assert cluster.get(VCJOB_API, "Job", "bound-late", namespace) is not None


def test_a_job_follows_volcano_within_seconds_without_waiting_for_the_resync(
    cluster, team, templates, worker, collector, settings
):
    # Only the real worker and the collector's watch on Volcano jobs: no beat, no resync.
    job, _ = services.launch_job(
        team["tenant"],
        team["bob"],
        actor=team["bob"],
        template_version=templates["single-gpu"],
        overrides=exits(0, after=3),
        name="watched",
    )
    started = time.monotonic()
    seen = []
    while time.monotonic() - started < 30:
        job.refresh_from_db()
        if not seen or seen[-1] != job.state:
            seen.append(job.state)
        if job.state == JobState.SUCCEEDED:
            break
        time.sleep(0.1)
    assert seen[-1] == JobState.SUCCEEDED, seen
    assert JobState.RUNNING in seen
    assert time.monotonic() - started < 15  # 3 s of "training", the rest is following it


def leaf_of(cluster):
    """Node name -> the tier-1 HyperNode (leaf switch) it hangs off."""
    leaves = {}
    for hypernode in cluster.list("topology.volcano.sh/v1alpha1", "HyperNode"):
        if hypernode["spec"]["tier"] == 1:
            for member in hypernode["spec"]["members"]:
                leaves[member["selector"]["exactMatch"]["name"]] = hypernode["metadata"]["name"]
    return leaves


def test_hard_topology_keeps_a_gang_under_one_leaf_switch_or_waits(cluster, team, launch_spec):
    # A leaf switch has two 8-GPU nodes. Two pods of 8 GPUs fit under one; three do not, and
    # with `hard` topology at tier 1 Volcano places none of them rather than spread them.
    topology = {"mode": "hard", "highest_tier_allowed": 1}
    pair = ddp(cpu="8", memory="64Gi", gpu_product="NVIDIA-H100-80GB-HBM3")
    pair["tasks"][1]["replicas"] = 1
    pair["network_topology"] = topology
    pair["command"] = ["sh", "-c", "sleep 4; exit 0"]
    job = settle(launch_spec(pair, "topo-pair"), JobState.RUNNING)
    nodes = [p["spec"]["nodeName"] for p in job_pods(cluster, job)]
    leaves = leaf_of(cluster)
    assert len(nodes) == 2
    assert leaves[nodes[0]] == leaves[nodes[1]], nodes
    settle(job, JobState.SUCCEEDED)  # its GPUs back to the tenant's quota

    triple = ddp(cpu="8", memory="64Gi", gpu_product="NVIDIA-H100-80GB-HBM3")
    triple["network_topology"] = topology
    waiting = settle(launch_spec(triple, "topo-triple"), JobState.PENDING)
    time.sleep(3)  # many scheduling cycles
    waiting = settle(waiting, JobState.PENDING)
    assert bound(job_pods(cluster, waiting)) == []
    assert waiting.pending_reason


def test_a_restart_policy_reruns_the_job_until_its_retries_are_spent(cluster, team, launch_spec):
    spec = ddp(cpu="2", memory="8Gi", gpus=1)
    spec["tasks"] = spec["tasks"][:1]
    spec["tasks"][0]["policies"] = []
    spec["policies"] = [{"event": "PodFailed", "action": "RestartJob"}]
    spec["max_retry"] = 2
    spec["command"] = ["sh", "-c", "sleep 1; exit 1"]
    job = settle(launch_spec(spec, "retrier"), JobState.FAILED, timeout=120)
    vcjob = cluster.get(VCJOB_API, "Job", job.name, team["tenant"].namespace)
    assert vcjob["status"].get("retryCount", 0) >= 2
    states = [e.message for e in job.events.filter(kind="state")]
    assert states[0].endswith("→ failed")


def unprovisioned(klass):
    spec = ddp(cpu="2", memory="8Gi", gpus=1)
    spec["tasks"] = spec["tasks"][:1]
    spec["volumes"] = {"workspace_gib": 1, "storage_class": klass}
    return spec


def test_a_job_whose_volume_is_never_provisioned_waits_unsubmitted_and_says_why(
    cluster, team, launch_spec, silent_class
):
    # Volcano's scheduler would never look at the pods again once the claim binds
    # (volcano-sh/volcano#1983), so the portal submits the Volcano job only after that.
    job = launch_spec(unprovisioned(silent_class), "no-volume")
    deadline = time.monotonic() + 30
    while "provisioner" not in job.pending_reason and time.monotonic() < deadline:
        job = settle(job, JobState.PENDING)
    assert job.pending_reason.startswith("Waiting for the cluster's storage provisioner")
    assert cluster.get(VCJOB_API, "Job", job.name, team["tenant"].namespace) is None


def test_cancelling_a_job_that_waits_for_its_volume_ends_it_and_frees_the_tenants_gpus(
    cluster, team, launch_spec, silent_class, django_capture_on_commit_callbacks
):
    """It would wait for a claim that never binds: the cancel ends it now, with nothing of it
    left in the cluster, and its GPUs count no more."""
    from jobs.admission import free_gpus

    namespace = team["tenant"].namespace
    job = settle(launch_spec(unprovisioned(silent_class), "stuck-cancel"), JobState.PENDING)
    assert cluster.get("v1", "PersistentVolumeClaim", f"{job.name}-workspace", namespace)
    free = free_gpus(team["tenant"])
    with django_capture_on_commit_callbacks(execute=True):
        services.cancel_job(job, actor=team["bob"])
    job.refresh_from_db()
    assert (job.state, job.message) == (JobState.CANCELLED, "Cancelled before it reached Volcano.")
    assert free_gpus(team["tenant"]) == free + job.gpus
    assert cluster.get(VCJOB_API, "Job", job.name, namespace) is None
    wait_for(
        lambda: (
            cluster.get("v1", "PersistentVolumeClaim", f"{job.name}-workspace", namespace) is None
        ),
        message="the cancelled job's claim to go",
    )


def test_a_running_job_keeps_running_when_its_data_volume_is_refused_by_the_cluster(
    cluster, team, templates, launch, django_capture_on_commit_callbacks
):
    """Its data volume's claim is its volume's reconciler's to keep once the job is submitted:
    a refusal there (here a size below the bound claim's, as a hand edit leaves it) is that
    volume's, and never turns a running job into an error that would hide its end."""
    from jobs.models import DataVolume

    with django_capture_on_commit_callbacks(execute=True):
        volume = services.create_data_volume(
            team["tenant"], name="corpus", size_gib=10, actor=team["bob"]
        )
    job = settle(
        launch(templates["single-gpu"], name="reads-corpus", data_volume=volume), JobState.RUNNING
    )
    DataVolume.objects.filter(pk=volume.pk).update(size_gib=5)
    for _ in range(2):
        reconcile_job(job.pk)
    job.refresh_from_db()
    assert (job.state, job.sync_state) == (JobState.RUNNING, "in_sync")


def test_a_claim_deleted_by_hand_while_the_job_waits_for_it_is_made_again_by_the_next_run(
    cluster, team, launch_spec, silent_class
):
    # The runs that follow a job's first, while its claim binds, read the claim rather than
    # apply it again: one that finds it gone applies it.
    job = settle(launch_spec(unprovisioned(silent_class), "claim-gone"), JobState.PENDING)
    namespace, claim = team["tenant"].namespace, names.workspace_claim(job.name)
    assert cluster.get("v1", "PersistentVolumeClaim", claim, namespace) is not None
    cluster.delete("v1", "PersistentVolumeClaim", claim, namespace)
    wait_for(
        lambda: cluster.get("v1", "PersistentVolumeClaim", claim, namespace) is None,
        timeout=30,
        message="the claim deleted",
    )
    reconcile_job(job.pk)
    made = cluster.get("v1", "PersistentVolumeClaim", claim, namespace)
    assert made is not None
    assert made["spec"]["storageClassName"] == silent_class
    assert cluster.get(VCJOB_API, "Job", job.name, namespace) is None


@pytest.fixture
def two_tenants(db, cluster, django_capture_on_commit_callbacks):
    """Two tenants that may each borrow the whole H100 fleet (64 GPUs) but deserve half."""
    from tenants import services as tenant_services
    from tenants.choices import Role
    from tenants.models import Membership
    from tests.tenants.conftest import make_user

    admin = make_user("admin-reclaim", staff=True)
    made = []
    for prefix in ("lend", "need"):
        with django_capture_on_commit_callbacks(execute=True):
            tenant = tenant_services.create_tenant(
                actor=admin,
                slug=f"{prefix}-{uuid.uuid4().hex[:6]}",
                display_name=prefix,
                gpu_quota=64,
                queue_deserved_gpus=32,
                cpu_quota=512,
                memory_quota_gib=4096,
                queue_weight=1,
                max_running_jobs=16,
                storage_quota_gib=4096,  # each DDP workspace takes 200 GiB
            )
        user = make_user(f"{prefix}-user")
        Membership.objects.create(tenant=tenant, user=user, role=Role.RESEARCHER)
        made.append((tenant, user))
    yield made
    for tenant, _ in made:
        cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
        cluster.delete("v1", "Namespace", tenant.namespace)


def test_a_tenant_within_its_share_reclaims_gpus_another_tenant_borrowed(
    cluster, two_tenants, django_capture_on_commit_callbacks
):
    (lender, lender_user), (needer, needer_user) = two_tenants
    h100 = ddp(cpu="4", memory="32Gi", gpu_product="NVIDIA-H100-80GB-HBM3")
    h100["tasks"] = h100["tasks"][:1]  # one pod of 8 GPUs, runs until stopped

    def launch(tenant, user, name):
        with django_capture_on_commit_callbacks(execute=True):
            job, _ = services.launch_job(tenant, user, actor=user, spec_data=h100, name=name)
        return job

    borrowed = [launch(lender, lender_user, f"borrow-{i}") for i in range(8)]  # all 64 GPUs
    for job in borrowed:
        settle(job, JobState.RUNNING, timeout=90)
    needed = launch(needer, needer_user, "needed")
    settle(needed, JobState.RUNNING, timeout=90)  # Volcano evicted a borrowed pod for it

    def lender_running():
        pods = cluster.list("v1", "Pod", namespace=lender.namespace)
        return [p for p in pods if (p.get("status") or {}).get("phase") == "Running"]

    wait_for(lambda: len(lender_running()) == 7, timeout=30, message="one borrowed pod reclaimed")
    # The borrower's reclaimed job says what happened to it, and waits for GPUs again.
    states = {job.name: settle(job, JobState.RUNNING, JobState.PENDING).state for job in borrowed}
    [reclaimed] = [name for name, state in states.items() if state == JobState.PENDING]
    job = next(j for j in borrowed if j.name == reclaimed)
    assert job.events.filter(kind="state", message__contains="running → pending").exists()
    [evicted] = job.events.filter(kind="evicted")
    assert "reclaimed this job's GPUs for another tenant" in evicted.message
    settle(job, JobState.PENDING)
    assert job.events.filter(kind="evicted").count() == 1  # said once
    others = [j for j in borrowed if j.name != reclaimed]
    assert not any(j.events.filter(kind="evicted").exists() for j in others)
