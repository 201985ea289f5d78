from django.db import models
from django.utils import timezone

from k8s_adapters.names import endpoint_service

from ..choices import Protocol
from ..routes import endpoint_host, endpoint_origin


class EndpointMode(models.TextChoices):
    INGRESS = "ingress", "Ingress (SSO-protected URL)"
    NODEPORT = "nodeport", "NodePort"
    LOADBALANCER = "loadbalancer", "LoadBalancer"
    PODIP = "podip", "Pod IP (inside the cluster)"


class Endpoint(models.Model):
    """A port a job exposes, reachable until it expires."""

    job = models.ForeignKey("jobs.Job", on_delete=models.CASCADE, related_name="endpoints")
    name = models.CharField(max_length=15)
    task = models.CharField(max_length=20)
    container_port = models.PositiveIntegerField()
    protocol = models.CharField(max_length=8, choices=Protocol)
    mode = models.CharField(max_length=16, choices=EndpointMode)
    private = models.BooleanField(default=False, help_text="Only the job's owner may open it.")
    host_label = models.CharField(
        max_length=63,
        unique=True,
        help_text="The first label of the endpoint's own host name (unique, never parsed).",
    )
    expires_at = models.DateTimeField()
    reclaimed_at = models.DateTimeField(null=True, blank=True)
    closed_by_admin = models.BooleanField(
        default=False,
        db_default=False,  # pods of the release before it insert endpoints without it meanwhile
        help_text="A platform admin reclaimed it: only a platform admin opens it again.",
    )
    observed = models.JSONField(
        default=dict, blank=True, help_text="What the cluster assigned: nodePort, load-balancer IP."
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["job", "name"]
        constraints = [
            models.UniqueConstraint(fields=["job", "name"], name="endpoint_name_per_job")
        ]

    def __str__(self):
        return f"{self.job}/{self.name}"

    @property
    def is_expired(self):
        return self.expires_at <= timezone.now()

    @property
    def is_closed(self):
        """Closed with its job: a finished job's endpoints have no routes and are not extended."""
        return self.job.is_finished

    @property
    def routed(self):
        return self.mode == EndpointMode.INGRESS and self.protocol == Protocol.HTTP

    @property
    def service_name(self):
        return endpoint_service(self.pk, self.job.name, self.name)

    @property
    def host(self):
        return endpoint_host(self.host_label)

    @property
    def url(self):
        if self.routed:
            return f"{endpoint_origin(self.host_label)}/"
        if self.mode == EndpointMode.NODEPORT and self.observed.get("node_port"):
            return f"{self.protocol}://<any node>:{self.observed['node_port']}"
        if self.mode == EndpointMode.LOADBALANCER and self.observed.get("ip"):
            return f"{self.protocol}://{self.observed['ip']}:{self.container_port}"
        service = self.service_name
        return f"{self.protocol}://{service}.{self.job.tenant.namespace}.svc:{self.container_port}"


class HostLabel(models.Model):
    """Every host label an endpoint was given, kept once its endpoint is gone: none is given
    twice. A browser keeps what a job's app left at its origin (cookies, storage, a service
    worker that answers for it), and a job launched again under a deleted job's name must not
    meet what that job's app, another member's code perhaps, left there."""

    label = models.CharField(max_length=63, primary_key=True)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self):
        return self.label


class LaunchedName(models.Model):
    """A job name launched in a tenant, kept once its job is gone: only a name's first job gets
    the readable hosts (`<port>--<job>--<tenant>`), those after it hosts of their own."""

    tenant = models.ForeignKey("tenants.Tenant", on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=48)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="launched_name_per_tenant")
        ]

    def __str__(self):
        return self.name
