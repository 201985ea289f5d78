"""Tenants reconciled into the real API server: Namespace, ResourceQuota, LimitRange, Queue."""

import pytest

from core.models import SyncState
from k8s_adapters.tenant import QUEUE_API, QUOTA_NAME, RBAC_API
from k8s_adapters.volcano import VCJOB_API
from portal.management.commands import collect_cluster
from tenants import services, tasks
from tenants.choices import TenantState
from tenants.models import Tenant
from tenants.tasks import reconcile_tenant, resync_tenants
from tests.helpers import our_writes, wait_for

pytestmark = pytest.mark.django_db


@pytest.fixture
def create(admin_user, new_slug, django_capture_on_commit_callbacks):
    def create(**fields):
        fields.setdefault("slug", new_slug())
        fields.setdefault("display_name", "Team")
        with django_capture_on_commit_callbacks(execute=True):
            return services.create_tenant(actor=admin_user, **fields)

    return create


def objects(cluster, tenant):
    ns = tenant.namespace
    return {
        "namespace": cluster.get("v1", "Namespace", ns),
        "quota": cluster.get("v1", "ResourceQuota", "gpu-portal", ns),
        "limits": cluster.get("v1", "LimitRange", "gpu-portal", ns),
        "queue": cluster.get(QUEUE_API, "Queue", tenant.queue_name),
    }


def test_creating_a_tenant_creates_its_namespace_quota_limit_range_and_queue(cluster, create):
    tenant = create(gpu_quota=12, queue_weight=3, queue_guarantee_gpus=0)
    found = objects(cluster, tenant)
    assert found["namespace"]["metadata"]["labels"]["gpu-portal.io/tenant"] == tenant.slug
    assert found["quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
    assert found["limits"] is not None
    assert found["queue"]["spec"]["capability"]["nvidia.com/gpu"] == "12"
    assert found["queue"]["spec"]["weight"] == 3
    tenant.refresh_from_db()
    assert tenant.sync_state == SyncState.IN_SYNC
    assert tenant.synced_at is not None


def test_editing_the_quota_updates_quota_and_queue(
    cluster, create, admin_user, django_capture_on_commit_callbacks
):
    tenant = create(gpu_quota=4)
    with django_capture_on_commit_callbacks(execute=True):
        services.update_tenant(tenant, actor=admin_user, gpu_quota=10, queue_deserved_gpus=6)
    found = objects(cluster, tenant)
    assert found["quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "10"
    assert found["queue"]["spec"]["capability"]["nvidia.com/gpu"] == "10"
    assert found["queue"]["spec"]["deserved"]["nvidia.com/gpu"] == "6"


def test_reconciling_twice_writes_nothing_the_second_time(cluster, create):
    tenant = create(gpu_quota=4)
    before = {k: our_writes(v) for k, v in objects(cluster, tenant).items()}
    reconcile_tenant(tenant.pk)
    after = {k: our_writes(v) for k, v in objects(cluster, tenant).items()}
    assert before == after


def test_the_page_dates_the_last_change_not_a_check_it_cannot_date(
    cluster, create, admin_user, client, settings
):
    """A resync that finds nothing to change writes nothing, so the time the page shows is when
    the tenant's state last changed: it must not read as the last check."""
    tenant = create(gpu_quota=4)
    client.force_login(admin_user)
    reconcile_tenant(tenant.pk)  # a resync: nothing changes, nothing is written
    page = client.get(f"/tenants/{tenant.slug}/").content.decode()
    assert "in sync" in page
    assert "last synced" not in page
    assert f"unchanged for 0\xa0minutes; re-checked every {settings.RESYNC_INTERVAL} s" in page

    services.update_tenant(tenant, actor=admin_user, gpu_quota=6)  # no worker runs it here
    page = client.get(f"/tenants/{tenant.slug}/sync/").content.decode()
    assert "waiting for a worker to apply the change" in page
    assert "unchanged for" not in page


def test_resync_repairs_objects_deleted_or_edited_by_hand(
    cluster, create, django_capture_on_commit_callbacks
):
    tenant = create(gpu_quota=4)
    cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
    cluster.delete("v1", "ResourceQuota", "gpu-portal", tenant.namespace)
    cluster.delete("v1", "LimitRange", "gpu-portal", tenant.namespace)
    with django_capture_on_commit_callbacks(execute=True):
        resync_tenants()
    found = objects(cluster, tenant)
    assert found["queue"]["spec"]["capability"]["nvidia.com/gpu"] == "4"
    assert found["quota"]["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"
    assert found["limits"] is not None

    hand = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "gpu-portal", "namespace": tenant.namespace},
        "spec": {"hard": {"requests.nvidia.com/gpu": "999"}},
    }
    cluster.__class__(cluster.api_client, field_manager="kubectl-edit").apply_one(hand)
    edited = cluster.get("v1", "ResourceQuota", "gpu-portal", tenant.namespace)
    assert edited["spec"]["hard"]["requests.nvidia.com/gpu"] == "999"
    with django_capture_on_commit_callbacks(execute=True):
        resync_tenants()
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", tenant.namespace)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "4"


def test_each_tenant_namespace_gets_the_binding_the_web_reads_it_through(cluster, create, settings):
    """The web's account reads a job's pods, logs and Events in tenant namespaces alone, through
    a RoleBinding each tenant's reconcile makes (as the chart's worker account, the chart's
    role and web account, from the settings); one of an earlier role is removed. What the web
    may read through it: tests/deploy/test_rbac.py."""
    settings.WEB_TENANT_ROLE = settings.WEB_TENANT_ROLE or "gpu-portal-web-tenant"
    settings.WEB_ACCOUNT = settings.WEB_ACCOUNT or "gpu-portal/gpu-portal-web"
    role, (namespace, name) = settings.WEB_TENANT_ROLE, settings.WEB_ACCOUNT.split("/")
    tenant = create()
    tenant.refresh_from_db()
    assert tenant.sync_state == SyncState.IN_SYNC, tenant.sync_message
    binding = cluster.get(RBAC_API, "RoleBinding", role, tenant.namespace)
    assert binding["metadata"]["labels"]["gpu-portal.io/tenant"] == tenant.slug
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": role,
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]
    earlier = f"{role}-before"
    labels = binding["metadata"]["labels"]
    cluster.apply_one(
        {
            "apiVersion": RBAC_API,
            "kind": "RoleBinding",
            "metadata": {"name": earlier, "namespace": tenant.namespace, "labels": labels},
            "roleRef": {**binding["roleRef"], "name": earlier},
            "subjects": binding["subjects"],
        }
    )
    reconcile_tenant(tenant.pk)
    assert cluster.get(RBAC_API, "RoleBinding", earlier, tenant.namespace) is None
    assert cluster.get(RBAC_API, "RoleBinding", role, tenant.namespace) is not None


