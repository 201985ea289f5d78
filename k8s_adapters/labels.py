"""The one label set every object the portal owns carries; pruning selects by these only."""

from collections.abc import Collection, Mapping

from .names import identity_label

MANAGED_BY = "app.kubernetes.io/managed-by"
PORTAL = "gpu-portal"
TENANT = "gpu-portal.io/tenant"
JOB = "gpu-portal.io/job"
OWNER = "gpu-portal.io/owner"
COMPONENT = "gpu-portal.io/component"


def portal_labels(**extra: object) -> dict[str, str]:
    """The managed-by label plus the given portal labels, e.g. portal_labels(tenant="team-a")."""
    keys = {"tenant": TENANT, "job": JOB, "owner": OWNER, "component": COMPONENT}
    labels = {MANAGED_BY: PORTAL}
    for name, value in extra.items():
        if value is not None:
            labels[keys[name]] = identity_label(str(value)) if name == "owner" else str(value)
    return labels


def selector(labels: Mapping[str, str | Collection[str]]) -> str:
    """A label-selector string for a dict of labels: `key=value`, or `key in (a,b)` for a
    collection of values (any of them)."""
    return ",".join(
        f"{key}={value}" if isinstance(value, str) else f"{key} in ({','.join(sorted(value))})"
        for key, value in sorted(labels.items())
    )
