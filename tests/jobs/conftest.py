import time
import uuid

import pytest
from django.core.management import call_command

from jobs import services
from jobs.choices import JobState
from jobs.models import Job, JobTemplate
from jobs.tasks import reconcile_job
from k8s_adapters.tenant import QUEUE_API
from tenants import services as tenant_services
from tenants.choices import Role
from tenants.models import Membership
from tests.tenants.conftest import make_user


@pytest.fixture
def templates(db):
    call_command("seed_templates", verbosity=0)
    return {t.name: t.latest for t in JobTemplate.objects.all()}


@pytest.fixture
def team(db, cluster, django_capture_on_commit_callbacks):
    """A reconciled tenant (namespace and queue in the API server) with alice (tenant admin),
    bob (researcher), dave (viewer); charlie is in another tenant."""
    admin = make_user("admin", staff=True)
    slug = f"team-{uuid.uuid4().hex[:8]}"
    with django_capture_on_commit_callbacks(execute=True):
        tenant = tenant_services.create_tenant(
            actor=admin,
            slug=slug,
            display_name="Team",
            gpu_quota=24,
            cpu_quota=256,  # a DDP job (3 x 32 cores) fits
            memory_quota_gib=2048,
            queue_weight=1,
        )
    users = {"admin": admin}
    for name, role in [("alice", Role.ADMIN), ("bob", Role.RESEARCHER), ("dave", Role.VIEWER)]:
        users[name] = make_user(name)
        Membership.objects.create(tenant=tenant, user=users[name], role=role)
    users["charlie"] = make_user("charlie")
    yield {"tenant": tenant, **users}
    cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
    cluster.delete("v1", "Namespace", tenant.namespace)


@pytest.fixture
def launch(team, django_capture_on_commit_callbacks):
    """Launch a template version as a team member, reconciled inline; the job, refreshed."""

    def launch(version, who="bob", **kwargs):
        with django_capture_on_commit_callbacks(execute=True):
            job, warnings = services.launch_job(
                team["tenant"], team[who], actor=team[who], template_version=version, **kwargs
            )
        return submitted(job)

    return launch


def launch_as(team, who, version, **kwargs):
    """A launch of a template version by a team member, not reconciled: the job, or the
    refusal raised."""
    return services.launch_job(
        team["tenant"], team[who], actor=team[who], template_version=version, **kwargs
    )[0]


def settle(job, *states, timeout=60):
    """Reconcile the job (what the periodic resync does) until it reaches one of `states`; the
    job, refreshed. Fails with the job's own account of itself when it does not."""
    deadline = time.monotonic() + timeout
    while True:
        reconcile_job(job.pk)
        job.refresh_from_db()
        if job.state in states:
            return job
        if time.monotonic() > deadline:
            raise AssertionError(
                f"job {job.name} is {job.state} (phase {job.phase or '-'}) after {timeout}s, "
                f"not {' or '.join(states)}: {job.pending_reason or job.message}"
            )
        time.sleep(0.3)


def submitted(job, timeout=30):
    """The job, reconciled (as the collector's watch on its claim would) until its Volcano job
    exists: the portal submits it once the workspace claim is bound. Queued jobs stay queued."""
    from core.cluster import get_cluster
    from k8s_adapters.volcano import VCJOB_API

    deadline = time.monotonic() + timeout
    while True:
        job.refresh_from_db()
        if job.state not in (JobState.SUBMITTING, JobState.PENDING) or job.phase:
            return job
        if get_cluster().get(VCJOB_API, "Job", job.name, job.tenant.namespace):
            return job
        if time.monotonic() > deadline:
            raise AssertionError(f"{job.name} never submitted: {job.pending_reason}")
        reconcile_job(job.pk)
        time.sleep(0.1)


def deleted(job, timeout=30):
    """Reconcile a job asked to be deleted (as the worker's requeue does while its pods stop)
    until its row is gone."""
    deadline = time.monotonic() + timeout
    while Job.objects.filter(pk=job.pk).exists():
        if time.monotonic() > deadline:
            raise AssertionError(f"{job.name} still there {timeout}s after its delete")
        reconcile_job(job.pk)
        time.sleep(0.2)


def job_pods(cluster, job):
    """The job's pods as Volcano's job controller created them."""
    return cluster.list(
        "v1", "Pod", namespace=job.tenant.namespace, labels={"volcano.sh/job-name": job.name}
    )


def opened_endpoint(browser, endpoint):
    """The endpoint cookie a browser signed in to the portal (`browser`, a test client) ends
    with, through forward-auth's sign-in redirect, the portal's hand-off and the code's
    return with the state cookie the redirect set."""
    from urllib.parse import parse_qs, urlsplit

    from jobs.forward_auth import decide

    first = decide(endpoint.pk, uri="/", redirect=True, accept="text/html")
    state = first.headers["Set-Cookie"].split(";", 1)[0]
    start = urlsplit(first.headers["Location"])
    back = browser.get(f"{start.path}?{start.query}")
    code = parse_qs(urlsplit(back["Location"]).query)["gpp_code"][0]
    landed = decide(
        endpoint.pk, uri=f"/?gpp_code={code}", cookie=state, redirect=True, accept="text/html"
    )
    assert landed.status == 302, landed.body
    return landed.headers["Set-Cookie"].split(";", 1)[0]
