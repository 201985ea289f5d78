"""The cluster console: a real collector process watching the real API server, pages and API
reading its snapshot."""

import os
import signal
import subprocess
import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.core.cache import cache
from rest_framework.test import APIClient

from core import snapshot as store
from core.cluster import GPU_SUMMARY_KEY, GPU_SUMMARY_SECONDS, node_gpus
from k8s_adapters.errors import K8sError
from k8s_adapters.inventory import (
    diagnose,
    queue_quota_disagreements,
    reduce_claim,
    reduce_node,
    reduce_pod,
    reduce_quota,
    reduce_scheduler_config,
    reduce_storage_class,
    shares_not_kept,
    snapshot,
    topology_ignored,
    unbound_claims,
)
from k8s_adapters.nodes import SimulatedNode, build_node, build_node_status
from tests.conftest import ROOT
from tests.helpers import wait_for
from tests.tenants.conftest import make_user


def node_obj(name, gpus, product="P", ready=True, present=True, cordoned=False):
    node = build_node(SimulatedNode(name, gpus, product=product, ready=ready))
    node["status"] = build_node_status(SimulatedNode(name, gpus, product=product, ready=ready))[
        "status"
    ]
    node["metadata"]["labels"]["nvidia.com/gpu.present"] = "true" if present else "false"
    node["spec"]["unschedulable"] = cordoned
    return node


def pod_obj(name, node, gpus, phase="Running", tenant="vision", job="train"):
    return {
        "metadata": {
            "name": name,
            "namespace": f"tenant-{tenant}",
            "labels": {"volcano.sh/job-name": job, "gpu-portal.io/tenant": tenant},
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
        },
        "status": {"phase": phase},
    }


def test_the_snapshot_counts_gpus_per_node_product_and_tenant():
    nodes = [reduce_node(node_obj("a", 8, "H100")), reduce_node(node_obj("b", 4, "A100"))]
    pods = [
        reduce_pod(p)
        for p in [
            pod_obj("p1", "a", 2),
            pod_obj("p2", "a", 3, job="eval"),
            pod_obj("p3", "b", 4, tenant="nlp"),
            pod_obj("done", "a", 3, phase="Succeeded"),
            pod_obj("unbound", "", 1),
            {**pod_obj("elsewhere", "b", 1), "metadata": {"name": "x", "namespace": "default"}},
        ]
    ]
    pods[-1]["tenant"] = "vision"  # a label any pod may carry: its namespace counts
    snap = snapshot(nodes, pods, [], [{"name": "nvidia"}], [])
    rows = {n["name"]: (n["capacity"], n["used"], n["free"]) for n in snap["nodes"]}
    assert rows == {"a": (8, 5, 3), "b": (4, 5, 0)}
    assert snap["nodes"][0]["jobs"] == [
        {"tenant": "vision", "job": "eval", "gpus": 3},
        {"tenant": "vision", "job": "train", "gpus": 2},
    ]
    assert snap["products"]["H100"] == {
        "nodes": 1,
        "capacity": 8,
        "allocatable": 8,
        "used": 5,
        "free": 3,
    }
    assert snap["totals"]["free"] == 3
    assert snap["tenants"] == {"tenant-vision": 5, "tenant-nlp": 4, "default": 1}
    assert snap["diagnostics"] == []


def test_gpus_asked_for_by_init_containers_and_sidecars_count_as_the_scheduler_counts_them():
    def with_init(gpus, init):
        pod = pod_obj("p", "a", gpus)
        pod["spec"]["initContainers"] = [
            {"name": f"i{n}", "resources": {"limits": {"nvidia.com/gpu": str(g)}}, **extra}
            for n, (g, extra) in enumerate(init)
        ]
        return reduce_pod(pod)["gpus"]

    sidecar = {"restartPolicy": "Always"}
    assert with_init(2, [(4, {})]) == 4  # a check run on 4 GPUs before a 2-GPU trainer
    assert with_init(2, [(1, {}), (1, {})]) == 2
    assert with_init(2, [(1, sidecar)]) == 3  # a sidecar runs beside the containers
    assert with_init(1, [(2, sidecar), (3, {})]) == 5  # an init step beside the sidecar before it
    assert with_init(1, [(3, {}), (2, sidecar)]) == 3


