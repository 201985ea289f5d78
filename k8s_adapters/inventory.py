"""Pure functions from cluster objects to the console's snapshot: GPUs per node, who uses them,
queues, and what looks broken (with the likely cause and the fix)."""

import re
from dataclasses import dataclass
from typing import Any

from .quantity import to_decimal

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
    rows = [reduce_node(n) for n in nodes]
    return GpuSummary(
        total=sum(r["allocatable"] for r in rows),
        largest=max((r["allocatable"] for r in rows), default=0),
        products=frozenset(r["product"] for r in rows if r["product"]),
    )


def reduce_pod(pod: dict[str, Any]) -> dict[str, Any]:
    """Only what the console needs: GPUs asked for, where, and by which job and tenant."""
    meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
    gpus = 0
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        gpus += _int((resources.get("limits") or resources.get("requests") or {}).get(GPU))
    labels = meta.get("labels") or {}
    return {
        "namespace": meta.get("namespace", ""),
        "name": meta["name"],
        "gpus": gpus,
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


def snapshot(
    nodes: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    queues: list[dict[str, Any]],
    runtime_classes: list[dict[str, Any]],
    hypernodes: list[dict[str, Any]],
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
                "free": max(node["allocatable"] - in_use, 0),
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
    by_tenant: dict[str, int] = {}
    for pod in pods:
        if pod["gpus"] and pod["node"] and pod["phase"] not in TERMINAL_PHASES:
            tenant = pod["tenant"] or pod["namespace"]
            by_tenant[tenant] = by_tenant.get(tenant, 0) + pod["gpus"]
    return {
        "nodes": rows,
        "products": products,
        "totals": totals,
        "tenants": by_tenant,
        "queues": sorted(queues, key=lambda q: q["name"]),
        "runtime_classes": sorted(r["name"] for r in runtime_classes),
        "hypernodes": topology(hypernodes, rows),
        "diagnostics": diagnose(rows, queues, runtime_classes, totals),
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
    guaranteed = sum(q["guarantee"] for q in queues)
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
    node_names = [r["name"] for r in rows]
    free = {r["name"]: r["free"] for r in rows}
    idle = {r["name"] for r in rows if r["allocatable"] and not r["used"]}

    def members(name: str, seen: tuple[str, ...] = ()) -> set[str]:
        found = set()
        for member in by_name.get(name, {}).get("members", []):
            if member["type"] == "HyperNode" and member["name"] not in seen:
                found |= members(member["name"], (*seen, name))
            elif member["name"]:
                found |= {member["name"]} & set(node_names)
            elif member["pattern"]:
                found |= {n for n in node_names if re.fullmatch(member["pattern"], n)}
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
