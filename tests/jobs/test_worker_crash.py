"""Killing the Celery worker in the middle of reconciling converges after a restart: the same
objects, no duplicates, no orphans."""

import signal

import pytest

from jobs import services
from jobs.choices import JobState
from jobs.models import Job
from jobs.tasks import resync_jobs
from k8s_adapters.labels import JOB
from k8s_adapters.volcano import VCJOB_API
from tenants.models import Tenant
from tests.conftest import worker_process
from tests.helpers import wait_for


@pytest.mark.django_db(transaction=True)
def test_a_killed_worker_converges_after_restart(
    cluster, team, templates, session_worker, queued_tasks, tmp_path, settings
):
    settings.RECONCILE_DEDUP_SECONDS = 2
    Tenant.objects.filter(pk=team["tenant"].pk).update(
        gpu_quota=100, cpu_quota=400, max_running_jobs=100
    )
    namespace = team["tenant"].namespace
    session_worker.stop()  # only the worker this test kills may take these tasks
    with worker_process(tmp_path / "first.log") as worker:
        jobs = [
            services.launch_job(
                team["tenant"],
                team["bob"],
                actor=team["bob"],
                template_version=templates["single-gpu"],
                overrides={"gpus": 1, "workspace_gib": 10},
                name=f"crash-{i:02d}",
            )[0]
            for i in range(40)
        ]
        wait_for(
            lambda: cluster.list(VCJOB_API, "Job", namespace=namespace),
            message="the first Volcano job",
        )
        worker.send_signal(signal.SIGKILL)
        worker.wait(10)
    done_before_kill = len(cluster.list(VCJOB_API, "Job", namespace=namespace))
    assert done_before_kill < len(jobs), "the worker finished everything before it was killed"

    with worker_process(tmp_path / "replacement.log"):

        def converged():
            resync_jobs()  # what beat does every few seconds
            return len(cluster.list(VCJOB_API, "Job", namespace=namespace)) == len(jobs)

        wait_for(converged, timeout=60, interval=3, message="every job in the cluster")
        wait_for(
            lambda: all(j.state in (JobState.PENDING, JobState.RUNNING) for j in Job.objects.all()),
            timeout=30,
            message="every job to observe its Volcano job",
        )

    names = sorted(j.name for j in jobs)
    for kind in [(VCJOB_API, "Job"), ("v1", "PersistentVolumeClaim")]:
        objects = cluster.list(*kind, namespace=namespace)
        assert sorted(o["metadata"]["labels"][JOB] for o in objects) == names
    assert sorted(
        p["metadata"]["name"]
        for p in cluster.list("v1", "PersistentVolumeClaim", namespace=namespace)
    ) == [f"{n}-workspace" for n in names]
