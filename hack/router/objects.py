"""Kubernetes objects for the router test bed, written through the portal's own adapter
(server-side apply under one field manager), so nothing here needs kubectl.

    objects.py --kubeconfig FILE gateway --namespace NS --gateway NAME --gateway-class C --port P
    objects.py --kubeconfig FILE wait-gateway --namespace NS --gateway NAME [--timeout S]
    objects.py --kubeconfig FILE apply FILE...     (YAML, `-` for stdin)
    objects.py --kubeconfig FILE delete FILE...

The Gateway's HTTP listener port must equal Traefik's web entrypoint port: Traefik matches a
listener to an entrypoint by port, and any other port leaves the listener `PortUnavailable`.
"""

import argparse
import sys
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from k8s_adapters.client import Cluster  # noqa: E402
from k8s_adapters.errors import K8sError  # noqa: E402

CONTROLLER_NAME = "traefik.io/gateway-controller"
GATEWAY_API = "gateway.networking.k8s.io/v1"


def build_gateway_objects(namespace, gateway, gateway_class, port):
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        {
            "apiVersion": GATEWAY_API,
            "kind": "GatewayClass",
            "metadata": {"name": gateway_class},
            "spec": {"controllerName": CONTROLLER_NAME},
        },
        {
            "apiVersion": GATEWAY_API,
            "kind": "Gateway",
            "metadata": {"name": gateway, "namespace": namespace},
            "spec": {
                "gatewayClassName": gateway_class,
                # Routes from every namespace may attach: the portal writes its routes in the
                # tenants' namespaces, not in the router's.
                "listeners": [
                    {
                        "name": "web",
                        "protocol": "HTTP",
                        "port": port,
                        "allowedRoutes": {"namespaces": {"from": "All"}},
                    }
                ],
            },
        },
    ]


def condition(obj, kind):
    conditions = ((obj or {}).get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), None)


def wait_gateway(cluster, namespace, gateway, timeout):
    deadline = time.monotonic() + timeout
    gw = programmed = None
    while True:
        try:
            gw = cluster.get(GATEWAY_API, "Gateway", gateway, namespace)
            programmed = condition(gw, "Programmed")
        except K8sError as exc:  # keep waiting through API hiccups; report the last state
            programmed = f"read failed: {exc}"
        if isinstance(programmed, dict) and programmed["status"] == "True":
            return
        if time.monotonic() > deadline:
            listeners = ((gw or {}).get("status") or {}).get("listeners")
            sys.exit(
                f"Gateway {namespace}/{gateway} not Programmed after {timeout}s: "
                f"{programmed}; listeners: {listeners}"
            )
        time.sleep(0.5)


def load_documents(paths):
    for path in paths:
        text = sys.stdin.read() if path == "-" else Path(path).read_text()
        yield from (doc for doc in yaml.safe_load_all(text) if doc)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    sub = parser.add_subparsers(dest="action", required=True)
    for name in ("gateway", "wait-gateway"):
        p = sub.add_parser(name)
        p.add_argument("--namespace", required=True)
        p.add_argument("--gateway", required=True)
        p.add_argument("--gateway-class")
        p.add_argument("--port", type=int)
        p.add_argument("--timeout", type=float, default=60)
    for name in ("apply", "delete"):
        sub.add_parser(name).add_argument("files", nargs="+")
    args = parser.parse_args()

    cluster = Cluster.connect(args.kubeconfig, field_manager="gpu-portal-setup")
    if args.action == "gateway":
        objects = build_gateway_objects(args.namespace, args.gateway, args.gateway_class, args.port)
        cluster.apply(objects)
    elif args.action == "wait-gateway":
        wait_gateway(cluster, args.namespace, args.gateway, args.timeout)
    elif args.action == "apply":
        cluster.apply(load_documents(args.files))
    else:
        for doc in load_documents(args.files):
            meta = doc["metadata"]
            cluster.delete(doc["apiVersion"], doc["kind"], meta["name"], meta.get("namespace"))


if __name__ == "__main__":
    main()