def test_gpus_of_nodes_that_take_no_new_pods_are_not_free():
    # A cordoned or NotReady node's idle GPUs showed as free: a job launched on the strength of
    # them stayed pending.
    nodes = [
        reduce_node(node_obj("up", 8)),
        reduce_node(node_obj("down", 8, ready=False)),
        reduce_node(node_obj("cordoned", 8, cordoned=True)),
    ]
    snap = snapshot(nodes, [], [], [{"name": "nvidia"}], [])
    assert {n["name"]: n["free"] for n in snap["nodes"]} == {"up": 8, "down": 0, "cordoned": 0}
    assert snap["totals"]["free"] == 8


def test_a_departments_guarantee_is_not_counted_beside_its_childrens():
    queues = [
        {"name": "dept-ml", "guarantee": 12, "parent": ""},
        {"name": "tenant-a", "guarantee": 6, "parent": "dept-ml"},
        {"name": "tenant-b", "guarantee": 6, "parent": "dept-ml"},
    ]
    nodes = [reduce_node(node_obj(f"n{i}", 8)) for i in range(2)]
    diagnostics = snapshot(nodes, [], queues, [{"name": "nvidia"}], [])["diagnostics"]
    assert [d["kind"] for d in diagnostics] == []


def test_broken_nodes_and_settings_produce_their_diagnostics():
    broken = node_obj("no-plugin", 0)
    rows = snapshot(
        [
            reduce_node(broken),
            reduce_node(node_obj("down", 8, ready=False)),
            reduce_node(node_obj("cordoned", 8, cordoned=True)),
        ],
        [reduce_pod(pod_obj("p", "down", 2)), reduce_pod(pod_obj("q", "cordoned", 1))],
        [{"name": "q", "guarantee": 40}],
        [],
        [],
    )["diagnostics"]
    assert [(d["kind"], d["subject"]) for d in rows] == [
        ("runtimeclass-missing", "RuntimeClass nvidia"),
        ("unhealthy-node-in-use", "node cordoned"),
        ("unhealthy-node-in-use", "node down"),
        ("device-plugin", "node no-plugin"),
        ("over-guaranteed", "queues"),
    ]
    assert "runtimeClassName: nvidia" in rows[3]["fix"]
    assert diagnose([], [], [], {"allocatable": 0}) == []


@pytest.fixture
def gpu_nodes(cluster):
    """Nodes no simulator manages, with a Ready status of the test's own: any left behind would
    take the pods of later tests that tolerate every taint, and keep them Pending for ever. So
    they carry a label, and every labelled node goes before and after each test."""
    product = f"TEST-GPU-{uuid.uuid4().hex[:6].upper()}"

    def make(name, gpus, ready=True, present=True):
        node = SimulatedNode(f"{name}-{product.lower()}", gpus, product=product, ready=ready)
        manifest = build_node(node)
        manifest["metadata"]["labels"]["nvidia.com/gpu.present"] = str(present).lower()
        manifest["metadata"]["labels"][FIXTURE_NODE] = "true"
        cluster.apply_one(manifest)
        cluster.apply_status(build_node_status(node))
        return node.name

    remove_fixture_nodes(cluster)
    yield product, make
    remove_fixture_nodes(cluster)


FIXTURE_NODE = "test.gpu-portal.io/console-node"


def remove_fixture_nodes(cluster):
    def removed():
        try:
            left = cluster.list("v1", "Node", labels={FIXTURE_NODE: "true"})
            for node in left:
                cluster.delete("v1", "Node", node["metadata"]["name"])
        except K8sError:  # the API server restarted by a test is not back yet
            return False
        return not left

    wait_for(removed, timeout=60, interval=1, message="the test's nodes to be removed")


def bind(cluster, namespace, name, node, gpus):
    cluster.apply_one(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {"volcano.sh/job-name": "train"},
            },
            "spec": {
                "nodeName": node,
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox:1.36",
                        "resources": {"limits": {"nvidia.com/gpu": str(gpus)}},
                    }
                ],
            },
        }
    )


