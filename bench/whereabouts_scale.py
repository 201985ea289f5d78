"""How large a pool the real Whereabouts copes with. It keeps all of a range's allocations in one
IPPool object, which the API server stores in etcd as one value (1.5 MiB by default), and reads,
searches and rewrites that object on every ADD under a cluster-wide lease.

For ranges of growing size, the IPPool is filled as Whereabouts fills it (every address but the
last one allocated to some pod, written by merge patches under its own field manager, so the
stored object carries managedFields as Whereabouts' own writes do), then the real plugin is
called: ADD takes the last free address, DEL gives it back. Reported: the stored object's size
and the ADD/DEL times, up to the first size the API server refuses to store or the plugin
cannot allocate in."""

import ipaddress
import json
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from common import ROOT

sys.path.insert(0, str(ROOT / "hack" / "cni"))
import runner  # noqa: E402  (the test bed's CNI runner: its netns and Whereabouts config)

from k8s_adapters.client import Cluster  # noqa: E402
from k8s_adapters.errors import K8sError  # noqa: E402
from k8s_adapters.multus import WHEREABOUTS_API, whereabouts_pool_name  # noqa: E402

NAMESPACE = "kube-system"
# (network prefix, addresses allocated before the probe): full CIDRs, then a /18 filled in steps
# to find where the API server stops storing the IPPool.
SIZES = ((24, 253), (22, 1021), (20, 4093), (19, 8189), (18, 10000), (18, 12000), (18, 14000))
CHUNK = 2000  # allocations per fill patch
ROUNDS = 5


def cni_path():
    script = str(ROOT / "hack" / "whereabouts.sh")
    subprocess.run(["bash", script, "build"], check=True, capture_output=True)
    out = subprocess.run(["bash", script, "cni-path"], check=True, capture_output=True, text=True)
    return Path(out.stdout.strip())


def fill(cluster, name, cidr, count):
    """An IPPool with `count` allocations from offset 1 on, as Whereabouts writes them."""
    filler = Cluster(cluster.api_client, field_manager="whereabouts")
    cluster.delete(WHEREABOUTS_API, "IPPool", name, NAMESPACE)
    resource = cluster.resource(WHEREABOUTS_API, "IPPool")
    body = {
        "apiVersion": WHEREABOUTS_API,
        "kind": "IPPool",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {"range": cidr, "allocations": {}},
    }
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:  # the background delete of the previous round
        try:
            resource.create(body=body, namespace=NAMESPACE)
            break
        except Exception:  # noqa: BLE001  (409 while the old one is still going)
            time.sleep(0.2)
    for first in range(1, count + 1, CHUNK):
        allocations = {
            str(offset): {
                "id": uuid.uuid4().hex + uuid.uuid4().hex,
                "podref": f"bench/whereabouts-scale-{offset}",
                "ifname": "net1",
            }
            for offset in range(first, min(first + CHUNK, count + 1))
        }
        filler.patch_merge(
            WHEREABOUTS_API, "IPPool", name, {"spec": {"allocations": allocations}}, NAMESPACE
        )
    return len(json.dumps(cluster.get(WHEREABOUTS_API, "IPPool", name, NAMESPACE)))


def call(plugin, command, config, netns, container):
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": container,
        "CNI_NETNS": netns,
        "CNI_IFNAME": "net1",
        "CNI_PATH": str(plugin.parent),
        "CNI_ARGS": "IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=whereabouts-probe",
        "PATH": "/usr/bin:/bin",
    }
    started = time.perf_counter()
    proc = subprocess.run(
        [str(plugin)], input=json.dumps(config).encode(), env=env, capture_output=True, timeout=300
    )
    elapsed = (time.perf_counter() - started) * 1000
    if proc.returncode:
        raise RuntimeError(runner.plugin_error(proc.stdout, proc.stderr, proc.returncode))
    return elapsed, json.loads(proc.stdout or b"{}")


def probe(cluster, plugin, conf, netns, prefix, allocated):
    """Fill, then ADD and DEL the one address left after the allocated ones."""
    network = ipaddress.ip_network(f"10.{prefix}.0.0/{prefix}", strict=False)
    cidr, hosts = str(network), allocated + 1
    network_name = f"bench-scale-{prefix}"
    name = whereabouts_pool_name(network_name, cidr)
    config = {
        "cniVersion": "0.3.1",
        "name": network_name,
        "type": "ipvlan",
        "ipam": {
            "type": "whereabouts",
            "range": cidr,
            "range_end": str(network.network_address + hosts),
            "network_name": network_name,
            "configuration_path": str(conf),
            # Its cluster-wide per-address check is one more read per ADD, not what grows.
            "enable_overlapping_ranges": False,
        },
    }
    try:
        size = fill(cluster, name, cidr, allocated)
    except K8sError as exc:
        cluster.delete(WHEREABOUTS_API, "IPPool", name, NAMESPACE)
        return f"{hosts} addresses in a /{prefix}: the API server refuses the full IPPool: {exc}"
    adds, dels, last = [], [], None
    try:
        for _ in range(ROUNDS):
            container = uuid.uuid4().hex
            took, result = call(plugin, "ADD", config, netns, container)
            adds.append(took)
            last = runner.plugin_ips(result)
            dels.append(call(plugin, "DEL", config, netns, container)[0])
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return f"{hosts} addresses in a /{prefix} (IPPool {size / 1024:.0f} KiB): ADD fails: {exc}"
    finally:
        cluster.delete(WHEREABOUTS_API, "IPPool", name, NAMESPACE)
    return (
        f"{hosts} addresses in a /{prefix} (IPPool {size / 1024:.0f} KiB): ADD of the last free "
        f"address {last} median {statistics.median(adds):.0f} ms, max {max(adds):.0f} ms; "
        f"DEL median {statistics.median(dels):.0f} ms"
    )


def main(kubeconfig):
    cluster = Cluster.connect(kubeconfig, field_manager="gpu-portal-bench")
    plugin = cni_path() / "whereabouts"
    with tempfile.TemporaryDirectory() as state, runner.network_namespace() as netns:
        runner.write_whereabouts_conf(Path(state), kubeconfig, "error")
        conf = Path(state) / "whereabouts.conf"
        for prefix, allocated in SIZES:
            line = probe(cluster, plugin, conf, netns, prefix, allocated)
            print(f"real Whereabouts, {line}", flush=True)
            if "fails" in line or "refuses" in line:
                break
