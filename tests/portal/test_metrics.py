"""Prometheus metrics: reconcile runs, request latency and forward-auth decisions are counted
as they happen, and each pod's exporter serves them, with queue depths and the collector's lag,
on a port of its own; the portal's own address has no /metrics."""

import socket
import sys
import uuid

import pytest
import requests
from prometheus_client import REGISTRY
from prometheus_client.parser import text_string_to_metric_families

from core.models import SyncState
from k8s_adapters.tenant import QUEUE_API
from tenants import services
from tenants.models import Tenant
from tenants.tasks import reconcile_tenant
from tests import processes
from tests.conftest import _database_url, worker_process
from tests.helpers import wait_for


def _value(name, **labels):
    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.fixture
def tenants(cluster):
    made = []

    def make(slug=None):
        slug = slug or f"m-{uuid.uuid4().hex[:8]}"
        made.append(slug)
        return slug

    yield make
    for tenant in Tenant.objects.filter(slug__in=made):
        cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
        cluster.delete("v1", "Namespace", tenant.namespace)


@pytest.mark.django_db
def test_reconcile_runs_are_counted_and_timed_by_kind_and_outcome(cluster, tenants):
    ok, failed = (
        _value("portal_reconcile_total", kind="tenant", outcome="in_sync"),
        _value("portal_reconcile_total", kind="tenant", outcome="error"),
    )
    runs = _value("portal_reconcile_duration_seconds_count", kind="tenant")
    good = Tenant.objects.create(slug=tenants(), display_name="Counted", gpu_quota=1)
    reconcile_tenant(good.pk)
    squatted = tenants()
    cluster.apply_one(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"tenant-{squatted}"}}
    )
    bad = Tenant.objects.create(slug=squatted, display_name="Squatted", gpu_quota=1)
    reconcile_tenant(bad.pk)
    bad.refresh_from_db()
    assert bad.sync_state == SyncState.ERROR
    assert _value("portal_reconcile_total", kind="tenant", outcome="in_sync") == ok + 1
    assert _value("portal_reconcile_total", kind="tenant", outcome="error") == failed + 1
    assert _value("portal_reconcile_duration_seconds_count", kind="tenant") == runs + 2
    cluster.delete("v1", "Namespace", f"tenant-{squatted}")


@pytest.mark.django_db
def test_requests_are_timed_by_view_and_forward_auth_decisions_counted(client):
    before = _value(
        "portal_http_request_duration_seconds_count", view="healthz", method="GET", status="200"
    )
    unsigned = _value("portal_forward_auth_decisions_total", status="401")
    assert client.get("/healthz").status_code == 200
    assert client.get("/auth/endpoint/999999999").status_code == 401
    assert (
        _value(
            "portal_http_request_duration_seconds_count",
            view="healthz",
            method="GET",
            status="200",
        )
        == before + 1
    )
    assert _value("portal_forward_auth_decisions_total", status="401") == unsigned + 1


@pytest.mark.django_db
def test_the_portals_own_address_serves_no_metrics(client):
    assert client.get("/metrics").status_code == 404


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _scrape(port):
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=5).text
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_the_exporter_serves_what_a_worker_process_counted(
    cluster, session_worker, queued_tasks, tenants, settings, tmp_path
):
    session_worker.stop()  # only this test's worker (writing metrics) takes these tasks
    folder = tmp_path / "metrics"
    folder.mkdir()
    port = _free_port()
    env = {
        "DATABASE_URL": _database_url("metrics"),
        "REDIS_URL": settings.REDIS_URL,
        "KUBECONFIG": settings.KUBECONFIG,
        "DEBUG": "true",
        "PROMETHEUS_MULTIPROC_DIR": str(folder),
    }
    exporter = [sys.executable, "manage.py", "metrics_exporter", "--port", str(port)]
    exporter += ["--bind", "127.0.0.1", "--live"]
    with (
        worker_process(tmp_path / "worker.log", PROMETHEUS_MULTIPROC_DIR=str(folder)),
        processes.running(
            exporter,
            log=tmp_path / "exporter.log",
            env=env,
            ready=lambda: _scrape(port),
            what="the metrics exporter",
        ),
    ):
        tenant = services.create_tenant(actor=None, slug=tenants(), display_name="Scraped")
        wait_for(
            lambda: Tenant.objects.get(pk=tenant.pk).sync_state == SyncState.IN_SYNC,
            timeout=60,
            message="the worker to reconcile the tenant",
        )
        samples = _scrape(port)
    assert samples[("portal_reconcile_total", (("kind", "tenant"), ("outcome", "in_sync")))] >= 1
    assert samples[("portal_task_queue_depth", (("queue", "celery"),))] >= 0
    assert ("portal_admission_queue_jobs", ()) in samples
