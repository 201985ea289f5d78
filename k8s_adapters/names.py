"""Every Kubernetes name the portal derives from its own names, in one place."""

import hashlib

DNS_LABEL_MAX = 63


def short_hash(*parts: str, length: int = 10) -> str:
    """A stable digest of the exact parts (a separator that cannot occur in them)."""
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:length]


def endpoint_service(job: str, endpoint: str) -> str:
    """The Service exposing one endpoint of a job; its route objects share the name."""
    return f"{job}-{endpoint}"[:DNS_LABEL_MAX]


def endpoint_host_label(tenant: str, job: str, endpoint: str) -> str:
    """The first DNS label of an endpoint's host: `<port>--<job>--<tenant>` to read, or, where
    that would pass 63 characters or a part holds `--` itself (so two triples could meet), a
    readable prefix and a hash of the exact triple. Nothing ever parses it back."""
    readable = f"{endpoint}--{job}--{tenant}"
    if len(readable) <= DNS_LABEL_MAX and "--" not in f"{endpoint}{job}{tenant}":
        return readable
    digest = short_hash(tenant, job, endpoint)
    prefix = readable[: DNS_LABEL_MAX - len(digest) - 2].rstrip("-")
    return f"{prefix}-h{digest}"
