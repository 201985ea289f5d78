"""Cluster objects hack/volcano.sh needs around real Volcano and KWOK.

    cluster.py --kubeconfig K webhooks --url https://127.0.0.1:P --ca-file CA --paths /jobs/...
    cluster.py --kubeconfig K release
    cluster.py --kubeconfig K scheduler-config --file hack/volcano/scheduler.conf
    cluster.py --kubeconfig K wait-queue default
    cluster.py --kubeconfig K seed --nodes 8 --leaves 4 --spines 2

Simulated nodes keep the nvidia.com/gpu=present:NoSchedule taint of the project's other
simulated nodes (GPU pods the portal builds tolerate it) and get no kwok.x-k8s.io/node taint,
which those pods do not tolerate.

vc-webhook-manager does not create its admission configurations: it waits for objects named
`volcano-admission-service-<path with dashes>` and patches their caBundle. Their rules follow
Volcano v1.14.1's Helm chart (installer/helm/chart/volcano/templates/webhooks.yaml), pointing at a
URL instead of an in-cluster Service.
"""

import argparse
import base64
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from k8s_adapters.client import Cluster  # noqa: E402
from k8s_adapters.nodes import SimulatedNode, build_node  # noqa: E402

FIELD_MANAGER = "gpu-portal-volcano-setup"
PREFIX = "volcano-admission-service"
KWOK_ANNOTATION = "kwok.x-k8s.io/node"

JOBS = ("batch.volcano.sh", "v1alpha1", "jobs")
QUEUES = ("scheduling.volcano.sh", "v1beta1", "queues")
PODGROUPS = ("scheduling.volcano.sh", "v1beta1", "podgroups")

# path -> (configuration kind, webhook name, (API group, version, resource), operations)
ADMISSION = {
    "/jobs/mutate": ("Mutating", "mutatejob", JOBS, ["CREATE"]),
    "/jobs/validate": ("Validating", "validatejob", JOBS, ["CREATE", "UPDATE"]),
    "/queues/mutate": ("Mutating", "mutatequeue", QUEUES, ["CREATE"]),
    "/queues/validate": ("Validating", "validatequeue", QUEUES, ["CREATE", "UPDATE", "DELETE"]),
    "/podgroups/mutate": ("Mutating", "mutatepodgroup", PODGROUPS, ["CREATE"]),
    "/podgroups/validate": ("Validating", "validatepodgroup", PODGROUPS, ["CREATE"]),
}


def configuration_name(path):
    return PREFIX + path.replace("/", "-")


def build_webhook_configuration(path, url, ca_bundle):
    kind, hook, (group, version, resource), operations = ADMISSION[path]
    webhook = {
        "name": f"{hook}.volcano.sh",
        "admissionReviewVersions": ["v1"],
        # caBundle set here too, so the API server trusts the hook from its first call; the
        # webhook manager finds it equal and leaves it.
        "clientConfig": {"url": url.rstrip("/") + path, "caBundle": ca_bundle},
        "failurePolicy": "Fail",
        "matchPolicy": "Equivalent",
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system"],
                }
            ]
        },
        "objectSelector": {},
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": [version],
                "operations": operations,
                "resources": [resource],
                "scope": "*",
            }
        ],
        "sideEffects": "NoneOnDryRun",
        "timeoutSeconds": 10,
    }
    if kind == "Mutating":
        webhook["reinvocationPolicy"] = "Never"
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": f"{kind}WebhookConfiguration",
        "metadata": {"name": configuration_name(path)},
        "webhooks": [webhook],
    }


def webhooks(cluster, args):
    paths = [p for p in args.paths.split(",") if p]
    unknown = [p for p in paths if p not in ADMISSION]
    if unknown:
        sys.exit(f"no webhook configuration known for {', '.join(unknown)}")
    ca_bundle = base64.b64encode(Path(args.ca_file).read_bytes()).decode()
    cluster.apply(build_webhook_configuration(p, args.url, ca_bundle) for p in paths)
    print(f"webhook configurations for {', '.join(paths)}", file=sys.stderr)


def scheduler_config(cluster, args):
    """Publish the scheduler's configuration where Volcano's Helm chart keeps it (the portal's
    collector reads it from there); vc-scheduler itself reads the file."""
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": args.namespace}}
    configmap = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "volcano-scheduler-configmap", "namespace": args.namespace},
        "data": {"volcano-scheduler.conf": Path(args.file).read_text()},
    }
    cluster.apply([namespace, configmap])


def release(cluster, args):
    """After stop: without the webhook manager, its configurations (failurePolicy Fail) would
    refuse every Volcano job and queue write; and a restarted kwok would wait out the leases
    the stopped one held (--node-lease-duration-seconds) before running pods again."""
    admission = "admissionregistration.k8s.io/v1"
    for path, (kind, *_) in ADMISSION.items():
        cluster.delete(admission, f"{kind}WebhookConfiguration", configuration_name(path))
    for node in cluster.list("v1", "Node"):
        meta = node["metadata"]
        if (meta.get("annotations") or {}).get(KWOK_ANNOTATION) == "fake":
            cluster.delete("coordination.k8s.io/v1", "Lease", meta["name"], "kube-node-lease")


