"""Pure builders for Multus NetworkAttachmentDefinitions with Whereabouts IPAM, and reading
Whereabouts' IPPool objects."""

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .labels import portal_labels

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


def _plugin(spec: PoolSpec) -> dict[str, Any]:
    kind, mode = spec.cni_type.split("-")
    return {"type": kind, "master": spec.master, "mode": mode, "mtu": spec.mtu}


def _nad(
    name: str, namespace: str, tenant: str, pool: str, config: dict[str, Any]
) -> dict[str, Any]:
    labels = portal_labels(tenant=tenant, component="network")
    labels["gpu-portal.io/ip-pool"] = pool
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
    config = {"cniVersion": "0.3.1", "name": f"{spec.network_name}-static", "plugins": [plugin]}
    return _nad(spec.static_nad_name, namespace, tenant, spec.name, config)


def whereabouts_pool_name(network_name: str, cidr: str) -> str:
    """The name Whereabouts gives the IPPool object of a range: the range normalized (':' and
    '/' become '-'), prefixed by the network name."""
    return f"{network_name}-{cidr.replace(':', '-').replace('/', '-')}"


def allocations(ippool: dict) -> list[dict]:
    """[{address, podref, ifname}] from a Whereabouts IPPool object (offsets from the range's
    base address)."""
    spec = ippool.get("spec") or {}
    base = int(ipaddress.ip_network(spec["range"], strict=False).network_address)
    return [
        {
            "address": str(ipaddress.IPv4Address(base + int(offset))),
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
