"""Job endpoints: created from a launch's exposed ports, routed through the configured driver,
extended by their owners within the tenant's maximum, reclaimed when they expire."""

import secrets
from datetime import timedelta

from django.conf import settings
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.db.models.functions import Least
from django.urls import reverse
from django.utils import timezone

from core.reconcile import enqueue, enqueue_all
from k8s_adapters.names import endpoint_host_label
from k8s_adapters.routing import (
    AuthSpec,
    EndpointSpec,
    FallbackSpec,
    build_fallback,
    endpoint_objects,
)
from tenants.services import record

from .access import may_change
from .choices import FINISHED, Protocol
from .models import Endpoint, HostLabel, LaunchedName
from .routes import endpoint_origin

DIRECT_MODES = ("nodeport", "loadbalancer")


def default_mode(protocol, tenant):
    """HTTP uses the cluster's mode (the router, by default), TCP its TCP mode; either is the
    pod IP where the cluster's is NodePort or LoadBalancer (which bypass sign-in) and the tenant
    may not expose ports directly."""
    mode = settings.ENDPOINT_MODE if protocol == Protocol.HTTP else settings.ENDPOINT_TCP_MODE
    return mode if mode not in DIRECT_MODES or tenant.allow_direct_exposure else "podip"


def check_exposure(tenant, ports):
    """Refuse NodePort and LoadBalancer ports where a platform admin has not allowed them."""
    if tenant.allow_direct_exposure:
        return
    errors = {
        f"expose[{i}].mode": [
            ValidationError(
                f"'{p.mode}' exposes the port without sign-in, and {tenant.slug} may not do "
                "that; use 'ingress' (HTTP) or 'podip', or ask a platform admin to allow "
                "direct exposure for the tenant.",
                code="exposure_not_allowed",
            )
        ]
        for i, p in enumerate(ports)
        if p.mode in DIRECT_MODES
    }
    if errors:
        raise ValidationError(errors)


def create_for_job(job, ports):
    """The job's endpoint rows, each with a host of its own, never one another endpoint had
    before it; returns them."""
    if not ports:  # a launch with networks alone: no host, nor a name to note
        return []
    expires = timezone.now() + timedelta(hours=job.tenant.endpoint_default_hours)
    readable = _first_of_its_name(job)
    return Endpoint.objects.bulk_create(
        [
            Endpoint(
                job=job,
                name=p.name,
                task=p.task,
                container_port=p.container_port,
                protocol=p.protocol,
                mode=p.mode or default_mode(p.protocol, job.tenant),
                private=p.private,
                host_label=_unused_host_label(job, p.name, readable),
                expires_at=expires,
            )
            for p in ports
        ]
    )


def _first_of_its_name(job):
    """Whether the job is the first launched under its name in its tenant, noting the name."""
    try:
        with transaction.atomic():
            LaunchedName.objects.create(tenant=job.tenant, name=job.name)
    except IntegrityError:
        return False
    return True


HOST_LABEL_TRIES = 5  # random salts: a second is already a chance of one in 2**48


def _unused_host_label(job, endpoint, readable):
    """A host label no endpoint was given before, taken for this one: the readable one for the
    first job of its name, else (or if that one was taken all the same) one with a random salt.
    Taking one waits for a launch that took it meanwhile to end: one rolled back is free."""
    salts = [""] if readable else []
    salts += [secrets.token_hex(8) for _ in range(HOST_LABEL_TRIES)]
    for salt in salts:
        label = endpoint_host_label(job.tenant.slug, job.name, endpoint, salt)
        try:
            with transaction.atomic():
                HostLabel.objects.create(label=label)
        except IntegrityError:
            continue
        return label
    raise RuntimeError(f"no unused host label for {job}/{endpoint} in {len(salts)} tries")


def url_env(endpoints):
    """GPU_PORTAL_URL_<PORT>: each routed endpoint's public origin, for apps that must know
    it (allowed origins, links they print)."""
    return [
        (f"GPU_PORTAL_URL_{e.name.upper().replace('-', '_')}", endpoint_origin(e.host_label))
        for e in endpoints
        if e.routed
    ]


def specs(job):
    """The job's live (not reclaimed, not expired) endpoints as builder input; ports exposed
    without sign-in only while the tenant may still expose them so."""
    return [
        EndpointSpec(
            id=e.pk,
            name=e.name,
            job=job.name,
            task=e.task,
            tenant=job.tenant.slug,
            owner=job.owner.username,
            namespace=job.tenant.namespace,
            container_port=e.container_port,
            protocol=e.protocol,
            mode=e.mode,
            host=e.host,
        )
        for e in job.endpoints.all()
        if e.reclaimed_at is None
        and not e.is_expired
        and (e.mode not in DIRECT_MODES or job.tenant.allow_direct_exposure)
    ]


def auth_spec():
    return AuthSpec(
        internal_url=settings.PORTAL_INTERNAL_URL.rstrip("/"),
        public_url=settings.PORTAL_URL.rstrip("/"),
        gateway=settings.ROUTING_GATEWAY,
        ingress_class=settings.ROUTING_INGRESS_CLASS,
    )


def objects(endpoint_specs):
    """The Services, routes and exposure policies of these endpoints."""
    return endpoint_objects(endpoint_specs, auth_spec(), settings.ROUTING_DRIVER)


