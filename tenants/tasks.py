"""Reconcile a tenant into its Namespace, ResourceQuota, LimitRange, NetworkPolicy, Volcano Queue
and the RoleBinding the web reads its namespace through."""

from celery import shared_task
from django.db.models import F

from core.cluster import get_cluster
from core.reconcile import reconciler, resync
from k8s_adapters.client import ObjectRef
from k8s_adapters.errors import PermanentK8sError
from k8s_adapters.tenant import (
    NAMESPACED_KINDS,
    QUEUE_API,
    QUOTA_NAME,
    ROLE_BINDING,
    build_tenant,
    owning_tenant,
    quota_used,
    tenant_labels,
)

from .models import Tenant


@reconciler("tenant", Tenant, name="tenants.reconcile_tenant")
def reconcile_tenant(tenant):
    """Apply (or remove, when archived) the tenant's objects; observe the quota's usage."""
    usage = _remove(tenant) if tenant.is_archived else _apply(tenant)
    # Only if no usage was written since this run loaded the tenant: the collector's watch
    # writes each change of the quota as it comes, and one written while this run read the
    # quota is the newer, even one that wrote back the usage this run loaded.
    if usage != tenant.observed_usage:
        unchanged = Tenant.objects.filter(pk=tenant.pk, usage_writes=tenant.usage_writes)
        if unchanged.update(observed_usage=usage, usage_writes=F("usage_writes") + 1):
            tenant.observed_usage = usage
    return


def _apply(tenant):
    cluster = get_cluster()
    named = (("v1", "Namespace", tenant.namespace), (QUEUE_API, "Queue", tenant.queue_name))
    for api_version, kind, name in named:  # another's of that name is never taken over
        owner = owning_tenant(cluster.get(api_version, kind, name))
        if owner is not None and owner != tenant.slug:
            raise PermanentK8sError(
                f"{kind} {name} exists and is not managed by the portal for this tenant"
            )
    spec = tenant.to_spec()
    desired = build_tenant(spec)
    cluster.apply(desired)
    # The web's bindings only while the portal binds one: with roles made by hand it binds
    # none, and the worker may not list them (one left from before names the chart's role,
    # gone with it, and grants nothing).
    cluster.prune(
        labels=tenant_labels(tenant.slug),
        keep={ObjectRef.of(m) for m in desired},
        kinds=[*NAMESPACED_KINDS, *([ROLE_BINDING] if spec.web_role else [])],
        namespace=tenant.namespace,
    )
    return quota_used(cluster.get("v1", "ResourceQuota", QUOTA_NAME, tenant.namespace))


def _remove(tenant):
    cluster = get_cluster()
    if owning_tenant(cluster.get(QUEUE_API, "Queue", tenant.queue_name)) == tenant.slug:
        cluster.delete(QUEUE_API, "Queue", tenant.queue_name)
    if owning_tenant(cluster.get("v1", "Namespace", tenant.namespace)) == tenant.slug:
        cluster.delete("v1", "Namespace", tenant.namespace)
    return {}


@shared_task(name="tenants.resync_tenants", ignore_result=True)
def resync_tenants():
    """Re-enqueue every tenant (archived ones too, so leftovers are removed)."""
    resync("tenants.reconcile_tenant", Tenant.objects.values_list("pk", flat=True))
