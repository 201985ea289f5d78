"""Pure builders for Multus NetworkAttachmentDefinitions with Whereabouts IPAM, and reading
Whereabouts' IPPool objects."""

import ipaddress
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .labels import JOB, portal_labels

NAD_API = "k8s.cni.cncf.io/v1"
WHEREABOUTS_API = "whereabouts.cni.cncf.io/v1alpha1"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"


@dataclass(frozen=True)
class PoolSpec:
    name: str
    network_name: str
    nad_name: str
    static_nad_name: str
    cni_type: str  # "ipvlan-l2" | "macvlan-bridge"
    master: str
    mtu: int
    cidr: str
    range_start: str
    range_end: str
    exclude: tuple[str, ...] = ()


POOL_LABEL = "gpu-portal.io/ip-pool"  # on a pool's networks: the pool's name


def network_pool(nad: dict[str, Any]) -> str:
    """The pool a portal NetworkAttachmentDefinition belongs to ("" for none)."""
    return (nad["metadata"].get("labels") or {}).get(POOL_LABEL, "")


def _plugin(spec: PoolSpec) -> dict[str, Any]:
    kind, mode = spec.cni_type.split("-")
    return {"type": kind, "master": spec.master, "mode": mode, "mtu": spec.mtu}


def _nad(
    name: str, namespace: str, tenant: str, pool: str, config: dict[str, Any]
) -> dict[str, Any]:
    labels = portal_labels(tenant=tenant, component="network")
    labels[POOL_LABEL] = pool
    return {
        "apiVersion": NAD_API,
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {"config": json.dumps(config, sort_keys=True)},
    }


def build_nad(spec: PoolSpec, namespace: str, tenant: str) -> dict[str, Any]:
    """Addresses from Whereabouts; the network_name is the pool's, so every tenant on the pool
    draws from one Whereabouts IPPool. No gateway in IPAM: the pod's default route stays."""
    ipam: dict[str, Any] = {
        "type": "whereabouts",
        "range": spec.cidr,
        "range_start": spec.range_start,
        "range_end": spec.range_end,
        "network_name": spec.network_name,
    }
    if spec.exclude:
        ipam["exclude"] = list(spec.exclude)
    config = {"cniVersion": "0.3.1", "name": spec.network_name, **_plugin(spec), "ipam": ipam}
    return _nad(spec.nad_name, namespace, tenant, spec.name, config)


def build_static_nad(spec: PoolSpec, namespace: str, tenant: str) -> dict[str, Any]:
    """For reserved addresses: static IPAM whose address comes from the pod annotation's `ips`
    (the plugin must declare the `ips` capability)."""
    plugin = {**_plugin(spec), "capabilities": {"ips": True}, "ipam": {"type": "static"}}
    config = {"cniVersion": "0.3.1", "name": static_network_name(spec.name), "plugins": [plugin]}
    return _nad(spec.static_nad_name, namespace, tenant, spec.name, config)


# Whereabouts' network name of every portal pool: "gpu-portal-<pool>".
NETWORK_PREFIX = "gpu-portal-"


def network_name(pool: str) -> str:
    """The pool's Whereabouts network name, shared by every tenant on the pool, so all tenants
    draw from one IPPool object and never get the same address. Also its CNI config's name,
    which Multus's errors name."""
    return f"{NETWORK_PREFIX}{pool}"


def static_network_name(pool: str) -> str:
    """The CNI config name of the pool's static NAD: a dot, which no pool name holds, so it is
    never another pool's (with `-static`, pool `a`'s was pool `a-static`'s)."""
    return f"{NETWORK_PREFIX}{pool}.static"


def pool_of_network(name: str) -> str:
    """The pool a network named in Multus's errors belongs to: its CNI config's name (or, as
    other tools say it, its NAD's), or ""."""
    for prefix, suffix in (
        (NETWORK_PREFIX, ".static"),
        (NETWORK_PREFIX, ""),
        ("static-pool-", ""),
        ("pool-", ""),
    ):
        if name.startswith(prefix) and name.endswith(suffix):
            return name[len(prefix) : len(name) - len(suffix)]
    return ""


@dataclass(frozen=True)
class WhereaboutsPool:
    """Whereabouts' IPPool object of a range, as its prune reads it."""

    name: str
    version: str  # its resourceVersion: deleted only if unchanged since read
    allocated: int  # how many addresses it holds
    portal: bool  # of a portal pool's network (its name has the portal's network prefix)


def read_whereabouts_pool(ippool: dict[str, Any]) -> WhereaboutsPool:
    meta = ippool["metadata"]
    return WhereaboutsPool(
        name=meta["name"],
        version=meta.get("resourceVersion", ""),
        allocated=len((ippool.get("spec") or {}).get("allocations") or {}),
        portal=meta["name"].startswith(NETWORK_PREFIX),
    )


def whereabouts_pool_name(network_name: str, cidr: str) -> str:
    """The name Whereabouts gives the IPPool object of a range: the range normalized (':' and
    '/' become '-'), prefixed by the network name."""
    return f"{network_name}-{cidr.replace(':', '-').replace('/', '-')}"


def allocations(ippool: dict) -> list[dict]:
    """[{address, podref, ifname}] from a Whereabouts IPPool object (offsets from the range's
    base address)."""
    spec = ippool.get("spec") or {}
    base = ipaddress.ip_network(spec["range"], strict=False).network_address
    return [
        {
            "address": str(base + int(offset)),
            "podref": entry.get("podref", ""),
            "ifname": entry.get("ifname", ""),
        }
        for offset, entry in sorted(
            (spec.get("allocations") or {}).items(), key=lambda item: int(item[0])
        )
    ]


