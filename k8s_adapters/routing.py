"""Pure builders for job endpoints: a Service per endpoint, and one route object set per job
through a routing driver (ingress-nginx annotations, or Traefik IngressRoute + ForwardAuth).
Both drivers send every request to the portal's one forward-auth endpoint."""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from . import names
from .labels import portal_labels

TRAEFIK_API = "traefik.io/v1alpha1"
SERVICE_TYPES = {
    "ingress": "ClusterIP",
    "nodeport": "NodePort",
    "loadbalancer": "LoadBalancer",
    "podip": "ClusterIP",
}
ROUTE_KINDS = (
    ("networking.k8s.io/v1", "Ingress"),
    (TRAEFIK_API, "IngressRoute"),
    (TRAEFIK_API, "Middleware"),
)


@dataclass(frozen=True)
class EndpointSpec:
    name: str
    job: str
    task: str
    tenant: str
    owner: str
    namespace: str
    container_port: int
    protocol: str  # http | tcp | ssh
    mode: str  # ingress | nodeport | loadbalancer | podip
    host: str = ""  # the public host name of the route
    path: str = "/"  # path prefix in path mode, "/" in host mode

    @property
    def service_name(self) -> str:
        return names.endpoint_service(self.job, self.name)

    @property
    def routed(self) -> bool:
        return self.mode == "ingress" and self.protocol == "http"


@dataclass(frozen=True)
class AuthSpec:
    """Where the ingress asks whether a request may pass, and where browsers sign in."""

    auth_url: str
    signin_url: str
    response_headers: tuple[str, ...] = (
        "X-Auth-Request-User",
        "X-Auth-Request-Email",
        "X-Auth-Request-Groups",
    )
    cache_duration: str = "30s"


def _labels(endpoint: EndpointSpec) -> dict[str, str]:
    labels = portal_labels(
        tenant=endpoint.tenant, job=endpoint.job, owner=endpoint.owner, component="endpoint"
    )
    labels["gpu-portal.io/endpoint"] = endpoint.name
    return labels


def build_service(endpoint: EndpointSpec) -> dict:
    """Selects the task's pods by Volcano's own pod labels."""
    spec = {
        "type": SERVICE_TYPES[endpoint.mode],
        "selector": {"volcano.sh/job-name": endpoint.job, "volcano.sh/task-spec": endpoint.task},
        "ports": [
            {
                "name": endpoint.name[:15],
                "port": endpoint.container_port,
                "targetPort": endpoint.container_port,
                "protocol": "TCP",
            }
        ],
    }
    if endpoint.mode == "podip":
        spec["clusterIP"] = "None"  # headless: DNS answers with the pods' own addresses
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": endpoint.service_name,
            "namespace": endpoint.namespace,
            "labels": _labels(endpoint),
        },
        "spec": spec,
    }


def _job_labels(endpoints: Sequence[EndpointSpec]) -> dict[str, str]:
    first = endpoints[0]
    return portal_labels(
        tenant=first.tenant, job=first.job, owner=first.owner, component="endpoint"
    )


class IngressNginx:
    """One Ingress per job holding all its HTTP endpoints, so the controller reloads once.
    External auth: 401 from auth-url sends the browser to auth-signin with `rd`."""

    name = "ingress-nginx"

    def build(
        self, endpoints: Iterable[EndpointSpec], auth: AuthSpec, ingress_class: str = "nginx"
    ) -> list[dict[str, Any]]:
        routed = [e for e in endpoints if e.routed]
        if not routed:
            return []
        first = routed[0]
        annotations = {
            "nginx.ingress.kubernetes.io/auth-url": auth.auth_url,
            "nginx.ingress.kubernetes.io/auth-signin": auth.signin_url,
            "nginx.ingress.kubernetes.io/auth-response-headers": ",".join(auth.response_headers),
            "nginx.ingress.kubernetes.io/auth-cache-key": "$cookie_sessionid$http_host",
            "nginx.ingress.kubernetes.io/auth-cache-duration": f"200 401 403 {auth.cache_duration}",
            "nginx.ingress.kubernetes.io/proxy-read-timeout": "3600",
            "nginx.ingress.kubernetes.io/proxy-body-size": "0",
        }
        hosts: dict[str, list[dict[str, Any]]] = {}
        for e in routed:
            hosts.setdefault(e.host, []).append(
                {
                    "path": e.path,
                    "pathType": "Prefix",
                    "backend": {
                        "service": {"name": e.service_name, "port": {"number": e.container_port}}
                    },
                }
            )
        rules = [
            {**({"host": host} if host else {}), "http": {"paths": paths}}
            for host, paths in sorted(hosts.items())
        ]
        return [
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": {
                    "name": names.job_routes(first.job),
                    "namespace": first.namespace,
                    "labels": _job_labels(routed),
                    "annotations": annotations,
                },
                "spec": {"ingressClassName": ingress_class, "rules": rules},
            }
        ]


class Traefik:
    """A ForwardAuth Middleware and one IngressRoute per job. Traefik returns the auth answer
    to the browser as is, so the portal answers a 302 to its sign-in page itself."""

    name = "traefik"

    def build(
        self, endpoints: Iterable[EndpointSpec], auth: AuthSpec, ingress_class: str = ""
    ) -> list[dict[str, Any]]:
        routed = [e for e in endpoints if e.routed]
        if not routed:
            return []
        first = routed[0]
        middleware = f"{first.job}-auth"
        labels = _job_labels(routed)
        separator = "&" if "?" in auth.auth_url else "?"
        return [
            {
                "apiVersion": TRAEFIK_API,
                "kind": "Middleware",
                "metadata": {"name": middleware, "namespace": first.namespace, "labels": labels},
                "spec": {
                    "forwardAuth": {
                        "address": f"{auth.auth_url}{separator}redirect=1",
                        "authResponseHeaders": list(auth.response_headers),
                    }
                },
            },
            {
                "apiVersion": TRAEFIK_API,
                "kind": "IngressRoute",
                "metadata": {
                    "name": names.job_routes(first.job),
                    "namespace": first.namespace,
                    "labels": labels,
                },
                "spec": {
                    "routes": [
                        {
                            "kind": "Rule",
                            "match": (f"Host(`{e.host}`) && " if e.host else "")
                            + f"PathPrefix(`{e.path}`)",
                            "middlewares": [{"name": middleware}],
                            "services": [{"name": e.service_name, "port": e.container_port}],
                        }
                        for e in routed
                    ]
                },
            },
        ]


DRIVERS: dict[str, IngressNginx | Traefik] = {
    driver.name: driver for driver in (IngressNginx(), Traefik())
}


# -- readers ----------------------------------------------------------------------------------


def observed_service(service: dict) -> dict[str, int | str]:
    """How a Service is reachable from outside: its node port and load-balancer address."""
    observed: dict[str, int | str] = {}
    ports = (service.get("spec") or {}).get("ports") or []
    if ports and ports[0].get("nodePort"):
        observed["node_port"] = ports[0]["nodePort"]
    ingress = ((service.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    if ingress and (ingress[0].get("ip") or ingress[0].get("hostname")):
        observed["ip"] = ingress[0].get("ip") or ingress[0].get("hostname")
    return observed
