"""Pure functions from cluster objects to the console's snapshot: GPUs per node, who uses them,
queues, and what looks broken (with the likely cause and the fix)."""

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from .labels import JOB, MANAGED_BY, PORTAL, TENANT
from .quantity import to_decimal
from .times import parse_time

log = logging.getLogger(__name__)
GPU = "nvidia.com/gpu"
TERMINAL_PHASES = {"Succeeded", "Failed"}


def _int(value: str | int | None) -> int:
    return int(to_decimal(value or 0))


def reduce_node(node: dict[str, Any]) -> dict[str, Any]:
    meta, status, spec = node["metadata"], node.get("status") or {}, node.get("spec") or {}
    labels = meta.get("labels") or {}
    ready = any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    return {
        "name": meta["name"],
        "product": labels.get("nvidia.com/gpu.product", ""),
        "gpu_present": labels.get("nvidia.com/gpu.present") == "true",
        "capacity": _int((status.get("capacity") or {}).get(GPU)),
        "allocatable": _int((status.get("allocatable") or {}).get(GPU)),
        "ready": ready,
        "unschedulable": bool(spec.get("unschedulable")),
        "taints": [
            f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in spec.get("taints") or []
        ],
    }


@dataclass(frozen=True)
class GpuSummary:
    """What launches and quota checks need to know of the nodes' GPUs."""

    total: int  # allocatable, summed over nodes
    largest: int  # the most allocatable on one node
    products: frozenset[str]


def gpu_summary(nodes: list[dict[str, Any]]) -> GpuSummary:
    return summarize_gpus([reduce_node(n) for n in nodes])


def _takes_pods(node: dict[str, Any]) -> bool:
    return node.get("ready", True) and not node.get("unschedulable")


def summarize_gpus(rows: list[dict[str, Any]]) -> GpuSummary:
    """The summary of nodes already reduced (`reduce_node`), as an informer keeps them."""
    return GpuSummary(
        total=sum(r["allocatable"] for r in rows),
        largest=max((r["allocatable"] for r in rows), default=0),
        products=frozenset(r["product"] for r in rows if r["product"]),
    )


def _container_gpus(container: dict[str, Any]) -> int:
    resources = container.get("resources") or {}
    return _int((resources.get("limits") or resources.get("requests") or {}).get(GPU))


def _pod_gpus(spec: dict[str, Any]) -> int:
    """The GPUs a pod holds as the scheduler counts them: its containers' together with its
    sidecars' (init containers that keep running), or what an init container needs beside the
    sidecars started before it, whichever is more (an init container asking for GPUs holds
    them on its node as much as the containers after it)."""
    sidecars = peak = 0
    for container in spec.get("initContainers") or []:
        gpus = _container_gpus(container)
        if container.get("restartPolicy") == "Always":
            sidecars += gpus
            peak = max(peak, sidecars)
        else:
            peak = max(peak, sidecars + gpus)
    running = sidecars + sum(_container_gpus(c) for c in spec.get("containers") or [])
    return max(peak, running)


def reduce_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Only what the console needs: GPUs asked for, where, and by which job and tenant."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    labels = meta.get("labels") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "gpus": _pod_gpus(spec),
        "node": spec.get("nodeName") or "",
        "phase": status.get("phase") or "Pending",
        "job": labels.get("volcano.sh/job-name", ""),
        "tenant": labels.get("gpu-portal.io/tenant", ""),
    }


def reduce_queue(queue: dict[str, Any]) -> dict[str, Any]:
    spec, status = queue.get("spec") or {}, queue.get("status") or {}
    guarantee = ((spec.get("guarantee") or {}).get("resource") or {}).get(GPU)
    return {
        "name": queue["metadata"]["name"],
        "state": status.get("state") or "Open",
        "weight": spec.get("weight", 1),
        "capability": _int((spec.get("capability") or {}).get(GPU)),
        "deserved": _int((spec.get("deserved") or {}).get(GPU)),
        "guarantee": _int(guarantee),
        "allocated": _int((status.get("allocated") or {}).get(GPU)),
        "running": status.get("running", 0),
        "pending": status.get("pending", 0),
        "parent": spec.get("parent", ""),
    }


