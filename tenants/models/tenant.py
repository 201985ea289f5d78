from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from core.models import Reconciled
from core.validators import validate_dns1123_label
from k8s_adapters.tenant import TenantSpec

from .. import constants as c
from ..choices import Role, TenantState


def _slug(value):
    validate_dns1123_label(value, max_length=c.SLUG_MAX_LENGTH)


class TenantQuerySet(models.QuerySet):
    def for_user(self, user):
        """The tenants this user may see: all for platform admins, else their memberships.

        Every tenant-scoped read in the portal starts here; isolation lives in this one place.
        """
        if not user.is_authenticated or not user.is_active:
            return self.none()
        if user.is_staff:
            return self.all()
        return self.filter(models.Exists(self._memberships_of(user)))

    def with_role_of(self, user):
        """The tenants with `user`'s membership role read alongside, for `role_of`: one query,
        however many members a tenant has."""
        role = self._memberships_of(user).values("role")[:1]
        return self.annotate(role_user=models.Value(user.pk), user_role=models.Subquery(role))

    def _memberships_of(self, user):
        memberships = self.model._meta.get_field("memberships").related_model.objects
        # Unordered: the default ordering would join the tenant and the user to sort one row.
        return memberships.filter(tenant=models.OuterRef("pk"), user_id=user.pk).order_by()

    def active(self):
        return self.filter(state=TenantState.ACTIVE)


def _limit(upper):
    return [MinValueValidator(0), MaxValueValidator(upper)]