def wait_queue(cluster, args):
    """The scheduler creates the `default` and `root` queues; jobs without a queue need them."""
    deadline = time.monotonic() + args.timeout
    while True:
        queue = cluster.get("scheduling.volcano.sh/v1beta1", "Queue", args.name)
        if queue and (queue.get("status") or {}).get("state") == "Open":
            return
        if time.monotonic() > deadline:
            sys.exit(f"queue {args.name} not Open after {args.timeout}s")
        time.sleep(0.3)


# -- simulated GPU nodes and their network topology ---------------------------------------------


def build_kwok_node(node: SimulatedNode) -> dict:
    """The project's simulated node (GPU labels, the nvidia.com/gpu taint GPU pods tolerate),
    handed to KWOK: the annotation makes kwok manage it, the status carries only capacity, so
    kwok's node-initialize stage sets conditions, the address and the kubelet port."""
    manifest = build_node(node)
    manifest["metadata"]["annotations"] = {KWOK_ANNOTATION: "fake"}
    manifest["metadata"]["labels"]["type"] = "kwok"
    resources = {
        "cpu": str(node.cpu),
        "memory": f"{node.memory_gib}Gi",
        "pods": "110",
        "nvidia.com/gpu": str(node.gpus),
    }
    manifest["status"] = {"capacity": resources, "allocatable": resources}
    return manifest


def build_hypernode(name, tier, tier_name, member_type, members):
    return {
        "apiVersion": "topology.volcano.sh/v1alpha1",
        "kind": "HyperNode",
        "metadata": {"name": name},
        "spec": {
            "tier": tier,
            "tierName": tier_name,
            "members": [
                {"type": member_type, "selector": {"exactMatch": {"name": m}}} for m in members
            ],
        },
    }


def split(items, parts):
    """Contiguous, near-equal slices: nodes 0-1 under leaf 0, 2-3 under leaf 1, ..."""
    size, extra = divmod(len(items), parts)
    out, start = [], 0
    for i in range(parts):
        end = start + size + (1 if i < extra else 0)
        out.append(items[start:end])
        start = end
    return out


def build_topology(prefix, node_names, leaves, spines):
    """Two tiers: leaf switches (tier 1) over the nodes, spines (tier 2) over the leaves."""
    leaf_names = [f"{prefix}leaf-{i}" for i in range(leaves)]
    objs = [
        build_hypernode(name, 1, "leaf", "Node", members)
        for name, members in zip(leaf_names, split(node_names, leaves), strict=True)
    ]
    spine_members = split(leaf_names, spines)
    objs += [
        build_hypernode(f"{prefix}spine-{i}", 2, "spine", "HyperNode", members)
        for i, members in enumerate(spine_members)
    ]
    return objs


def wait_nodes_ready(cluster, names, timeout):
    """KWOK marks the nodes Ready and drops the not-ready taint the API server added."""
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        for name in sorted(pending):
            node = cluster.get("v1", "Node", name) or {}
            conditions = (node.get("status") or {}).get("conditions") or []
            ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
            taints = (node.get("spec") or {}).get("taints") or []
            if ready and not any(t["key"] == "node.kubernetes.io/not-ready" for t in taints):
                pending.discard(name)
        if pending and time.monotonic() > deadline:
            sys.exit(f"nodes not Ready (is kwok running?): {', '.join(sorted(pending))}")
        time.sleep(0.3)


def seed(cluster, args):
    nodes = [
        SimulatedNode(f"{args.prefix}{i:02d}", args.gpus, product=args.product)
        for i in range(args.nodes)
    ]
    for node in nodes:
        cluster.apply_one(build_kwok_node(node))
        cluster.apply_status(build_kwok_node(node))
    names = [n.name for n in nodes]
    cluster.apply(build_topology(args.prefix, names, args.leaves, args.spines))
    if args.wait:
        wait_nodes_ready(cluster, names, args.wait)
    print(
        f"{len(nodes)} simulated nodes ({args.gpus} x {args.product}), "
        f"{args.leaves} leaf and {args.spines} spine HyperNodes",
        file=sys.stderr,
    )


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--kubeconfig", required=True)
    sub = parser.add_subparsers(dest="command", required=True)

    hooks = sub.add_parser("webhooks")
    hooks.add_argument("--url", required=True)
    hooks.add_argument("--ca-file", required=True)
    hooks.add_argument("--paths", required=True)
    hooks.set_defaults(run=webhooks)

    sub.add_parser("release").set_defaults(run=release)

    conf = sub.add_parser("scheduler-config")
    conf.add_argument("--file", required=True)
    conf.add_argument("--namespace", default="volcano-system")
    conf.set_defaults(run=scheduler_config)

    queue = sub.add_parser("wait-queue")
    queue.add_argument("name")
    queue.add_argument("--timeout", type=float, default=60)
    queue.set_defaults(run=wait_queue)

    nodes = sub.add_parser("seed")
    nodes.add_argument("--nodes", type=int, default=8)
    nodes.add_argument("--gpus", type=int, default=8)
    nodes.add_argument("--product", default="NVIDIA-H100-80GB-HBM3")
    nodes.add_argument("--prefix", default="kwok-gpu-")
    nodes.add_argument("--leaves", type=int, default=4)
    nodes.add_argument("--spines", type=int, default=2)
    nodes.add_argument("--wait", type=float, default=60, help="seconds to wait for Ready (0: no)")
    nodes.set_defaults(run=seed)

    args = parser.parse_args()
    args.run(Cluster.connect(args.kubeconfig, field_manager=FIELD_MANAGER), args)


if __name__ == "__main__":
    main()
