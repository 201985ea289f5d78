"""Pure builders for a tenant's objects: Namespace, ResourceQuota, LimitRange, NetworkPolicy,
Volcano Queue, and the RoleBinding the portal's web reads the namespace through."""

import ipaddress
from dataclasses import dataclass
from typing import Any

from .labels import MANAGED_BY, PORTAL, TENANT, portal_labels
from .names import ISOLATION_POLICY
from .quantity import to_decimal

GPU = "nvidia.com/gpu"
QUEUE_API = "scheduling.volcano.sh/v1beta1"
NETWORK_POLICY = ("networking.k8s.io/v1", "NetworkPolicy")
QUOTA_NAME = "gpu-portal"  # the tenant's ResourceQuota (its LimitRange shares the name)
RBAC_API = "rbac.authorization.k8s.io/v1"
ROLE_BINDING = (RBAC_API, "RoleBinding")
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
    pods: int
    queue_weight: int = 1
    deserved_gpus: int | None = None
    guarantee_gpus: int = 0
    reclaimable: bool = True
    parent_queue: str | None = None
    router_namespace: str = ""  # where the endpoint router runs: admitted to tenant pods
    egress_deny: tuple[str, ...] = ()  # address ranges job pods may not reach
    egress_namespaces: tuple[str, ...] = ()  # other namespaces job pods may reach
    # The ClusterRole the portal's web reads the namespace with, and the web's ServiceAccount
    # (namespace/name): empty, no binding (the web then reads with rights of its own).
    web_role: str = ""
    web_account: str = ""


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
    tenants' pods cannot reach them. Ports a job exposes directly get a policy of their own.
    They reach their own namespace, DNS, the namespaces an admin opened, and any address outside
    the ranges an admin closed (the cloud's metadata service by default: its node credentials;
    the cluster's pod, Service and node ranges keep them off other tenants and the nodes)."""
    sources: list[dict[str, Any]] = [{"podSelector": {}}]
    if spec.router_namespace:
        sources.append(_namespace(spec.router_namespace))
    egress: list[dict[str, Any]] = [
        {"to": [{"podSelector": {}}]},
        {
            "to": [{"namespaceSelector": {}}],
            "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53, "protocol": "TCP"}],
        },
    ]
    if spec.egress_namespaces:
        egress.append({"to": [_namespace(n) for n in spec.egress_namespaces]})
    egress.append({"to": [_outside(everything, spec.egress_deny) for everything in EVERYWHERE]})
    return {
        "apiVersion": NETWORK_POLICY[0],
        "kind": NETWORK_POLICY[1],
        "metadata": {
            "name": ISOLATION_POLICY,
            "namespace": spec.namespace,
            "labels": _labels(spec),
        },
        "spec": {
            "podSelector": {},
            "policyTypes": ["Ingress", "Egress"],
            "ingress": [{"from": sources}],
            "egress": egress,
        },
    }


EVERYWHERE = ("0.0.0.0/0", "::/0")


def _namespace(name: str) -> dict[str, Any]:
    return {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": name}}}


def _outside(everything: str, deny: tuple[str, ...]) -> dict[str, Any]:
    """Every address of a family but the closed ranges of that family."""
    family = ipaddress.ip_network(everything).version
    closed = [c for c in deny if ipaddress.ip_network(c, strict=False).version == family]
    block: dict[str, Any] = {"cidr": everything}
    if closed:
        block["except"] = closed
    return {"ipBlock": block}


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
                "pods": str(spec.pods),
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


def build_web_binding(spec: TenantSpec) -> dict[str, Any]:
    """The web's reads in this namespace alone (a job's pods, their logs and Events, its Volcano
    jobs, the quota): its ClusterRole bound here, named after that role (a new role is a new
    binding: a binding's roleRef never changes)."""
    namespace, _, name = spec.web_account.partition("/")
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": {"name": spec.web_role, "namespace": spec.namespace, "labels": _labels(spec)},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": spec.web_role,
        },
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }


def build_tenant(spec: TenantSpec) -> list[dict]:
    """Every object a tenant owns, in the order they must be applied: the web's binding right
    after the namespace (a job's page reads its pods even while a later object is refused),
    and the queue before the ResourceQuota, so that a queue Volcano's webhook refuses (its
    department's queue too small) leaves the quota unchanged, not raised beside a queue that
    is not."""
    return [
        build_namespace(spec),
        *([build_web_binding(spec)] if spec.web_role else []),
        build_queue(spec),
        build_resource_quota(spec),
        build_limit_range(spec),
        build_network_policy(spec),
    ]


# -- readers ----------------------------------------------------------------------------------


def tenant_labels(slug: str) -> dict[str, str]:
    """The labels of every object a tenant's reconcile owns (what pruning selects by)."""
    return portal_labels(tenant=slug, component="tenant")


def owning_tenant(obj: dict | None) -> str | None:
    """Which tenant an object named after one (its Namespace, its Queue) belongs to: None when
    it does not exist, "" when the portal does not manage it."""
    if obj is None:
        return None
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(TENANT, "") if labels.get(MANAGED_BY) == PORTAL else ""


@dataclass(frozen=True)
class QueueExcess:
    """One way a queue does not fit under its parent, as Volcano's queue webhook refuses it:
    `part` is capability, deserved or guarantee; `resources` those over the parent's limit."""

    part: str
    resources: tuple[str, ...]
    limit: dict[str, str]
    asked: dict[str, str]


_VALUED_ALWAYS = ("cpu", "memory")  # compared as numbers, a missing one as 0; other
# resources (extended ones, such as GPUs) are over a parent that does not list them at all


def _over(limit: dict[str, Any], asked: dict[str, Any]) -> tuple[str, ...]:
    amounts = {name: to_decimal(value) for name, value in limit.items()}
    return tuple(
        sorted(
            name
            for name, value in asked.items()
            if name != "pods"
            and (
                to_decimal(value) > amounts.get(name, 0)
                if name in _VALUED_ALWAYS
                else name not in amounts or to_decimal(value) > amounts[name]
            )
        )
    )


def _summed(parts: list[dict[str, Any]]) -> dict[str, str]:
    total: dict[str, Any] = {}
    for part in parts:
        for name, value in part.items():
            total[name] = total.get(name, 0) + to_decimal(value)
    return {name: str(value) for name, value in total.items()}


def queue_excess(queue: dict, parent: dict, siblings: list[dict]) -> list[QueueExcess]:
    """How `queue` (as `build_queue` makes it) would not fit under `parent`, beside the other
    children of that parent (`siblings`, itself left out by name), by the rules Volcano's queue
    webhook (v1.14) applies: its capability within the parent's in every resource it names, and
    the children's deserved and guarantee totals within the parent's (else its capability)."""
    name, spec = queue["metadata"]["name"], queue["spec"]
    parent_spec = parent.get("spec") or {}
    found = []
    capability = parent_spec.get("capability") or {}
    if over := _over(capability, spec.get("capability") or {}):
        found.append(QueueExcess("capability", over, capability, spec.get("capability") or {}))
    children = [s.get("spec") or {} for s in siblings if s["metadata"]["name"] != name] + [spec]
    for part, read in (
        ("deserved", lambda q: q.get("deserved") or {}),
        ("guarantee", lambda q: (q.get("guarantee") or {}).get("resource") or {}),
    ):
        limit = read(parent_spec) or capability
        total = _summed([read(child) for child in children])
        if limit and (over := _over(limit, total)):
            found.append(QueueExcess(part, over, dict(limit), total))
    return found


def quota_used(quota: dict | None) -> dict[str, str]:
    """status.used of a ResourceQuota ({} before the quota controller counted)."""
    return dict(((quota or {}).get("status") or {}).get("used") or {})