def test_a_namespace_taken_by_someone_else_is_recorded_as_a_sync_error(cluster, new_slug):
    slug = new_slug()
    cluster.apply_one(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"tenant-{slug}"}}
    )
    tenant = Tenant.objects.create(slug=slug, display_name="Squatted", gpu_quota=1)
    reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.sync_state == SyncState.ERROR
    assert "not managed by the portal" in tenant.sync_message
    assert cluster.get(QUEUE_API, "Queue", tenant.queue_name) is None


def test_quota_usage_flows_back_from_the_cluster(cluster, create):
    tenant = create(gpu_quota=8)
    gpu_pod(cluster, tenant.namespace, "p1", 3)
    reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.observed_usage["requests.nvidia.com/gpu"] == "3"


@pytest.mark.django_db(transaction=True)  # the collector's own write, outside a test's transaction
def test_a_run_never_writes_its_usage_over_a_newer_one_the_collector_wrote(
    cluster, create, monkeypatch
):
    """The collector's watch writes each change of the quota's usage as it comes: a run that
    read the quota before such a change keeps its older reading to itself."""
    tenant = create(gpu_quota=8)
    gpu_pod(cluster, tenant.namespace, "p1", 3)
    newer = {"requests.nvidia.com/gpu": "5", "pods": "2"}
    apply = tasks._apply

    def collector_writes_meanwhile(t):
        usage = apply(t)  # the quota as this run read it
        collector_writes(t, newer)
        return usage

    monkeypatch.setattr(tasks, "_apply", collector_writes_meanwhile)
    reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.observed_usage == newer
    monkeypatch.setattr(tasks, "_apply", apply)
    reconcile_tenant(tenant.pk)  # the next run writes what it reads over the one it loaded
    tenant.refresh_from_db()
    assert tenant.observed_usage["requests.nvidia.com/gpu"] == "3"


@pytest.mark.django_db(transaction=True)  # the collector's own write, outside a test's transaction
def test_a_run_keeps_its_older_usage_even_when_the_collector_wrote_back_what_it_loaded(
    cluster, create, monkeypatch
):
    """Two changes of the quota while a run reads it, the second back to the usage the run
    loaded (a pod started and stopped): the collector's last write is still the newer, and the
    run's reading, older than both, is not written over it."""
    tenant = create(gpu_quota=8)
    gpu_pod(cluster, tenant.namespace, "p1", 3)
    reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    loaded = tenant.observed_usage
    assert loaded["requests.nvidia.com/gpu"] == "3"
    older = {**loaded, "requests.nvidia.com/gpu": "1"}  # what the run read, before both

    def read_before_both_changes(t):
        collector_writes(t, {**loaded, "requests.nvidia.com/gpu": "7"})  # a pod started
        collector_writes(t, loaded)  # and stopped: back to what the run loaded
        return older

    monkeypatch.setattr(tasks, "_apply", read_before_both_changes)
    reconcile_tenant(tenant.pk)
    tenant.refresh_from_db()
    assert tenant.observed_usage == loaded
    assert tenant.sync_state == SyncState.IN_SYNC


