import ipaddress

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models
from django.urls import reverse

from core.models import Reconciled
from core.validators import validate_dns1123_label
from k8s_adapters.multus import network_name, whereabouts_pool_name
from k8s_adapters.names import pool_nad, pool_static_nad
from tenants.models import Tenant

from . import ipmath
from .choices import CniType, Purpose
from .constants import WHEREABOUTS_MAX_ADDRESSES
from .fields import IPIntegerField


def validate_ifname(value):
    too_long = len(value.encode()) > 15  # Linux counts bytes (IFNAMSIZ), not characters
    if not ipmath.LINUX_IFNAME.match(value) or value in (".", "..") or too_long:
        raise ValidationError(
            f"'{value}' is not a Linux interface name: at most 15 bytes, "
            "no '/', ':' or spaces (for example 'bond0' or 'enp5s0f1').",
            code="invalid_ifname",
        )


# The fields an admin sets on a pool (forms, API and audit snapshots use the same list).
POOL_FIELDS = [
    "name",
    "purpose",
    "cidr",
    "range_start",
    "range_end",
    "gateway",
    "exclusions",
    "vlan",
    "master",
    "cni_type",
    "mtu",
]


class IPPoolQuerySet(models.QuerySet):
    def with_reservations(self):
        """With their tenants and reservations (with owner, tenant and job): a few queries
        however many pools a page lists."""
        reservations = IPReservation.objects.select_related("owner", "tenant", "job")
        return self.prefetch_related("tenants", models.Prefetch("reservations", reservations))

    def for_tenant(self, tenant):
        return self.filter(tenants=tenant)