def network_selection(attachments: Iterable[dict[str, Any]]) -> str:
    """The `k8s.v1.cni.cncf.io/networks` value: a JSON list of {name, interface[, ips]}."""
    return json.dumps(list(attachments))


def pod_ref(pod: dict) -> str:
    """A pod as Whereabouts' allocations name it: "<namespace>/<name>"."""
    meta = pod["metadata"]
    return f"{meta.get('namespace', '')}/{meta['name']}"


# -- what Multus reports on a pod --------------------------------------------------------------

NETWORK_STATUS_ANNOTATION = "k8s.v1.cni.cncf.io/network-status"
# The kubelet's Event reason when a pod's sandbox, its networks included, cannot be set up.
SANDBOX_FAILED = "FailedCreatePodSandBox"
_FAILED_NETWORK = re.compile(r'error adding container to network "([^"]+)"')


@dataclass(frozen=True)
class InterfaceAddresses:
    network: str  # "<namespace>/<NetworkAttachmentDefinition>"
    interface: str
    ips: tuple[str, ...]
    mac: str = ""


@dataclass(frozen=True)
class PodNetworks:
    """A pod's secondary interfaces; while it has none, why setting them up failed."""

    pod: str
    node: str
    interfaces: tuple[InterfaceAddresses, ...]
    failure: str = ""  # the last sandbox failure's message
    failed_network: str = ""  # the NetworkAttachmentDefinition that message names
    job: str = ""  # the portal job the pod runs for (its job label)


def network_status(pod: dict) -> tuple[InterfaceAddresses, ...]:
    """The secondary interfaces Multus wrote on the pod (the cluster's default network left
    out); none while Multus has not written any, or wrote something unreadable."""
    text = ((pod.get("metadata") or {}).get("annotations") or {}).get(NETWORK_STATUS_ANNOTATION)
    try:
        entries = json.loads(text) if text else []
    except ValueError:
        return ()
    if not isinstance(entries, list):
        return ()
    return tuple(
        InterfaceAddresses(
            network=str(entry.get("name", "")),
            interface=str(entry.get("interface", "")),
            ips=tuple(str(ip) for ip in entry.get("ips") or []),
            mac=str(entry.get("mac", "")),
        )
        for entry in entries
        if isinstance(entry, dict) and not entry.get("default")
    )


def _last_failures(events: Iterable[dict]) -> dict[str, str]:
    """pod uid -> message of its latest sandbox failure Event."""
    latest: dict[str, tuple[str, str]] = {}
    for event in events:
        if event.get("reason") != SANDBOX_FAILED:
            continue
        uid = (event.get("involvedObject") or {}).get("uid", "")
        when = str(event.get("lastTimestamp") or event.get("eventTime") or "")
        if uid and (uid not in latest or when >= latest[uid][0]):
            latest[uid] = (when, str(event.get("message", "")))
    return {uid: message for uid, (_, message) in latest.items()}


def pod_networks(pods: Iterable[dict], events: Iterable[dict]) -> list[PodNetworks]:
    """Per pod (by name): its interfaces from network-status, or its last sandbox failure."""
    failures = _last_failures(events)
    found = []
    for pod in sorted(pods, key=lambda p: p["metadata"]["name"]):
        meta = pod["metadata"]
        interfaces = network_status(pod)
        failure = "" if interfaces else failures.get(meta.get("uid", ""), "")
        match = _FAILED_NETWORK.search(failure)
        found.append(
            PodNetworks(
                pod=meta["name"],
                node=(pod.get("spec") or {}).get("nodeName") or "",
                interfaces=interfaces,
                failure=failure,
                failed_network=match.group(1) if match else "",
                job=(meta.get("labels") or {}).get(JOB, ""),
            )
        )
    return found


def allocation_at(ippool: dict, address: str) -> dict | None:
    """The allocation {id, podref, ifname} of `address` in a Whereabouts IPPool, or None."""
    spec = ippool.get("spec") or {}
    base = int(ipaddress.ip_network(spec["range"], strict=False).network_address)
    offset = str(int(ipaddress.ip_address(address)) - base)
    return (spec.get("allocations") or {}).get(offset)


def release_operations(ippool: dict, address: str) -> list[dict]:
    """A JSON patch removing the allocation of `address` (present in the IPPool) that applies
    only to the version read and only while the allocation is unchanged, so it never undoes an
    allocation Whereabouts made meanwhile (Whereabouts writes its IPPools the same way)."""
    spec = ippool["spec"]
    base = int(ipaddress.ip_network(spec["range"], strict=False).network_address)
    path = f"/spec/allocations/{int(ipaddress.ip_address(address)) - base}"
    version = ippool["metadata"]["resourceVersion"]
    return [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "test", "path": path, "value": allocation_at(ippool, address)},
        {"op": "remove", "path": path},
    ]


def whereabouts_reservation_name(network_name: str, address: str) -> str:
    """The name of Whereabouts' cluster-wide OverlappingRangeIPReservation of an address: the
    address (':' becomes '-'), prefixed by the network name."""
    text = str(ipaddress.ip_address(address))
    text = text + "0" if text.endswith(":") else text
    return f"{network_name}-{text.replace(':', '-')}"
