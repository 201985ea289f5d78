"""Pure builders for job endpoints: a Service per endpoint and, for HTTP endpoints, its route
through a routing driver. Every driver is built from the same EndpointSpec, and every route's
forward-auth address names its endpoint (`/auth/endpoint/<id>`), so a request routed to an
endpoint is always checked against that endpoint, whatever the client put in its headers."""

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import names
from .labels import portal_labels

TRAEFIK_API = "traefik.io/v1alpha1"
GATEWAY_API = "gateway.networking.k8s.io/v1"
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
    (GATEWAY_API, "HTTPRoute"),
)
ENDPOINT_KINDS = (("v1", "Service"), ("networking.k8s.io/v1", "NetworkPolicy"), *ROUTE_KINDS)
# What the portal tells the router to put on the forwarded request, replacing whatever the
# client sent: the user's identity, its cookies without the endpoint cookie, and no
# Authorization (listed but never answered, so the router deletes it).
IDENTITY_HEADERS = ("X-Auth-Request-User", "X-Auth-Request-Email", "X-Auth-Request-Groups")
AUTH_RESPONSE_HEADERS = (*IDENTITY_HEADERS, "Cookie", "Authorization")
# Spellings of the identity headers with `_` for `-`, which some app servers read as the same
# header (CGI's HTTP_X_AUTH_REQUEST_USER): Traefik deletes every header it is told the auth
# answer may carry, so listing them removes a client's forged ones. (nginx drops headers with
# `_` by default.)
UNDERSCORED_IDENTITY_HEADERS = tuple(
    spelled
    for header in IDENTITY_HEADERS
    for spelled in sorted(
        "".join(part + sep for part, sep in zip(header.split("-"), (*seps, ""), strict=True))
        for seps in itertools.product("-_", repeat=header.count("-"))
    )
    if spelled != header
)
# What the router sends the portal: only the credentials it decides on.
AUTH_REQUEST_HEADERS = ("Cookie", "Authorization", "Accept")


@dataclass(frozen=True)
class EndpointSpec:
    id: int
    name: str
    job: str
    task: str
    tenant: str
    owner: str
    namespace: str
    container_port: int
    protocol: str  # http | tcp | ssh
    mode: str  # ingress | nodeport | loadbalancer | podip
    host: str = ""  # the endpoint's own public host name

    @property
    def service_name(self) -> str:
        return names.endpoint_service(self.id, self.job, self.name)

    @property
    def routed(self) -> bool:
        return self.mode == "ingress" and self.protocol == "http"


@dataclass(frozen=True)
class AuthSpec:
    """Where the router asks the portal (from inside the cluster) and where browsers go."""

    internal_url: str  # the portal as the router reaches it
    public_url: str  # the portal as browsers reach it
    gateway: str = ""  # namespace/name of the Gateway HTTPRoutes attach to
    ingress_class: str = "nginx"

    def auth_url(self, endpoint: EndpointSpec) -> str:
        return f"{self.internal_url}/auth/endpoint/{endpoint.id}"

    def signin_url(self, endpoint: EndpointSpec) -> str:
        return f"{self.public_url}/auth/endpoint/{endpoint.id}/start"


def _labels(endpoint: EndpointSpec) -> dict[str, str]:
    labels = portal_labels(
        tenant=endpoint.tenant, job=endpoint.job, owner=endpoint.owner, component="endpoint"
    )
    labels["gpu-portal.io/endpoint"] = endpoint.name
    return labels


def _metadata(endpoint: EndpointSpec, **extra: Any) -> dict[str, Any]:
    return {
        "name": endpoint.service_name,
        "namespace": endpoint.namespace,
        "labels": _labels(endpoint),
        **extra,
    }


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


def build_exposure_policy(endpoint: EndpointSpec) -> dict[str, Any] | None:
    """A NodePort or LoadBalancer port is reachable from outside the tenant by design (the
    tenant was allowed to): admit any source to that port of the task's pods only."""
    if endpoint.mode not in ("nodeport", "loadbalancer"):
        return None
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(endpoint),
        "spec": {
            "podSelector": {
                "matchLabels": {
                    "volcano.sh/job-name": endpoint.job,
                    "volcano.sh/task-spec": endpoint.task,
                }
            },
            "policyTypes": ["Ingress"],
            "ingress": [{"ports": [{"port": endpoint.container_port, "protocol": "TCP"}]}],
        },
    }


def endpoint_objects(
    endpoints: Iterable[EndpointSpec], auth: AuthSpec, driver: str
) -> list[dict[str, Any]]:
    """Everything the cluster needs for these endpoints: Services, routes, exposure policies."""
    endpoints = list(endpoints)
    policies = [p for p in map(build_exposure_policy, endpoints) if p is not None]
    return [*map(build_service, endpoints), *build_routes(endpoints, auth, driver), *policies]