def collector_writes(tenant, used):
    """The collector's watch seeing the tenant's ResourceQuota count `used` (its own code)."""
    seen = {"name": QUOTA_NAME, "namespace": tenant.namespace, "tenant": tenant.slug}
    collect_cluster.follow_quota({**seen, "used": {}}, {**seen, "used": used})


def gpu_pod(cluster, namespace, name, gpus):
    wait_for(
        lambda: (
            (cluster.get("v1", "ResourceQuota", "gpu-portal", namespace) or {})
            .get("status", {})
            .get("hard")
        ),
        message="the quota controller to pick up the quota",
    )
    return cluster.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.36",
                        "resources": {
                            "requests": {"nvidia.com/gpu": str(gpus)},
                            "limits": {"nvidia.com/gpu": str(gpus)},
                        },
                    }
                ]
            },
        }
    )


def vcjob(namespace, queue, name):
    """A Volcano job made without the portal (kubectl, a pipeline): its simulated pod runs for
    8 s on a KWOK node and ends with code 0."""
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "schedulerName": "volcano",
            "queue": queue,
            "minAvailable": 1,
            "tasks": [
                {
                    "name": "main",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [
                                {
                                    "name": "main",
                                    "image": "busybox:1.36",
                                    "command": ["sh", "-c", "sleep 8; exit 0"],
                                    "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                }
                            ],
                            "tolerations": [{"operator": "Exists"}],
                        }
                    },
                }
            ],
        },
    }


def phase(cluster, namespace, name):
    job = cluster.get("batch.volcano.sh/v1alpha1", "Job", name, namespace) or {}
    return ((job.get("status") or {}).get("state") or {}).get("phase")


def test_a_tenant_whose_namespace_someone_else_holds_is_archived_without_touching_it(
    cluster, new_slug, admin_user, django_capture_on_commit_callbacks
):
    """Its namespace was never the portal's: the jobs there are not the tenant's and do not keep
    it from being archived (nor may the web read them), and archiving leaves them be."""
    slug = new_slug()
    squatter = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"tenant-{slug}"}}
    cluster.apply_one(squatter)
    try:
        cluster.apply_one(vcjob(f"tenant-{slug}", "default", "theirs"))
        tenant = Tenant.objects.create(slug=slug, display_name="Squatted", gpu_quota=1)
        reconcile_tenant(tenant.pk)
        with django_capture_on_commit_callbacks(execute=True):
            services.archive_tenant(tenant, actor=admin_user)
        tenant.refresh_from_db()
        assert tenant.state == TenantState.ARCHIVED
        assert cluster.get(VCJOB_API, "Job", "theirs", f"tenant-{slug}") is not None
        assert cluster.get("v1", "Namespace", f"tenant-{slug}")["status"]["phase"] == "Active"
    finally:
        cluster.force_delete_pods(f"tenant-{slug}")
        cluster.delete("v1", "Namespace", f"tenant-{slug}")


def test_archiving_is_refused_while_jobs_are_active_and_lists_them(
    cluster, create, admin_user, django_capture_on_commit_callbacks
):
    tenant = create(gpu_quota=8)
    cluster.apply_one(vcjob(tenant.namespace, tenant.queue_name, "llama-sft"))
    wait_for(lambda: phase(cluster, tenant.namespace, "llama-sft") == "Running", timeout=30)
    with pytest.raises(services.ValidationError) as caught:
        services.archive_tenant(tenant, actor=admin_user)
    assert "Volcano job llama-sft (Running)" in caught.value.messages[0]
    tenant.refresh_from_db()
    assert tenant.state == TenantState.ACTIVE

    wait_for(lambda: phase(cluster, tenant.namespace, "llama-sft") == "Completed", timeout=30)
    with django_capture_on_commit_callbacks(execute=True):
        services.archive_tenant(tenant, actor=admin_user)
    tenant.refresh_from_db()
    assert tenant.state == TenantState.ARCHIVED
    assert cluster.get(QUEUE_API, "Queue", tenant.queue_name) is None
    wait_for(
        lambda: cluster.get("v1", "Namespace", tenant.namespace) is None,
        timeout=30,
        message="the namespace to be deleted",
    )
    assert Tenant.objects.filter(pk=tenant.pk).exists()
