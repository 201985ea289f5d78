"""Reading what Multus reports on a pod: secondary interfaces from network-status, and the
sandbox failure the kubelet records while a pod has none."""

import json

import pytest

from k8s_adapters.multus import (
    InterfaceAddresses,
    PodNetworks,
    network_status,
    pod_networks,
    pool_of_network,
    release_operations,
    whereabouts_reservation_name,
)

STATUS = [
    {"name": "k8s-pod-network", "ips": ["10.244.1.5"], "default": True, "dns": {}},
    {"name": "team-a/pool-compute", "interface": "net1", "ips": ["10.77.0.12"], "mac": "aa:bb"},
    {"name": "team-a/pool-v6", "interface": "net2", "ips": ["fd00::12"], "dns": {}},
]


def pod(name, uid, annotations=None, node="n1"):
    return {
        "metadata": {"name": name, "uid": uid, "annotations": annotations or {}},
        "spec": {"nodeName": node},
    }


def test_the_default_network_is_left_out_and_secondary_interfaces_read():
    found = network_status(pod("p", "u", {"k8s.v1.cni.cncf.io/network-status": json.dumps(STATUS)}))
    assert found == (
        InterfaceAddresses("team-a/pool-compute", "net1", ("10.77.0.12",), "aa:bb"),
        InterfaceAddresses("team-a/pool-v6", "net2", ("fd00::12",)),
    )


def test_missing_or_unreadable_status_means_no_interfaces():
    assert network_status(pod("p", "u")) == ()
    assert network_status(pod("p", "u", {"k8s.v1.cni.cncf.io/network-status": "{nope"})) == ()
    assert network_status(pod("p", "u", {"k8s.v1.cni.cncf.io/network-status": "{}"})) == ()


def test_a_pod_without_interfaces_carries_its_latest_sandbox_failure_and_the_network_named():
    old = {
        "reason": "FailedCreatePodSandBox",
        "involvedObject": {"uid": "u2"},
        "lastTimestamp": "2026-12-03T07:00:00Z",
        "message": 'error adding container to network "pool-a": timeout',
    }
    new = {
        **old,
        "lastTimestamp": "2026-12-03T07:01:00Z",
        "message": 'x: error adding container to network "pool-b": Could not allocate IP in range',
    }
    other = {**new, "reason": "Scheduled"}
    running = pod("job-main-0", "u1", {"k8s.v1.cni.cncf.io/network-status": json.dumps(STATUS)})
    assert pod_networks([pod("job-main-1", "u2"), running], [new, old, other]) == [
        PodNetworks("job-main-0", "n1", network_status(running)),
        PodNetworks("job-main-1", "n1", (), new["message"], "pool-b"),
    ]


def test_a_release_applies_only_to_the_version_read_and_the_allocation_seen():
    ippool = {
        "metadata": {"resourceVersion": "42"},
        "spec": {"range": "10.0.0.0/24", "allocations": {"5": {"id": "c", "podref": "a/p"}}},
    }
    assert release_operations(ippool, "10.0.0.5") == [
        {"op": "test", "path": "/metadata/resourceVersion", "value": "42"},
        {"op": "test", "path": "/spec/allocations/5", "value": {"id": "c", "podref": "a/p"}},
        {"op": "remove", "path": "/spec/allocations/5"},
    ]


def test_reservation_names_follow_whereabouts():
    assert whereabouts_reservation_name("net", "10.0.0.5") == "net-10.0.0.5"
    assert whereabouts_reservation_name("net", "fd00::") == "net-fd00--0"
    assert whereabouts_reservation_name("net", "fd00::12") == "net-fd00--12"


@pytest.mark.parametrize(
    ("network", "pool"),
    [
        ("gpu-portal-fabric", "fabric"),  # how Multus names it: the CNI config's name
        ("gpu-portal-fabric.static", "fabric"),
        ("gpu-portal-fabric-static", "fabric-static"),  # another pool, not fabric's static one
        ("pool-fabric", "fabric"),  # the NetworkAttachmentDefinitions' names
        ("static-pool-fabric", "fabric"),
        ("macvlan-conf", ""),
    ],
)
def test_a_network_named_in_multus_errors_leads_to_its_pool(network, pool):
    assert pool_of_network(network) == pool
