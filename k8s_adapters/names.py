"""Every Kubernetes name the portal derives from its own names, in one place."""


def endpoint_service(job: str, endpoint: str) -> str:
    """The Service exposing one endpoint of a job."""
    return f"{job}-{endpoint}"[:63]


def job_routes(job: str) -> str:
    """The Ingress / IngressRoute / Middleware carrying a job's HTTP endpoints."""
    return f"{job}-endpoints"