@pytest.mark.django_db
def test_the_console_shows_exact_gpu_numbers_and_diagnostics_from_the_cluster(
    collector, gpu_nodes, cluster, namespace
):
    product, make = gpu_nodes
    big, small = make("big", 8), make("small", 4)
    broken, down = make("broken", 0), make("down", 8, ready=False)
    bind(cluster, namespace, "p1", big, 3)
    bind(cluster, namespace, "p2", big, 2)
    bind(cluster, namespace, "p3", down, 1)

    def ours():
        snap = store.read()
        return snap if snap["products"].get(product, {}).get("used") == 6 else None

    wait_for(ours, timeout=10, message="the collector to see the pods")
    admin = make_user("admin", staff=True)
    api = APIClient()
    api.force_login(admin)
    data = api.get("/api/v1/cluster/", {"product": product, "sort": "free"}).json()
    # A NotReady node takes no new pods: none of its GPUs is free.
    assert [(n["name"], n["allocatable"], n["used"], n["free"]) for n in data["nodes"]] == [
        (small, 4, 0, 4),
        (big, 8, 5, 3),
        (broken, 0, 0, 0),
        (down, 8, 1, 0),
    ]
    assert data["products"][product] == {
        "nodes": 4,
        "capacity": 20,
        "allocatable": 20,
        "used": 6,
        "free": 7,
    }
    subjects = {(d["kind"], d["subject"]) for d in data["diagnostics"]}
    assert ("device-plugin", f"node {broken}") in subjects
    assert ("unhealthy-node-in-use", f"node {down}") in subjects
    assert not {s for s in subjects if big in s[1] or small in s[1]}

    wait_for(lambda: len(store.history()) >= 2, message="two history samples")
    page = api.get("/console/", {"product": product}).content.decode()
    assert 'data-testid="history"' in page
    assert f'data-testid="node-{big}"' in page
    assert f"{namespace}/train" in page
    researcher = APIClient()
    researcher.force_login(make_user("bob"))
    assert researcher.get("/api/v1/cluster/").status_code == 403
    assert researcher.get("/api/v1/cluster/capacity/").json()["products"][product]["free"] == 7


def test_the_collector_shows_the_clusters_queues_runtime_classes_and_hypernodes(
    collector, gpu_nodes, cluster
):
    _, make = gpu_nodes
    node = make("member", 8)
    tag = uuid.uuid4().hex[:6]
    queue, runtime, hypernode = f"q-{tag}", f"rc-{tag}", f"hn-{tag}"
    made = [
        ("scheduling.volcano.sh/v1beta1", "Queue", queue, {"spec": {"weight": 3}}),
        ("node.k8s.io/v1", "RuntimeClass", runtime, {"handler": "runc"}),
        (
            "topology.volcano.sh/v1alpha1",
            "HyperNode",
            hypernode,
            {
                "spec": {
                    "tier": 1,
                    "members": [{"type": "Node", "selector": {"exactMatch": {"name": node}}}],
                }
            },
        ),
    ]
    try:
        for api, kind, name, body in made:
            cluster.apply_one({"apiVersion": api, "kind": kind, "metadata": {"name": name}, **body})

        def seen():
            snap = store.read()
            queues = {q["name"]: q["weight"] for q in snap["queues"]}
            tiers = {h["name"]: (h["tier"], h["nodes"], h["free"]) for h in snap["hypernodes"]}
            return (
                queues.get(queue) == 3
                and runtime in snap["runtime_classes"]
                and tiers.get(hypernode) == (1, 1, 8)
            )

        wait_for(seen, timeout=15, message="the collector to see the queue, class and hypernode")
    finally:
        for api, kind, name, _ in made:
            # Volcano's webhook refuses to delete a queue its cache has not seen yet, which at
            # times lags more than the few seconds Cluster.delete waits.
            wait_for(
                lambda api=api, kind=kind, name=name: deleted(cluster, api, kind, name),
                timeout=60,
                interval=1,
                message=f"{kind} {name} to be deleted",
            )


def deleted(cluster, api, kind, name):
    try:
        cluster.delete(api, kind, name)
    except K8sError:
        return False
    return True


def test_launches_read_the_nodes_gpus_the_collector_keeps_instead_of_listing_nodes(
    collector, gpu_nodes
):
    """Listed by a launch, the summary is cached for half a minute; the collector, which
    watches the nodes, replaces it as they change: a new node's GPUs count within seconds, and
    no launch lists the nodes while the collector runs."""
    product, make = gpu_nodes
    cache.set(GPU_SUMMARY_KEY, node_gpus(), GPU_SUMMARY_SECONDS)  # as a launch left it
    assert product not in node_gpus().products
    make("published", 16)

    def published():  # the node is created, then its status: both reach the summary
        summary = node_gpus()
        return product in summary.products and summary.largest >= 16

    wait_for(published, timeout=15, message="the collector to publish the new node's GPUs")