def _forward_auth(endpoint: EndpointSpec, auth: AuthSpec) -> dict[str, Any]:
    """Traefik's ForwardAuth Middleware for one endpoint. Traefik hands non-2xx answers to the
    browser as they are, so the portal answers the sign-in redirect (mode=redirect) itself."""
    return {
        "apiVersion": TRAEFIK_API,
        "kind": "Middleware",
        "metadata": _metadata(endpoint),
        "spec": {
            "forwardAuth": {
                "address": f"{auth.auth_url(endpoint)}?mode=redirect",
                "authRequestHeaders": list(AUTH_REQUEST_HEADERS),
                "authResponseHeaders": [*AUTH_RESPONSE_HEADERS, *UNDERSCORED_IDENTITY_HEADERS],
                "trustForwardHeader": False,
                # The handshake's last redirect is a path on the endpoint's own host; by
                # default Traefik would prefix it with the auth server's address.
                "preserveLocationHeader": True,
                "maxResponseBodySize": 4096,
            }
        },
    }


class Traefik:
    """Per endpoint: a ForwardAuth Middleware and an IngressRoute matching its own host."""

    name = "traefik"

    def build(self, endpoint: EndpointSpec, auth: AuthSpec) -> list[dict[str, Any]]:
        route = {
            "kind": "Rule",
            "match": f"Host(`{endpoint.host}`)",
            "middlewares": [{"name": endpoint.service_name}],
            "services": [{"name": endpoint.service_name, "port": endpoint.container_port}],
        }
        return [
            _forward_auth(endpoint, auth),
            {
                "apiVersion": TRAEFIK_API,
                "kind": "IngressRoute",
                "metadata": _metadata(endpoint),
                "spec": {"routes": [route]},
            },
        ]


class GatewayApi:
    """Per endpoint: an HTTPRoute on the shared Gateway for its own host, with Traefik's
    ForwardAuth Middleware attached through an ExtensionRef filter (external auth is
    implementation-specific in Gateway API)."""

    name = "gateway-api"

    def build(self, endpoint: EndpointSpec, auth: AuthSpec) -> list[dict[str, Any]]:
        namespace, _, gateway = auth.gateway.rpartition("/")
        parent = {"group": "gateway.networking.k8s.io", "kind": "Gateway", "name": gateway}
        if namespace:
            parent["namespace"] = namespace
        auth_filter = {
            "type": "ExtensionRef",
            "extensionRef": {
                "group": "traefik.io",
                "kind": "Middleware",
                "name": endpoint.service_name,
            },
        }
        rule = {
            "matches": [{"path": {"type": "PathPrefix", "value": "/"}}],
            "filters": [auth_filter],
            "backendRefs": [{"name": endpoint.service_name, "port": endpoint.container_port}],
        }
        return [
            _forward_auth(endpoint, auth),
            {
                "apiVersion": GATEWAY_API,
                "kind": "HTTPRoute",
                "metadata": _metadata(endpoint),
                "spec": {"parentRefs": [parent], "hostnames": [endpoint.host], "rules": [rule]},
            },
        ]


class IngressNginx:
    """Per endpoint: an Ingress for its own host with external-auth annotations. A 401 from
    auth-url sends the browser to auth-signin (the portal's handshake) with `rd`. No auth
    cache: the portal's answers are `no-store` (nginx would obey), and a cached answer would
    outlive an endpoint's expiry and swallow the sign-in code on its way back."""

    name = "ingress-nginx"

    def build(self, endpoint: EndpointSpec, auth: AuthSpec) -> list[dict[str, Any]]:
        prefix = "nginx.ingress.kubernetes.io/"
        annotations = {
            f"{prefix}auth-url": auth.auth_url(endpoint),
            f"{prefix}auth-signin": auth.signin_url(endpoint),
            f"{prefix}auth-response-headers": ",".join(AUTH_RESPONSE_HEADERS),
            f"{prefix}proxy-read-timeout": "3600",
            f"{prefix}proxy-body-size": "0",
        }
        backend = {
            "service": {
                "name": endpoint.service_name,
                "port": {"number": endpoint.container_port},
            }
        }
        rule = {
            "host": endpoint.host,
            "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
        }
        return [
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": _metadata(endpoint, annotations=annotations),
                "spec": {"ingressClassName": auth.ingress_class, "rules": [rule]},
            }
        ]


DRIVERS: dict[str, Traefik | GatewayApi | IngressNginx] = {
    driver.name: driver for driver in (Traefik(), GatewayApi(), IngressNginx())
}


