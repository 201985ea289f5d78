"""Every Kubernetes name the portal derives from its own names, in one place."""

import hashlib
import re

DNS_LABEL_MAX = 63


def short_hash(*parts: str, length: int = 10) -> str:
    """A stable digest of the exact parts (a separator that cannot occur in them)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:length]


# The objects a job owns besides its Volcano job, named after it. A data volume may not end in
# these (it would take a job's claim); job names stay short enough (jobs/spec.py JOB_NAME_MAX)
# for them and for Volcano's `<job>-<task>-<index>` pod names to be DNS labels.
WORKSPACE_SUFFIX = "-workspace"
SSH_KEYS_SUFFIX = "-ssh-keys"
JOB_OBJECT_SUFFIXES = (WORKSPACE_SUFFIX, SSH_KEYS_SUFFIX)


# Volcano's `svc` plugin names a Service and a NetworkPolicy after each job, takes over one of
# that name that exists, and deletes it when the job ends. So no job may be named like an
# object the portal keeps in a tenant namespace: its isolation policy, or an endpoint's objects.
ISOLATION_POLICY = "gpu-portal-isolation"
_PORTAL_OBJECT_NAME = re.compile(r"^(gpu-portal|ep[0-9]+-)")


def meets_portal_object(job: str) -> bool:
    """Whether Volcano's objects for a job of this name could be the portal's own."""
    return bool(_PORTAL_OBJECT_NAME.match(job))


def workspace_claim(job: str) -> str:
    """The job's scratch disk (a PVC)."""
    return f"{job}{WORKSPACE_SUFFIX}"


def ssh_keys_secret(job: str) -> str:
    """The Secret with the owner's SSH public keys."""
    return f"{job}{SSH_KEYS_SUFFIX}"


def pool_nad(pool: str) -> str:
    """The NetworkAttachmentDefinition of an IP pool in each tenant namespace (Whereabouts)."""
    return f"pool-{pool}"


def pool_static_nad(pool: str) -> str:
    """The pool's NAD for static addresses. Its own prefix, so it never meets another pool's
    NAD (with a suffix instead, pool `a`'s static NAD and pool `a-static`'s would be one)."""
    return f"static-pool-{pool}"


def endpoint_service(endpoint_id: int, job: str, endpoint: str) -> str:
    """The Service exposing one endpoint (its route objects share the name): `ep<id>-<job>-
    <port>`, unique by the endpoint's id and readable after it. It never holds `--`: Traefik
    folds runs of `-` in object names, which would make `a--b` and `a-b` one middleware."""
    readable = re.sub("-{2,}", "-", f"{job}-{endpoint}")
    return f"ep{endpoint_id}-{readable}"[:DNS_LABEL_MAX].rstrip("-")


def endpoint_host_label(tenant: str, job: str, endpoint: str, salt: str = "") -> str:
    """The first DNS label of an endpoint's host: `<port>--<job>--<tenant>` to read, or, where
    that would pass 63 characters or a part holds `--` itself (so two triples could meet), a
    readable prefix and a hash of the exact triple. Nothing ever parses it back. With a `salt`
    (random), always the hash, of the triple and the salt: a host of its own for a job launched
    under a name used before, never that job's host and browser origin."""
    readable = f"{endpoint}--{job}--{tenant}"
    if not salt and len(readable) <= DNS_LABEL_MAX and "--" not in f"{endpoint}{job}{tenant}":
        return readable
    # Salted hosts are many more (one a relaunch): a longer digest keeps them apart.
    digest = short_hash(tenant, job, endpoint, *([salt] if salt else []), length=12 if salt else 10)
    prefix = readable[: DNS_LABEL_MAX - len(digest) - 2].rstrip("-")
    return f"{prefix}-h{digest}"


LABEL_VALUE_MAX = 63
_LABEL_UNSAFE = re.compile(r"[^a-z0-9]+")


def identity_label(identity: str) -> str:
    """A label value for a user name of any allowed shape (e-mail, `+`, dots, Unicode, 150
    characters): a readable, sanitized part and a hash of the exact name, so two names never
    share a value. The name itself goes in an annotation and stays in the database."""
    readable = _LABEL_UNSAFE.sub("-", identity.lower()).strip("-")[:40].rstrip("-")
    digest = short_hash(identity)
    return f"{readable}-{digest}" if readable else f"u-{digest}"