@pytest.mark.django_db
def test_the_collector_recovers_from_an_api_server_restart(collector, gpu_nodes, cluster):
    product, make = gpu_nodes
    make("before", 8)
    wait_for(lambda: product in store.read()["products"], message="the first node")
    state = ROOT / ".local" / "controlplane"
    if not (state / "kube-apiserver.pid").exists():
        pytest.fail("this test restarts the local API server; KUBECONFIG points elsewhere")
    pid = int((state / "kube-apiserver.pid").read_text())
    os.kill(pid, signal.SIGKILL)  # a crash: no graceful goodbye to the watches

    def gone():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False

    wait_for(gone, timeout=30, message="the API server to stop")
    subprocess.run(
        ["bash", str(ROOT / "hack" / "controlplane.sh"), "start"], check=True, capture_output=True
    )
    after = make("after", 4)
    wait_for(
        lambda: any(n["name"] == after for n in store.read()["nodes"]),
        timeout=30,
        message="the collector to see a node created after the restart",
    )
    assert collector.poll() is None


def test_the_topology_shows_free_gpus_and_idle_nodes_per_hypernode():
    rows = snapshot(
        [reduce_node(node_obj(f"n{i}", 8)) for i in range(4)],
        [reduce_pod(pod_obj("p", "n0", 8)), reduce_pod(pod_obj("q", "n2", 2))],
        [],
        [{"name": "nvidia"}],
        [
            {
                "name": "rack-a",
                "tier": 1,
                "members": [
                    {"type": "Node", "name": "n0", "pattern": ""},
                    {"type": "Node", "name": "n1", "pattern": ""},
                ],
            },
            {
                "name": "rack-b",
                "tier": 1,
                "members": [{"type": "Node", "name": "", "pattern": "n[23]"}],
            },
            {
                "name": "spine",
                "tier": 2,
                "members": [
                    {"type": "HyperNode", "name": "rack-a", "pattern": ""},
                    {"type": "HyperNode", "name": "rack-b", "pattern": ""},
                ],
            },
        ],
    )["hypernodes"]
    assert [(h["name"], h["nodes"], h["free"], h["idle_nodes"]) for h in rows] == [
        ("spine", 4, 22, 2),
        ("rack-a", 2, 8, 1),
        ("rack-b", 2, 14, 1),
    ]


@pytest.mark.parametrize(
    ("pattern", "nodes"),
    [
        ("^n[01]", 2),  # Volcano searches (Go's MatchString): a prefix names n0 and n1
        ("n\\d+\\z", 0),  # RE2 takes \\z, Python's re does not: none, and no crash
        ("gpu-\\pL+", 0),
    ],
)
def test_hypernode_patterns_name_nodes_as_volcano_reads_them(pattern, nodes):
    rows = snapshot(
        [reduce_node(node_obj(f"n{i}", 8)) for i in range(4)],
        [],
        [],
        [],
        [
            {
                "name": "rack",
                "tier": 1,
                "members": [{"type": "Node", "name": "", "pattern": pattern}],
            }
        ],
    )["hypernodes"]
    assert [(h["name"], h["nodes"]) for h in rows] == [("rack", nodes)]


def test_the_history_chart_plots_samples_oldest_first():
    samples = [
        {"at": f"2026-12-0{d}T00:00", "total": {"allocatable": 16, "used": used}, "products": {}}
        for d, used in [(1, 0), (2, 8), (3, 16)]
    ]
    chart = store.chart(samples, width=200, height=100)
    assert chart["used"] == "0.0,100.0 100.0,50.0 200.0,0.0"
    assert chart["allocatable"] == "0.0,0.0 100.0,0.0 200.0,0.0"
    assert store.chart(samples[:1]) is None


def claim_obj(name, storage_class="", phase="Pending", age_s=600, portal=True):
    created = datetime.now(UTC) - timedelta(seconds=age_s)
    labels = {"app.kubernetes.io/managed-by": "gpu-portal"} if portal else {}
    return {
        "metadata": {
            "name": name,
            "namespace": "tenant-vision",
            "labels": labels,
            "creationTimestamp": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
        },
        "spec": {"storageClassName": storage_class} if storage_class else {},
        "status": {"phase": phase},
    }


def storage_class_obj(name, default=False, provisioner="csi.example.org"):
    annotations = {"storageclass.kubernetes.io/is-default-class": "true"} if default else {}
    return {"metadata": {"name": name, "annotations": annotations}, "provisioner": provisioner}


@pytest.mark.parametrize(
    ("claim", "classes", "cause"),
    [
        (claim_obj("a-workspace"), [], "no default one"),
        (claim_obj("b-workspace", "fast"), [storage_class_obj("slow")], "fast, which does not"),
        (
            claim_obj("c-workspace"),
            [storage_class_obj("local", default=True)],
            "StorageClass local (provisioner csi.example.org) has not created",
        ),
    ],
)
def test_claims_left_unbound_say_which_storage_setting_is_missing(claim, classes, cause):
    found = unbound_claims(
        [reduce_claim(claim)], [reduce_storage_class(c) for c in classes], datetime.now(UTC)
    )
    assert [d["kind"] for d in found] == ["claims-unbound"]
    assert cause in found[0]["cause"]


