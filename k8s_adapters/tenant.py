"""Pure builders for a tenant's objects: Namespace, ResourceQuota, LimitRange, Volcano Queue."""

from dataclasses import dataclass
from typing import Any

from .labels import MANAGED_BY, PORTAL, TENANT, portal_labels

GPU = "nvidia.com/gpu"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")
QUOTA_NAME = "gpu-portal"  # the tenant's ResourceQuota (its LimitRange shares the name)
NAMESPACED_KINDS = (("v1", "ResourceQuota"), ("v1", "LimitRange"), NETWORK_POLICY)
# Pod Security: job pods must meet `baseline` (no privileged or host access); `restricted`
# is reported as warnings and audit events, so tenants see what would tighten next.
POD_SECURITY = {
    "pod-security.kubernetes.io/enforce": "baseline",
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/audit": "restricted",
}
CLUSTER_KINDS = (("v1", "Namespace"), (QUEUE_API, "Queue"))


@dataclass(frozen=True)
class TenantSpec:
    slug: str
    namespace: str
    queue: str
    display_name: str
    gpus: int
    cpu: int  # cores
    memory_gib: int
    storage_gib: int
    pvcs: int
    queue_weight: int = 1
    deserved_gpus: int | None = None
    guarantee_gpus: int = 0
    reclaimable: bool = True
    parent_queue: str | None = None
    router_namespace: str = ""  # where the endpoint router runs: admitted to tenant pods


def _labels(spec: TenantSpec) -> dict[str, str]:
    return tenant_labels(spec.slug)


def build_namespace(spec: TenantSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": spec.namespace,
            "labels": {**_labels(spec), **POD_SECURITY},
            "annotations": {"gpu-portal.io/display-name": spec.display_name},
        },
    }


def build_network_policy(spec: TenantSpec) -> dict[str, Any]:
    """Tenant pods accept traffic from their own namespace and the endpoint router only; other
    tenants' pods cannot reach them. Ports a job exposes directly get a policy of their own."""
    sources: list[dict[str, Any]] = [{"podSelector": {}}]
    if spec.router_namespace:
        sources.append(
            {
                "namespaceSelector": {
                    "matchLabels": {"kubernetes.io/metadata.name": spec.router_namespace}
                }
            }
        )
    return {
        "apiVersion": NETWORK_POLICY[0],
        "kind": NETWORK_POLICY[1],
        "metadata": {
            "name": "gpu-portal-isolation",
            "namespace": spec.namespace,
            "labels": _labels(spec),
        },
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{"from": sources}]},
    }


def build_resource_quota(spec: TenantSpec) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": QUOTA_NAME, "namespace": spec.namespace, "labels": _labels(spec)},
        "spec": {
            "hard": {
                f"requests.{GPU}": str(spec.gpus),
                "requests.cpu": str(spec.cpu),
                "requests.memory": f"{spec.memory_gib}Gi",
                "requests.storage": f"{spec.storage_gib}Gi",
                "persistentvolumeclaims": str(spec.pvcs),
            }
        },
    }


def build_limit_range(spec: TenantSpec) -> dict:
    """Defaults for containers that state no resources, so the quota can count them."""
    return {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "gpu-portal", "namespace": spec.namespace, "labels": _labels(spec)},
        "spec": {
            "limits": [
                {
                    "type": "Container",
                    "defaultRequest": {"cpu": "500m", "memory": "1Gi"},
                    "default": {"cpu": "2", "memory": "8Gi"},
                },
                {"type": "PersistentVolumeClaim", "min": {"storage": "1Gi"}},
            ]
        },
    }


def build_queue(spec: TenantSpec) -> dict:
    """capability = the quota (the most the tenant may hold); deserved = its fair share, so idle
    GPUs can be borrowed and reclaimed; guarantee = GPUs reserved for it.

    Shares are in GPUs: CPU and memory deserve the whole quota. Volcano's capacity plugin takes
    a dimension missing from `deserved` as deserving nothing, so every CPU a tenant holds would
    count as borrowed, and its pods as victims of any other tenant's reclaim."""
    deserved = spec.gpus if spec.deserved_gpus is None else spec.deserved_gpus
    capability = {GPU: str(spec.gpus), "cpu": str(spec.cpu), "memory": f"{spec.memory_gib}Gi"}
    queue_spec = {
        "weight": spec.queue_weight,
        "reclaimable": spec.reclaimable,
        "capability": capability,
        "deserved": {**capability, GPU: str(deserved)},
        "guarantee": {"resource": {GPU: str(spec.guarantee_gpus)}},
    }
    if spec.parent_queue:
        queue_spec["parent"] = spec.parent_queue
    return {
        "apiVersion": QUEUE_API,
        "kind": "Queue",
        "metadata": {"name": spec.queue, "labels": _labels(spec)},
        "spec": queue_spec,
    }


def build_tenant(spec: TenantSpec) -> list[dict]:
    """Every object a tenant owns, in the order they must be applied."""
    return [
        build_namespace(spec),
        build_resource_quota(spec),
        build_limit_range(spec),
        build_network_policy(spec),
        build_queue(spec),
    ]


# -- readers ----------------------------------------------------------------------------------


def tenant_labels(slug: str) -> dict[str, str]:
    """The labels of every object a tenant's reconcile owns (what pruning selects by)."""
    return portal_labels(tenant=slug, component="tenant")


def namespace_tenant(namespace: dict | None) -> str | None:
    """Which tenant a Namespace belongs to: None when it does not exist, "" when the portal
    does not manage it."""
    if namespace is None:
        return None
    labels = (namespace.get("metadata") or {}).get("labels") or {}
    return labels.get(TENANT, "") if labels.get(MANAGED_BY) == PORTAL else ""


def quota_used(quota: dict | None) -> dict[str, str]:
    """status.used of a ResourceQuota ({} before the quota controller counted)."""
    return dict(((quota or {}).get("status") or {}).get("used") or {})