def reduce_hypernode(hypernode: dict[str, Any]) -> dict[str, Any]:
    spec = hypernode.get("spec") or {}
    members = []
    for member in spec.get("members") or []:
        selector = member.get("selector") or {}
        exact = (selector.get("exactMatch") or {}).get("name")
        regex = (selector.get("regexMatch") or {}).get("pattern")
        members.append(
            {"type": member.get("type", "Node"), "name": exact or "", "pattern": regex or ""}
        )
    return {"name": hypernode["metadata"]["name"], "tier": spec.get("tier", 0), "members": members}


def reduce_name(obj: dict[str, Any]) -> dict[str, Any]:
    return {"name": obj["metadata"]["name"]}


def reduce_claim(claim: dict[str, Any]) -> dict[str, Any]:
    meta, spec = claim["metadata"], claim.get("spec") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "phase": (claim.get("status") or {}).get("phase") or "Pending",
        "storage_class": spec.get("storageClassName") or "",
        "created": str(meta.get("creationTimestamp") or ""),
        "portal": (meta.get("labels") or {}).get(MANAGED_BY) == PORTAL,
        "tenant": (meta.get("labels") or {}).get(TENANT, ""),
        "job": (meta.get("labels") or {}).get(JOB, ""),
    }


def reduce_storage_class(storage_class: dict[str, Any]) -> dict[str, Any]:
    annotations = storage_class["metadata"].get("annotations") or {}
    return {
        "name": storage_class["metadata"]["name"],
        "provisioner": storage_class.get("provisioner", ""),
        "default": annotations.get("storageclass.kubernetes.io/is-default-class") == "true",
    }


SCHEDULER_CONFIGMAP = "volcano-scheduler-configmap"  # as Volcano's Helm chart names it


def reduce_scheduler_config(configmap: dict[str, Any]) -> dict[str, Any]:
    """The plugins vc-scheduler runs, from the ConfigMap its chart mounts as its config."""
    name = configmap["metadata"]["name"]
    plugins: set[str] = set()
    actions: set[str] = set()
    for text in (configmap.get("data") or {}).values():
        try:
            conf = yaml.safe_load(text) or {}
        except yaml.YAMLError:
            continue
        for tier in conf.get("tiers") or [] if isinstance(conf, dict) else []:
            plugins |= {p.get("name", "") for p in tier.get("plugins") or []}
        if isinstance(conf, dict):
            actions |= {a.strip() for a in str(conf.get("actions") or "").split(",") if a.strip()}
    return {"name": name, "plugins": sorted(plugins), "actions": sorted(actions)}