def build_routes(
    endpoints: Iterable[EndpointSpec], auth: AuthSpec, driver: str
) -> list[dict[str, Any]]:
    """The route objects of every routed (HTTP, ingress-mode) endpoint."""
    return [obj for e in endpoints if e.routed for obj in DRIVERS[driver].build(e, auth)]


# -- the fallback: an address whose endpoint is closed ---------------------------------------

FALLBACK_NAME = "gpu-portal-closed-endpoints"
FALLBACK_COMPONENT = "endpoint-fallback"
# The whole request URL, capturing only its host's letters, digits, dots and hyphens (never a
# port, a final dot, a path or a query: a path or query may hold an app's own token, which the
# portal must never receive, and nothing the client sent can add to the portal's query).
_WHOLE_URL = r"^[A-Za-z][A-Za-z0-9+.-]*://([A-Za-z0-9.-]*[A-Za-z0-9])\.?(?::[0-9]*)?(?:[/?#].*)?$"


@dataclass(frozen=True)
class FallbackSpec:
    """Where browsers asking for an endpoint host that no route serves go: its job ended, its
    time ran out, or it never existed. Without it the router answers with its own bare 404."""

    domain: str  # the endpoints' wildcard domain
    namespace: str  # the router's namespace
    closed_url: str  # the portal's page saying why, as browsers reach it

    @property
    def metadata(self) -> dict[str, Any]:
        return {
            "name": FALLBACK_NAME,
            "namespace": self.namespace,
            "labels": portal_labels(component=FALLBACK_COMPONENT),
        }


def _traefik_fallback(fallback: FallbackSpec, auth: AuthSpec) -> list[dict[str, Any]]:
    """An IngressRoute of the lowest priority for every host under the domain, GET and HEAD
    only, redirecting to the portal's page with Traefik's RedirectRegex. Any endpoint's own
    route wins over it, an HTTPRoute of the Gateway API driver too: Traefik orders the routes of
    both providers on an entrypoint by one priority, and gives theirs the length of their rule
    or host. Other methods are not redirected: a 307 would resend a form's body (a password,
    say) to the portal; they get the router's 404. Temporary (302): the address opens again
    when its job is relaunched, and a browser must not remember the redirect. The router must
    keep a route whose Service has no ready pod (`allowEmptyServices`), or a starting app's
    address would fall through to here."""
    domain = fallback.domain.lower().replace(".", r"\.")
    route = {
        "kind": "Rule",
        "match": (
            f"HostRegexp(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?\\.{domain}\\.?$`) && "
            "(Method(`GET`) || Method(`HEAD`))"
        ),
        "priority": 1,
        "middlewares": [{"name": FALLBACK_NAME}],
        "services": [{"name": "noop@internal", "kind": "TraefikService"}],
    }
    redirect = {
        "regex": _WHOLE_URL,
        "replacement": f"{fallback.closed_url}?host=${{1}}",
        "permanent": False,
    }
    return [
        {
            "apiVersion": TRAEFIK_API,
            "kind": "Middleware",
            "metadata": fallback.metadata,
            "spec": {"redirectRegex": redirect},
        },
        {
            "apiVersion": TRAEFIK_API,
            "kind": "IngressRoute",
            "metadata": fallback.metadata,
            "spec": {"routes": [route]},
        },
    ]


def _nginx_fallback(fallback: FallbackSpec, auth: AuthSpec) -> list[dict[str, Any]]:
    """A wildcard-host Ingress answering with a temporary redirect before any upstream (its
    backend is never called). ingress-nginx's redirect is a fixed address, so the portal's page
    cannot name the endpoint there."""
    backend = {"service": {"name": FALLBACK_NAME, "port": {"number": 80}}}
    rule = {
        "host": f"*.{fallback.domain.lower()}",
        "http": {"paths": [{"path": "/", "pathType": "Prefix", "backend": backend}]},
    }
    annotations = {"nginx.ingress.kubernetes.io/temporal-redirect": fallback.closed_url}
    return [
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {**fallback.metadata, "annotations": annotations},
            "spec": {"ingressClassName": auth.ingress_class, "rules": [rule]},
        }
    ]


_FALLBACKS = {
    Traefik.name: _traefik_fallback,
    GatewayApi.name: _traefik_fallback,  # the driver runs on Traefik (its ForwardAuth)
    IngressNginx.name: _nginx_fallback,
}


def build_fallback(fallback: FallbackSpec, auth: AuthSpec, driver: str) -> list[dict[str, Any]]:
    """The router objects sending every endpoint host that no route serves to the portal."""
    return _FALLBACKS[driver](fallback, auth)


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