class IPPool(Reconciled):
    """An L2 address range handed out by Whereabouts, attached to pods through Multus."""

    name = models.CharField(max_length=40, unique=True, validators=[validate_dns1123_label])
    purpose = models.CharField(max_length=16, choices=Purpose, default=Purpose.COMPUTE)
    cidr = models.CharField(
        "CIDR", max_length=43, help_text="For example 10.20.0.0/16 or fd00:20::/64."
    )
    range_start = models.GenericIPAddressField()
    range_end = models.GenericIPAddressField()
    gateway = models.GenericIPAddressField(null=True, blank=True, help_text="Never handed out.")
    exclusions = models.JSONField(
        default=list,
        blank=True,
        help_text=("Addresses and sub-ranges never handed out: switches, hosts, BMCs."),
    )
    vlan = models.PositiveIntegerField(
        "VLAN id", null=True, blank=True, validators=[MinValueValidator(1), MaxValueValidator(4094)]
    )
    master = models.CharField("Host interface", max_length=15, validators=[validate_ifname])
    cni_type = models.CharField(
        "CNI type", max_length=16, choices=CniType, default=CniType.IPVLAN_L2
    )
    mtu = models.PositiveIntegerField(
        "MTU", default=1500, validators=[MinValueValidator(576), MaxValueValidator(9216)]
    )
    tenants = models.ManyToManyField(Tenant, blank=True, related_name="ip_pools")

    # Every address of the range below this one is excluded or reserved: the search for the
    # next free address starts here. Raised by allocation, lowered by release, reset on edits.
    free_hint = IPIntegerField(null=True, blank=True, editable=False)
    observed_allocations = models.JSONField(
        default=list,
        blank=True,
        help_text=("Whereabouts' allocations read from its IPPool objects: [{address, podref}]."),
    )
    observed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = IPPoolQuerySet.as_manager()

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("networking:detail", args=[self.name])

    # -- derived facts ------------------------------------------------------------------------

    @property
    def network(self):
        return ipaddress.ip_network(self.cidr, strict=False)

    @property
    def version(self):
        return self.network.version

    @property
    def interval(self):
        return ipmath.to_int(self.range_start), ipmath.to_int(self.range_end)

    def warnings(self):
        """What works but will hurt: a range larger than Whereabouts copes with."""
        start, end = self.interval
        size = end - start + 1
        if size <= WHEREABOUTS_MAX_ADDRESSES:
            return []
        return [
            f"This range holds {size} addresses. Whereabouts keeps all allocations of a range "
            "in one object, which the cluster refuses to store past about 10,000 allocations, "
            "and each allocation takes over a second from about 4,000 on. Split it into pools "
            f"of at most {WHEREABOUTS_MAX_ADDRESSES} addresses."
        ]

    @property
    def master_device(self):
        """The host interface the CNI plugin attaches to: the VLAN sub-interface when tagged."""
        return f"{self.master}.{self.vlan}" if self.vlan else self.master

    @property
    def network_name(self):
        return network_name(self.name)

    @property
    def whereabouts_name(self):
        """The name of Whereabouts' IPPool object for this pool's range."""
        return whereabouts_pool_name(self.network_name, str(self.network))

    @property
    def nad_name(self):
        return pool_nad(self.name)

    @property
    def static_nad_name(self):
        return pool_static_nad(self.name)

    def excluded_intervals(self):
        """Exclusions, the gateway and the network and broadcast addresses, merged."""
        net = self.network
        intervals = [ipmath.parse_exclusion(text, net.version) for text in self.exclusions]
        intervals += [(int(net.network_address),) * 2, (int(net.broadcast_address),) * 2]
        if self.gateway:
            intervals.append((ipmath.to_int(self.gateway),) * 2)
        return ipmath.merge(intervals)

    def clean(self):
        if not (self.cidr and self.range_start and self.range_end):
            return  # the missing or malformed field has its own error already
        net = self._clean_network()
        errors = {}
        smallest = 30 if net.version == 4 else 126
        if net.prefixlen > smallest:
            errors["cidr"] = (
                f"Use a /{smallest} or larger network: smaller ones have no room for hosts."
            )
        family = self._family_errors(net)
        if family:
            raise ValidationError({**errors, **family})
        errors.update(self._range_errors(net))
        if len(self.master_device.encode()) > 15:
            errors["vlan"] = (
                f"The VLAN interface name '{self.master_device}' is longer than "
                "Linux's 15 bytes; use a shorter host interface name."
            )
        if errors:
            raise ValidationError(errors)

    def _clean_network(self):
        try:
            return ipaddress.ip_network(self.cidr.strip(), strict=True)
        except ValueError as exc:
            raise ValidationError(
                {
                    "cidr": f"'{self.cidr}' is not an IPv4 or IPv6 network in CIDR form "
                    f"with its host bits zero ({exc})."
                }
            ) from exc

    def _family_errors(self, net):
        """A pool is one address family: Whereabouts hands out one address per range, and a
        dual-stack interface needs two ranges. For dual stack, attach two pools to the job."""
        errors = {}
        for name in ("range_start", "range_end", "gateway"):
            value = getattr(self, name)
            try:
                version = ipaddress.ip_address(value).version if value else net.version
            except ValueError:
                errors[name] = f"'{value}' is not an IP address."
                continue
            if version != net.version:
                errors[name] = (
                    f"{value} is not an IPv{net.version} address like the network {net}. "
                    "A pool holds one address family; for dual stack, create a pool of the "
                    "other family and attach both to the job."
                )
        return errors

    def _range_errors(self, net):
        errors = {}
        first, last = int(net.network_address), int(net.broadcast_address)
        start, end = self.interval
        if not first < start <= end < last:
            edge = "broadcast" if net.version == 4 else "last"
            errors["range_end" if first < start else "range_start"] = (
                f"The range {self.range_start}-{self.range_end} must lie inside {net} and "
                f"avoid its network ({net.network_address}) and {edge} "
                f"({net.broadcast_address}) addresses."
            )
        if self.gateway and not first < ipmath.to_int(self.gateway) < last:
            errors["gateway"] = f"The gateway must be a host address of {net}."
        problems = []
        for text in self.exclusions:
            try:
                a, b = ipmath.parse_exclusion(text, net.version, strict=True)
            except ValueError as exc:
                problems.append(
                    f"'{text}' is not an IPv{net.version} address, a-b range or CIDR ({exc})."
                )
                continue
            if not (start <= a and b <= end):
                problems.append(
                    f"'{text}' lies outside the range {self.range_start}-{self.range_end}."
                )
        if problems:
            errors["exclusions"] = problems
        return errors


class IPReservation(models.Model):
    """A fixed address for one pod (an SSH dev box that keeps its address), excluded from what
    Whereabouts hands out to everyone else."""

    pool = models.ForeignKey(IPPool, on_delete=models.PROTECT, related_name="reservations")
    address = IPIntegerField(help_text="The address as an integer, for interval queries.")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="ip_reservations")
    owner = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="ip_reservations"
    )
    job = models.ForeignKey(
        "jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="ip_reservations"
    )
    pinned = models.BooleanField(default=False, help_text="Kept when its job is deleted.")
    note = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pool", "address"]
        constraints = [
            models.UniqueConstraint(fields=["pool", "address"], name="one_reservation_per_address")
        ]

    def __str__(self):
        return f"{self.ip} in {self.pool.name}"

    @property
    def ip(self):
        return ipmath.to_str(self.address, self.pool.version)


class ReservationBlock(models.Model):
    """How many addresses of one aligned block of BLOCK_SIZE are reserved in a pool, kept by a
    database trigger on every insert and delete of a reservation (also writes that bypass the
    portal), so the search for a free address skips full blocks without reading their rows."""

    pool = models.ForeignKey(IPPool, on_delete=models.CASCADE, related_name="+")
    block = IPIntegerField(help_text="The block's first address divided by BLOCK_SIZE.")
    taken = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["pool", "block"], name="one_count_per_block")
        ]

    def __str__(self):
        return f"block {self.block} of pool {self.pool_id}: {self.taken} reserved"
