from datetime import timedelta

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from core.models import Reconciled
from k8s_adapters.jobspec import JobSpec
from tenants.models import Tenant

from ..choices import ACTIVE, FINISHED, HOLDING, JobState

# How long a job's page keeps polling after the job ended: the run that records the end writes
# its event just after its state, and removes its routes after that.
SETTLING = timedelta(seconds=10)


# Volcano may end a job (its last retry failed, its Volcano job deleted) while its pods still
# stop: the ResourceQuota counts them until then, so its quota is not free before.
HOLDS_QUOTA = models.Q(state__in=HOLDING) | models.Q(
    state__in=FINISHED, submitted_at__isnull=False, quota_released_at__isnull=True
)


class JobQuerySet(models.QuerySet):
    def for_user(self, user):
        return self.filter(tenant__in=Tenant.objects.for_user(user))

    def holding(self):
        """The jobs whose quota is taken: those the cluster holds, and those that ended while
        their pods still count in the ResourceQuota (stopping within their grace period)."""
        return self.filter(HOLDS_QUOTA)

    def active(self):
        return self.filter(state__in=ACTIVE)


class Job(Reconciled):
    tenant = models.ForeignKey(Tenant, on_delete=models.PROTECT, related_name="jobs")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs"
    )
    name = models.CharField(max_length=48)
    template_version = models.ForeignKey(
        "jobs.JobTemplateVersion",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="jobs",
    )
    spec = models.JSONField(help_text="The final resolved spec: relaunching it recreates the job.")
    # The GPUs the spec asks for, kept beside it so admission can sum them in one query.
    gpus = models.PositiveIntegerField()
    storage_gib = models.PositiveIntegerField(default=0, help_text="Its workspace disk's size.")
    # CPU and memory its pods request together: admission counts them against the tenant's
    # quota like GPUs, so the ResourceQuota and the Volcano queue never refuse what it admitted.
    cpu_millicores = models.PositiveBigIntegerField(default=0)
    memory_mib = models.PositiveBigIntegerField(default=0)
    # A database default too: pods of the release before it insert jobs without it meanwhile.
    pods = models.PositiveIntegerField(
        default=0, db_default=0, help_text="Its pods: every task's replicas."
    )
    networks = models.JSONField(
        default=list, blank=True, help_text="Requested secondary networks: [{pool, static_ip}]."
    )
    data_volume = models.ForeignKey(
        "jobs.DataVolume", null=True, blank=True, on_delete=models.PROTECT, related_name="jobs"
    )

    state = models.CharField(
        max_length=16, choices=JobState, default=JobState.QUEUED, db_index=True
    )
    message = models.TextField(blank=True)
    phase = models.CharField(max_length=32, blank=True, help_text="The Volcano job's phase.")
    counts = models.JSONField(default=dict, blank=True)
    pending_reason = models.TextField(blank=True)
    cancel_requested = models.BooleanField(default=False)
    delete_requested = models.BooleanField(default=False)

    created_at = models.DateTimeField(auto_now_add=True)
    queued_at = models.DateTimeField(db_index=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    # A queued job near the head of the queue gets its workspace claim (and SSH-key Secret)
    # ahead of submission, within the storage quota: when GPUs free up, it goes straight to
    # Volcano instead of first waiting for its claim to bind.
    volumes_ahead_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # A finished job keeps its workspace claim until it is deleted; when the claim goes some
    # other way (deleted by hand, or a cluster rebuilt), its storage no longer counts.
    workspace_gone_at = models.DateTimeField(null=True, blank=True)
    # When a finished job's pods stopped counting in the ResourceQuota: its quota is free.
    quota_released_at = models.DateTimeField(null=True, blank=True)

    objects = JobQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="job_name_per_tenant")
        ]
        indexes = [models.Index(fields=["tenant", "state", "queued_at"])]

    def __str__(self):
        return f"{self.tenant.slug}/{self.name}"

    def get_absolute_url(self):
        return reverse("jobs:detail", args=[self.tenant.slug, self.name])

    @property
    def is_finished(self):
        return self.state in FINISHED

    @property
    def holds_quota(self):
        """As `holding()` says of it."""
        if self.state in HOLDING:
            return True
        return self.is_finished and self.submitted_at is not None and not self.quota_released_at

    @property
    def may_change(self):
        """Whether its page should keep asking for its status: until it ended, and for a few
        seconds after (what was written just after its end shows too)."""
        if not self.is_finished:
            return True
        return self.finished_at is None or timezone.now() - self.finished_at < SETTLING

    @property
    def has_pod_counts(self):
        """Volcano zeroes every counter once a job completes (its pods are gone): nothing to
        show then."""
        return any(self.counts.values()) if isinstance(self.counts, dict) else False

    def job_spec(self) -> JobSpec:
        return JobSpec.from_dict(self.spec)


class JobEvent(models.Model):
    """What happened to a job, for its page: state changes and cluster events."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="events")
    created_at = models.DateTimeField(auto_now_add=True)
    kind = models.CharField(max_length=32)
    message = models.TextField()

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self):
        return f"{self.kind}: {self.message[:60]}"