class Tenant(Reconciled):
    slug = models.CharField(
        max_length=c.SLUG_MAX_LENGTH,
        unique=True,
        validators=[_slug],
        help_text="Lowercase letters, digits and '-'. Names the namespace and the Volcano queue.",
    )
    display_name = models.CharField(max_length=200)
    state = models.CharField(max_length=16, choices=TenantState, default=TenantState.ACTIVE)

    gpu_quota = models.PositiveIntegerField(
        "GPUs",
        default=0,
        validators=_limit(c.MAX_GPUS),
        help_text="requests.nvidia.com/gpu: the most the tenant may hold.",
    )
    cpu_quota = models.PositiveIntegerField("CPU cores", default=64, validators=_limit(c.MAX_CPU))
    memory_quota_gib = models.PositiveIntegerField(
        "Memory (GiB)", default=512, validators=_limit(c.MAX_MEMORY_GIB)
    )
    storage_quota_gib = models.PositiveIntegerField(
        "Storage (GiB)", default=1024, validators=_limit(c.MAX_STORAGE_GIB)
    )
    pvc_quota = models.PositiveIntegerField(
        "Volumes (PVCs)", default=50, validators=_limit(c.MAX_PVCS)
    )
    pod_quota = models.PositiveIntegerField(
        "Pods",
        default=256,
        db_default=256,  # pods of the release before it create tenants without it meanwhile
        validators=[MinValueValidator(1), MaxValueValidator(c.MAX_PODS)],
        help_text="The most pods the tenant's jobs run at once (one per replica of each task). "
        "Without it, jobs of many tiny replicas could fill every node's pod slots.",
    )
    max_running_jobs = models.PositiveIntegerField(
        default=20, validators=[MinValueValidator(1), MaxValueValidator(c.MAX_RUNNING_JOBS)]
    )
    member_gpu_cap = models.PositiveIntegerField(
        "GPUs per member",
        null=True,
        blank=True,
        validators=_limit(c.MAX_GPUS),
        help_text="Optional: the most GPUs one member may hold, inside the tenant's quota.",
    )
    endpoint_default_hours = models.PositiveIntegerField(
        default=8, validators=[MinValueValidator(1), MaxValueValidator(c.MAX_ENDPOINT_HOURS)]
    )
    endpoint_max_hours = models.PositiveIntegerField(
        default=72, validators=[MinValueValidator(1), MaxValueValidator(c.MAX_ENDPOINT_HOURS)]
    )
    allow_direct_exposure = models.BooleanField(
        default=False,
        help_text="Jobs may expose ports as NodePort or LoadBalancer, which bypass sign-in.",
    )

    queue_weight = models.PositiveIntegerField(
        default=1, validators=[MinValueValidator(1), MaxValueValidator(65535)]
    )
    queue_deserved_gpus = models.PositiveIntegerField(
        "Deserved GPUs",
        null=True,
        blank=True,
        validators=_limit(c.MAX_GPUS),
        help_text="Fair share; empty means the whole quota. Idle GPUs above it can be borrowed.",
    )
    queue_guarantee_gpus = models.PositiveIntegerField(
        "Guaranteed GPUs",
        default=0,
        validators=_limit(c.MAX_GPUS),
        help_text="Reserved for this tenant even when idle.",
    )
    queue_reclaimable = models.BooleanField(
        default=True, help_text="GPUs this tenant borrows can be reclaimed by others."
    )
    parent_queue = models.CharField(
        max_length=63,
        blank=True,
        validators=[validate_dns1123_label],
        help_text="Optional parent Volcano queue (a department) for hierarchical queues.",
    )

    observed_usage = models.JSONField(
        default=dict, blank=True, help_text="status.used of the tenant's ResourceQuota."
    )
    # Counts the writes of observed_usage: a write that read the quota earlier is made only
    # if no other write came meanwhile, even one that wrote back the usage it had loaded.
    usage_writes = models.PositiveBigIntegerField(
        default=0,
        db_default=0,  # pods of the release before it insert tenants without it meanwhile
        editable=False,
    )

    created_at = models.DateTimeField(auto_now_add=True)
    archived_at = models.DateTimeField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["slug"]

    def __str__(self):
        return self.slug

    def get_absolute_url(self):
        return reverse("tenants:detail", args=[self.slug])

    @property
    def namespace(self):
        return f"{c.NAMESPACE_PREFIX}{self.slug}"

    @property
    def queue_name(self):
        return self.namespace

    @property
    def is_archived(self):
        return self.state == TenantState.ARCHIVED

    def clean(self):
        errors = {}
        deserved = self.gpu_quota if self.queue_deserved_gpus is None else self.queue_deserved_gpus
        if deserved > self.gpu_quota:
            errors["queue_deserved_gpus"] = (
                f"Deserved ({deserved}) cannot exceed the GPU quota ({self.gpu_quota})."
            )
        if self.queue_guarantee_gpus > deserved:
            errors["queue_guarantee_gpus"] = (
                f"Guaranteed GPUs ({self.queue_guarantee_gpus}) cannot exceed deserved "
                f"({deserved})."
            )
        if self.member_gpu_cap is not None and self.member_gpu_cap > self.gpu_quota:
            errors["member_gpu_cap"] = (
                f"The per-member cap ({self.member_gpu_cap}) cannot exceed the GPU quota "
                f"({self.gpu_quota})."
            )
        if self.endpoint_default_hours > self.endpoint_max_hours:
            errors["endpoint_default_hours"] = (
                f"The default lifetime ({self.endpoint_default_hours} h) cannot exceed the "
                f"maximum ({self.endpoint_max_hours} h)."
            )
        if self.parent_queue in {"default", self.queue_name}:
            errors["parent_queue"] = f"'{self.parent_queue}' cannot be a parent queue here."
        if errors:
            raise ValidationError(errors)

    def role_of(self, user):
        """The user's role in this tenant, or None; platform admins act as tenant admins."""
        if user.is_staff:
            return Role.ADMIN
        if getattr(self, "role_user", None) == user.pk:  # read with the tenant (with_role_of)
            return self.user_role
        membership = next((m for m in self.memberships.all() if m.user_id == user.pk), None)
        return membership.role if membership else None

    def to_spec(self) -> TenantSpec:
        return TenantSpec(
            slug=self.slug,
            namespace=self.namespace,
            queue=self.queue_name,
            display_name=self.display_name,
            gpus=self.gpu_quota,
            cpu=self.cpu_quota,
            memory_gib=self.memory_quota_gib,
            storage_gib=self.storage_quota_gib,
            pvcs=self.pvc_quota,
            pods=self.pod_quota,
            queue_weight=self.queue_weight,
            deserved_gpus=self.queue_deserved_gpus,
            guarantee_gpus=self.queue_guarantee_gpus,
            reclaimable=self.queue_reclaimable,
            parent_queue=self.parent_queue or None,
            router_namespace=settings.ROUTER_NAMESPACE,
            egress_deny=tuple(settings.TENANT_EGRESS_DENY),
            egress_namespaces=tuple(settings.TENANT_EGRESS_NAMESPACES),
            web_role=settings.WEB_TENANT_ROLE,
            web_account=settings.WEB_ACCOUNT,
        )

    @property
    def gpus_in_use(self):
        return (self.observed_usage or {}).get("requests.nvidia.com/gpu", "0")

    def quota_rows(self):
        """(label, resource name, hard, used) for the usage-against-quota table."""
        used = self.observed_usage or {}
        return [
            (
                "GPUs",
                "requests.nvidia.com/gpu",
                self.gpu_quota,
                used.get("requests.nvidia.com/gpu", "0"),
            ),
            ("CPU cores", "requests.cpu", self.cpu_quota, used.get("requests.cpu", "0")),
            (
                "Memory",
                "requests.memory",
                f"{self.memory_quota_gib}Gi",
                used.get("requests.memory", "0"),
            ),
            (
                "Storage",
                "requests.storage",
                f"{self.storage_quota_gib}Gi",
                used.get("requests.storage", "0"),
            ),
            (
                "Volumes",
                "persistentvolumeclaims",
                self.pvc_quota,
                used.get("persistentvolumeclaims", "0"),
            ),
            ("Pods", "pods", self.pod_quota, used.get("pods", "0")),
        ]