def fallback_objects():
    """The router objects sending every endpoint host no route serves (its job ended, its time
    ran out) to the portal's page saying so, in the router's namespace."""
    fallback = FallbackSpec(
        domain=settings.ENDPOINT_WILDCARD_DOMAIN,
        namespace=settings.ROUTER_NAMESPACE,
        closed_url=settings.PORTAL_URL.rstrip("/") + reverse("jobs:endpoint-closed"),
    )
    return build_fallback(fallback, auth_spec(), settings.ROUTING_DRIVER)


def _reconcile(job):
    enqueue("jobs.reconcile_job", job.pk)


@transaction.atomic
def extend(endpoint, *, hours, actor):
    """Keep the endpoint open at least `hours` from now, within the tenant's maximum: an
    expiry already later stays (an extension never shortens what is left). The owner or a
    tenant admin (platform admins count as one) may."""
    endpoint = (
        Endpoint.objects.select_for_update().select_related("job__tenant").get(pk=endpoint.pk)
    )
    job, tenant = endpoint.job, endpoint.job.tenant
    if not may_change(actor, job):  # platform admins count as tenant admins; a demoted owner not
        raise PermissionDenied("Only the job's owner or a tenant admin can extend it.")
    if job.is_finished:
        raise ValidationError(
            f"The job {job.name} has ended and its endpoints closed with it; relaunch the job "
            "to open them again.",
            code="job_ended",
        )
    if endpoint.closed_by_admin and not actor.is_staff:
        raise ValidationError(
            f"A platform admin closed {endpoint.name}; it stays closed until one of them opens "
            "it again (ask them why).",
            code="closed_by_admin",
        )
    if endpoint.mode in DIRECT_MODES and not tenant.allow_direct_exposure:
        raise ValidationError(
            f"{endpoint.name} exposes its port without sign-in ({endpoint.mode}), which "
            f"{tenant.slug} may no longer do; relaunch the job with 'ingress' or 'podip'.",
            code="exposure_not_allowed",
        )
    if not 1 <= hours <= tenant.endpoint_max_hours:
        raise ValidationError(
            {
                "hours": [
                    ValidationError(
                        f"Extend by 1 to {tenant.endpoint_max_hours} hours (the tenant's maximum).",
                        code="over_max",
                    )
                ]
            }
        )
    before = endpoint.expires_at
    endpoint.expires_at = max(before, timezone.now() + timedelta(hours=hours))
    endpoint.reclaimed_at = None
    endpoint.closed_by_admin = False  # a platform admin's extension opens it again
    endpoint.save(update_fields=["expires_at", "reclaimed_at", "closed_by_admin"])
    record(
        actor,
        "endpoint.extend",
        endpoint,
        tenant=tenant,
        before={"expires_at": before.isoformat()},
        after={"expires_at": endpoint.expires_at.isoformat()},
    )
    _reconcile(job)
    return endpoint


def reclaim_expired(now=None):
    """Mark expired endpoints reclaimed and let their jobs' reconcile remove the routes."""
    now = now or timezone.now()
    expired = Endpoint.objects.filter(expires_at__lte=now, reclaimed_at__isnull=True)
    jobs = set(expired.values_list("job_id", flat=True))
    expired.update(reclaimed_at=now)
    enqueue_all("jobs.reconcile_job", sorted(jobs))
    return len(jobs)


def close_direct(tenant_id, now=None):
    """A tenant no longer allowed to expose ports without sign-in: its endpoints exposed so
    close now (their Services and policies go with their jobs' runs)."""
    now = now or timezone.now()
    direct = Endpoint.objects.filter(
        job__tenant_id=tenant_id, mode__in=DIRECT_MODES, reclaimed_at__isnull=True
    ).exclude(job__tenant__allow_direct_exposure=True)
    jobs = set(direct.values_list("job_id", flat=True))
    direct.update(reclaimed_at=now, expires_at=Least("expires_at", Value(now)))
    enqueue_all("jobs.reconcile_job", sorted(jobs))
    return len(jobs)


def reclaim_now(endpoint, *, actor):
    """End an endpoint at once (platform admins, from the expiry board). Its owner's extension
    would open it again at once: only a platform admin's does."""
    now = timezone.now()
    Endpoint.objects.filter(pk=endpoint.pk).update(
        expires_at=now, reclaimed_at=now, closed_by_admin=True
    )
    record(
        actor,
        "endpoint.reclaim",
        endpoint,
        tenant=endpoint.job.tenant,
        before={"expires_at": endpoint.expires_at.isoformat()},
        after={"expires_at": now.isoformat()},
    )
    _reconcile(endpoint.job)


def expiry_board(now=None):
    """(expiring within 24 h, expired but not yet reclaimed), soonest first."""
    now = now or timezone.now()
    live = (
        Endpoint.objects.filter(reclaimed_at__isnull=True)
        .exclude(job__state__in=FINISHED)  # closed with their jobs: nothing to extend or reclaim
        .select_related("job__tenant", "job__owner")
        .order_by("expires_at")
    )
    return (
        list(live.filter(expires_at__gt=now, expires_at__lte=now + timedelta(hours=24))),
        list(live.filter(expires_at__lte=now)),
    )