def test_young_bound_and_foreign_claims_are_not_diagnosed():
    claims = [
        claim_obj("young", age_s=10),
        claim_obj("bound", phase="Bound"),
        claim_obj("theirs", portal=False),
    ]
    assert unbound_claims([reduce_claim(c) for c in claims], [], datetime.now(UTC)) == []


def test_a_queue_and_quota_edited_apart_are_reported_per_tenant():
    quota = {
        "metadata": {
            "name": "tenant-quota",
            "namespace": "tenant-vision",
            "labels": {"gpu-portal.io/tenant": "vision"},
        },
        "spec": {"hard": {"requests.nvidia.com/gpu": "16"}},
    }
    queues = [{"name": "tenant-vision", "capability": 8}]
    [found] = queue_quota_disagreements(queues, [reduce_quota(quota)])
    assert found["subject"] == "tenant vision"
    assert "allows 8 GPUs but its ResourceQuota 16" in found["cause"]
    assert (
        queue_quota_disagreements(
            [{"name": "tenant-vision", "capability": 16}], [reduce_quota(quota)]
        )
        == []
    )


def scheduler_configmap(conf_text):
    return {
        "metadata": {"name": "volcano-scheduler-configmap"},
        "data": {"volcano-scheduler.conf": conf_text},
    }


def test_hypernodes_without_the_topology_plugin_are_diagnosed():
    conf = (ROOT / "hack" / "volcano" / "scheduler.conf").read_text()  # what the test bed runs
    hypernodes = [{"name": "leaf-0", "tier": 1, "members": []}]
    running = reduce_scheduler_config(scheduler_configmap(conf))
    assert "network-topology-aware" in running["plugins"]
    assert topology_ignored([running], hypernodes) == []
    stock = conf.replace("  - name: network-topology-aware\n", "  - name: unrelated\n")
    [found] = topology_ignored([reduce_scheduler_config(scheduler_configmap(stock))], hypernodes)
    assert found["kind"] == "topology-ignored"
    assert "network topology is ignored" in found["cause"]
    assert topology_ignored([], hypernodes) == []  # config not readable: no guess


def test_a_scheduler_that_does_not_keep_tenants_shares_is_diagnosed():
    conf = (ROOT / "hack" / "volcano" / "scheduler.conf").read_text()  # the recommended one
    assert shares_not_kept([reduce_scheduler_config(scheduler_configmap(conf))]) == []
    stock = (  # Volcano's default: proportion and overcommit, no reclaim
        conf.replace(
            "  - name: capacity\n", "  - name: proportion\n  - name: overcommit\n"
        ).replace("enqueue, allocate, reclaim, backfill", "enqueue, allocate, backfill")
    )
    found = shares_not_kept([reduce_scheduler_config(scheduler_configmap(stock))])
    causes = " ".join(f["cause"] for f in found)
    assert {f["kind"] for f in found} == {"shares-not-kept"}
    assert "deserved shares are ignored (proportion splits the cluster by queue weight)" in causes
    assert "reclaim action" in causes
    assert "overcommit" in causes
    assert shares_not_kept([]) == []  # config not readable: no guess


@pytest.mark.django_db
def test_the_unknown_product_filter_shows_the_nodes_without_a_product_label(monkeypatch):
    """The products table counts nodes without a GPU product label as "unknown", and offers
    that as a filter: it showed no node."""
    from portal.console import console_data

    nodes = [reduce_node(node_obj("a", 8, "H100")), reduce_node(node_obj("b", 4, ""))]
    snap = snapshot(nodes, [], [], [{"name": "nvidia"}], [])
    assert snap["products"]["unknown"]["nodes"] == 1
    monkeypatch.setattr(store, "read", lambda: snap)
    assert [n["name"] for n in console_data({"product": "unknown"})["nodes"]] == ["b"]
    assert [n["name"] for n in console_data({"product": "H100"})["nodes"]] == ["a"]


def test_the_collector_stops_at_once_on_sigterm(collector):
    """A pod's stop sends SIGTERM: the collector ends cleanly at once, where it was killed after
    the grace period (a Python process as a container's PID 1 ignores a SIGTERM it does not
    handle), and two collectors followed the same changes meanwhile."""
    collector.send_signal(signal.SIGTERM)
    assert collector.wait(timeout=10) == 0