def topology_ignored(
    configs: list[dict[str, Any]], hypernodes: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """HyperNodes describe the network but the scheduler does not run the plugin that reads
    them: every job's networkTopology is silently ignored."""
    config = next((c for c in configs if c["name"] == SCHEDULER_CONFIGMAP), None)
    if config is None or not hypernodes or "network-topology-aware" in config["plugins"]:
        return []
    return [
        {
            "kind": "topology-ignored",
            "subject": "Volcano scheduler",
            "cause": f"The cluster has {len(hypernodes)} HyperNodes but vc-scheduler does not "
            "run the network-topology-aware plugin: jobs' network topology is ignored.",
            "fix": "Add network-topology-aware to a tier of the scheduler's configuration "
            f"(ConfigMap {SCHEDULER_CONFIGMAP}).",
        }
    ]


def shares_not_kept(configs: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The scheduler's configuration breaks the tenants' shares: queues' `deserved` (what the
    portal writes) is read only by the capacity plugin, and a tenant within its share gets GPUs
    another tenant borrowed back only through the reclaim action, for jobs overcommit let in."""
    config = next((c for c in configs if c["name"] == SCHEDULER_CONFIGMAP), None)
    if config is None:
        return []
    plugins, actions = set(config["plugins"]), set(config.get("actions") or [])
    causes = []
    if "capacity" not in plugins:
        by_weight = " (proportion splits the cluster by queue weight)"
        causes.append(
            "it does not run the capacity plugin, so the tenants' deserved shares are ignored"
            + (by_weight if "proportion" in plugins else "")
        )
    if "reclaim" not in actions:
        causes.append("it does not run the reclaim action, so borrowed GPUs are never given back")
    if "overcommit" in plugins:
        causes.append(
            "it runs the overcommit plugin, which keeps a tenant's job out of the queue while "
            "the cluster is full, so nothing is reclaimed for it"
        )
    return [
        {
            "kind": "shares-not-kept",
            "subject": "Volcano scheduler",
            "cause": f"Tenants within their deserved share may wait for borrowed GPUs: {cause}.",
            "fix": "Use the portal's recommended scheduler configuration (capacity plugin, "
            f"reclaim action, no overcommit) in ConfigMap {SCHEDULER_CONFIGMAP}.",
        }
        for cause in causes
    ]


def reduce_quota(quota: dict[str, Any]) -> dict[str, Any]:
    meta = quota["metadata"]
    hard = (quota.get("spec") or {}).get("hard") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "tenant": (meta.get("labels") or {}).get(TENANT, ""),
        "gpus": _int(hard.get(f"requests.{GPU}")) if f"requests.{GPU}" in hard else None,
        "used": dict(((quota.get("status") or {}).get("used")) or {}),
    }


def snapshot(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    runtime_classes: list[dict[str, Any]],
    hypernodes: list[dict[str, Any]],
    claims: list[dict[str, Any]] = (),  # type: ignore[assignment]
    storage_classes: list[dict[str, Any]] = (),  # type: ignore[assignment]
    quotas: list[dict[str, Any]] = (),  # type: ignore[assignment]
    scheduler_configs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    now: datetime | None = None,
) -> dict[str, Any]:
    """The console's view of the cluster, from reduced objects."""
    used: dict[str, int] = {}
    users: dict[str, dict[tuple[str, str], int]] = {}
    for pod in pods:
        if not pod["gpus"] or not pod["node"] or pod["phase"] in TERMINAL_PHASES:
            continue
        used[pod["node"]] = used.get(pod["node"], 0) + pod["gpus"]
        # Any: the name is reused below for a column name (a str)
        key: Any = (pod["tenant"] or pod["namespace"], pod["job"] or pod["name"])
        node_users = users.setdefault(pod["node"], {})
        node_users[key] = node_users.get(key, 0) + pod["gpus"]
    rows = []
    for node in sorted(nodes, key=lambda n: n["name"]):
        in_use = used.get(node["name"], 0)
        rows.append(
            {
                **node,
                "used": in_use,
                # A cordoned or NotReady node takes no new pod: none of its GPUs is free.
                "free": max(node["allocatable"] - in_use, 0) if _takes_pods(node) else 0,
                "jobs": [
                    {"tenant": t, "job": j, "gpus": g}
                    for (t, j), g in sorted(users.get(node["name"], {}).items())
                ],
            }
        )
    products: dict[str, dict[str, int]] = {}
    for row in rows:
        if not row["capacity"] and not row["gpu_present"]:
            continue
        total = products.setdefault(
            row["product"] or "unknown",
            {"nodes": 0, "capacity": 0, "allocatable": 0, "used": 0, "free": 0},
        )
        total["nodes"] += 1
        for key in ("capacity", "allocatable", "used", "free"):
            total[key] += row[key]
    totals = {
        key: sum(p[key] for p in products.values())
        for key in ("nodes", "capacity", "allocatable", "used", "free")
    }
    # By namespace: a tenant label any pod may carry, or a slug naming another namespace
    # (`default`), would count others' GPUs as a tenant's.
    by_namespace: dict[str, int] = {}
    for pod in pods:
        if pod["gpus"] and pod["node"] and pod["phase"] not in TERMINAL_PHASES:
            by_namespace[pod["namespace"]] = by_namespace.get(pod["namespace"], 0) + pod["gpus"]
    return {
        "nodes": rows,
        "products": products,
        "totals": totals,
        "tenants": by_namespace,
        "queues": sorted(queues, key=lambda q: q["name"]),
        "runtime_classes": sorted(r["name"] for r in runtime_classes),
        "hypernodes": topology(hypernodes, rows),
        "diagnostics": diagnose(rows, queues, runtime_classes, totals)
        + unbound_claims(claims, storage_classes, now or datetime.now(UTC))
        + queue_quota_disagreements(queues, quotas)
        + topology_ignored(scheduler_configs, hypernodes)
        + shares_not_kept(scheduler_configs),
    }


def diagnose(
    rows: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    runtime_classes: list[dict[str, Any]],
    totals: dict[str, int],
) -> list[dict[str, str]]:
    found = []
    if (
        rows
        and any(r["gpu_present"] or r["capacity"] for r in rows)
        and "nvidia" not in {r["name"] for r in runtime_classes}
    ):
        found.append(
            {
                "kind": "runtimeclass-missing",
                "subject": "RuntimeClass nvidia",
                "cause": "GPU pods ask for runtimeClassName: nvidia, which does not exist.",
                "fix": "Install the NVIDIA container toolkit / GPU Operator, or create a "
                "RuntimeClass named nvidia with handler nvidia.",
            }
        )
    for row in rows:
        if row["gpu_present"] and not row["allocatable"]:
            found.append(
                {
                    "kind": "device-plugin",
                    "subject": f"node {row['name']}",
                    "cause": "Labelled nvidia.com/gpu.present=true but no allocatable "
                    "nvidia.com/gpu: the device plugin has not registered.",
                    "fix": "Run the device plugin pod with runtimeClassName: nvidia so NVML can "
                    "load; check its logs for 'could not load NVML'.",
                }
            )
        if row["used"] and (not row["ready"] or row["unschedulable"]):
            state = "NotReady" if not row["ready"] else "cordoned"
            found.append(
                {
                    "kind": "unhealthy-node-in-use",
                    "subject": f"node {row['name']}",
                    "cause": f"The node is {state} but still runs GPU jobs: "
                    + ", ".join(f"{j['tenant']}/{j['job']}" for j in row["jobs"])
                    + ".",
                    "fix": "Drain the node (the jobs restart elsewhere) or bring it back to Ready.",
                }
            )
    # Leaf queues only: a department's guarantee covers its children's (Volcano checks that),
    # so counting both counted those GPUs twice.
    parents = {q["parent"] for q in queues if q.get("parent")}
    guaranteed = sum(q["guarantee"] for q in queues if q["name"] not in parents)
    if guaranteed > totals["allocatable"]:
        found.append(
            {
                "kind": "over-guaranteed",
                "subject": "queues",
                "cause": f"Queues guarantee {guaranteed} GPUs but the cluster has "
                f"{totals['allocatable']} allocatable.",
                "fix": "Lower tenants' guaranteed GPUs or add GPU nodes.",
            }
        )
    return found


CLAIM_GRACE_SECONDS = 120


def unbound_claims(
    claims: list[dict[str, Any]], storage_classes: list[dict[str, Any]], now: datetime
) -> list[dict[str, str]]:
    """The portal's claims left unbound for minutes, with the likely cause: no default
    StorageClass, a class that does not exist, or a provisioner that does not answer."""
    classes = {c["name"]: c for c in storage_classes}
    default = next((c["name"] for c in storage_classes if c["default"]), "")
    stuck: dict[str, list[str]] = {}
    for claim in claims:
        created = parse_time(claim["created"])
        young = created is not None and (now - created).total_seconds() < CLAIM_GRACE_SECONDS
        if not claim["portal"] or claim["phase"] != "Pending" or young:
            continue
        stuck.setdefault(claim["storage_class"], []).append(f"{claim['namespace']}/{claim['name']}")
    found = []
    for name, which in sorted(stuck.items()):
        more = ", ..." if len(which) > 3 else ""
        subject = f"{len(which)} volume claims ({', '.join(which[:3])}{more})"
        if not name and not default:
            cause = "They name no StorageClass and the cluster has no default one."
            fix = "Mark a StorageClass as the default, or set the templates' storage class."
        elif name and name not in classes:
            cause = f"They ask for StorageClass {name}, which does not exist."
            fix = "Create that StorageClass or change the templates' storage class."
        else:
            klass = classes.get(name or default, {})
            cause = (
                f"StorageClass {name or default} (provisioner "
                f"{klass.get('provisioner', '?')}) has not created their volumes; their jobs "
                "cannot be scheduled until it does."
            )
            fix = "Check that the storage provisioner (CSI driver) runs and look at its logs."
        found.append({"kind": "claims-unbound", "subject": subject, "cause": cause, "fix": fix})
    return found


def queue_quota_disagreements(
    queues: list[dict[str, Any]], quotas: list[dict[str, Any]]
) -> list[dict[str, str]]:
    """A tenant's Volcano queue and ResourceQuota allow different GPUs (someone edited one by
    hand): Volcano may admit a job whose pods the quota then refuses, or the other way round."""
    by_queue = {q["name"]: q for q in queues}
    found = []
    for quota in quotas:
        queue = by_queue.get(quota["namespace"])
        if not quota["tenant"] or queue is None or quota["gpus"] is None:
            continue
        if queue["capability"] != quota["gpus"]:
            found.append(
                {
                    "kind": "queue-quota-disagree",
                    "subject": f"tenant {quota['tenant']}",
                    "cause": f"Its Volcano queue allows {queue['capability']} GPUs but its "
                    f"ResourceQuota {quota['gpus']}: jobs can be half-created or wait forever.",
                    "fix": "Undo the hand edit, or sync the tenant from the portal (it sets both "
                    "from the tenant's quota).",
                }
            )
    return found


def _pattern_members(pattern: str, node_names: set[str]) -> set[str]:
    """The nodes a HyperNode's regexMatch names, as Volcano reads it: Go's MatchString, a search
    (not a whole match). A pattern Go's RE2 takes and Python's re does not (\\pL, \\z, \\Q...\\E)
    names none here, said once in the log, rather than stop the console's snapshot."""
    try:
        compiled = re.compile(pattern)
    except re.error as exc:
        if pattern not in _unreadable:
            _unreadable.add(pattern)
            log.warning(
                "HyperNode pattern %r is not one Python reads (%s); shown empty", pattern, exc
            )
        return set()
    return {name for name in node_names if compiled.search(name)}


_unreadable: set[str] = set()


def unfittable(task_gpus: int, task_product: str, nodes: list[dict[str, Any]]) -> str:
    """Why a task could never be scheduled on these nodes, or ''."""
    candidates = [n for n in nodes if not task_product or n["product"] == task_product]
    if task_product and not candidates:
        return f"no node has GPU product {task_product}"
    largest = max((n["allocatable"] for n in candidates), default=0)
    if task_gpus > largest:
        return f"it asks for {task_gpus} GPUs per pod but no node has more than {largest}"
    return ""


def topology(hypernodes: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each HyperNode with the nodes under it (through nested HyperNodes), their free GPUs and
    how many are entirely free, so admins see whether an N-node job fits inside one tier."""
    by_name = {h["name"]: h for h in hypernodes}
    node_names = {r["name"] for r in rows}
    free = {r["name"]: r["free"] for r in rows}
    idle = {r["name"] for r in rows if r["allocatable"] and not r["used"]}

    def members(name: str, seen: tuple[str, ...] = ()) -> set[str]:
        found = set()
        for member in by_name.get(name, {}).get("members", []):
            if member["type"] == "HyperNode" and member["name"] not in seen:
                found |= members(member["name"], (*seen, name))
            elif member["name"]:
                found |= {member["name"]} & node_names
            elif member["pattern"]:
                found |= _pattern_members(member["pattern"], node_names)
        return found

    tree = []
    for hypernode in sorted(hypernodes, key=lambda h: (-h["tier"], h["name"])):
        nodes = members(hypernode["name"])
        tree.append(
            {
                "name": hypernode["name"],
                "tier": hypernode["tier"],
                "nodes": len(nodes),
                "free": sum(free[n] for n in nodes),
                "idle_nodes": len(nodes & idle),
                "children": [m["name"] for m in hypernode["members"] if m["type"] == "HyperNode"],
            }
        )
    return tree
