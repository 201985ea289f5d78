"""Reconcile a tenant into its Namespace, ResourceQuota, LimitRange and Volcano Queue."""

import logging

from celery import shared_task
from django.utils import timezone

from k8s_adapters.client import ObjectRef
from k8s_adapters.errors import PermanentK8sError, TransientK8sError
from k8s_adapters.labels import MANAGED_BY, PORTAL, TENANT, portal_labels
from k8s_adapters.tenant import NAMESPACED_KINDS, QUEUE_API, build_tenant
from portal.k8s import get_cluster
from portal.reconcile import enqueue, exclusive, started

from .choices import SyncState
from .models import Tenant

log = logging.getLogger(__name__)
RETRY = {
    "autoretry_for": (TransientK8sError,),
    "retry_backoff": 2,
    "retry_backoff_max": 60,
    "retry_jitter": True,
    "max_retries": None,
}


@shared_task(name="tenants.reconcile_tenant", ignore_result=True, **RETRY)
def reconcile_tenant(tenant_id):
    started(reconcile_tenant.name, tenant_id)
    with exclusive(reconcile_tenant, "tenant", tenant_id) as acquired:
        if not acquired:
            return
        tenant = Tenant.objects.filter(pk=tenant_id).first()
        if tenant is None:
            return
        try:
            usage = _remove(tenant) if tenant.is_archived else _apply(tenant)
        except PermanentK8sError as exc:
            _observe(tenant, SyncState.ERROR, exc.message)
        except TransientK8sError as exc:
            _observe(tenant, SyncState.ERROR, f"{exc.message} (retrying)")
            raise
        else:
            _observe(tenant, SyncState.IN_SYNC, "", usage)


def _apply(tenant):
    cluster = get_cluster()
    namespace = cluster.get("v1", "Namespace", tenant.namespace)
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    if namespace and (labels.get(MANAGED_BY) != PORTAL or labels.get(TENANT) != tenant.slug):
        raise PermanentK8sError(
            f"namespace {tenant.namespace} exists and is not managed by the portal for this tenant"
        )
    desired = build_tenant(tenant.to_spec())
    cluster.apply(desired)
    cluster.prune(
        labels=portal_labels(tenant=tenant.slug, component="tenant"),
        keep={ObjectRef.of(m) for m in desired},
        kinds=NAMESPACED_KINDS,
        namespace=tenant.namespace,
    )
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", tenant.namespace) or {}
    return (quota.get("status") or {}).get("used") or {}


def _remove(tenant):
    cluster = get_cluster()
    cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
    namespace = cluster.get("v1", "Namespace", tenant.namespace)
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    if namespace and labels.get(TENANT) == tenant.slug:
        cluster.delete("v1", "Namespace", tenant.namespace)
    return {}


def _observe(tenant, state, message, usage=None):
    """Write the observed status back, touching only the status columns."""
    fields = {"sync_state": state, "sync_message": message[:2000], "synced_at": timezone.now()}
    if usage is not None:
        fields["observed_usage"] = usage
    Tenant.objects.filter(pk=tenant.pk).update(**fields)


@shared_task(name="tenants.resync_tenants", ignore_result=True)
def resync_tenants():
    """Re-enqueue every tenant (archived ones too, so leftovers are removed)."""
    for tenant_id in Tenant.objects.values_list("pk", flat=True):
        enqueue(reconcile_tenant, tenant_id)
