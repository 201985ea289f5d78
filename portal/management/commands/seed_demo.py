"""Demo data for `make run`: users, two tenants with members, templates and IP pools (the
simulated GPU nodes come with the local control plane)."""

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand

from networking import services as network_services
from networking.models import IPPool
from tenants import services
from tenants.choices import Role
from tenants.models import Membership, Tenant

# Vision's quotas and member cap take the DDP template as it comes (3 replicas of 8 GPUs): a
# researcher's first launch runs, and a second one waits in the portal's queue.
TENANTS = [
    {
        "slug": "vision",
        "display_name": "Vision Lab",
        "gpu_quota": 32,
        "cpu_quota": 128,
        "memory_quota_gib": 1024,
        "queue_weight": 2,
        "queue_guarantee_gpus": 8,
        "member_gpu_cap": 24,
    },
    {"slug": "nlp", "display_name": "NLP Group", "gpu_quota": 8, "queue_weight": 1},
]
MEMBERS = [
    ("alice", "vision", Role.ADMIN),
    ("bob", "vision", Role.RESEARCHER),
    ("charlie", "nlp", Role.ADMIN),
]
POOLS = [
    {
        "name": "compute-a",
        "purpose": "compute",
        "cidr": "10.10.0.0/16",
        "range_start": "10.10.1.0",
        "range_end": "10.10.3.255",
        "gateway": "10.10.0.1",
        "exclusions": ["10.10.1.0-10.10.1.15"],
        "vlan": 100,
        "master": "bond0",
        "mtu": 9000,
    },
    {
        "name": "mgmt",
        "purpose": "management",
        "cidr": "10.11.0.0/24",
        "range_start": "10.11.0.100",
        "range_end": "10.11.0.200",
        "gateway": "10.11.0.1",
        "vlan": 20,
        "master": "bond0",
        "cni_type": "macvlan-bridge",
    },
]


class Command(BaseCommand):
    help = __doc__

    def add_arguments(self, parser):
        parser.add_argument("--password", required=True, help="password of every demo user")

    def handle(self, *args, password, **options):
        users = {
            name: self._user(name, password, staff=name == "admin")
            for name in ["admin", "alice", "bob", "charlie"]
        }
        for fields in TENANTS:
            if not Tenant.objects.filter(slug=fields["slug"]).exists():
                services.create_tenant(actor=users["admin"], **fields)
        for username, slug, role in MEMBERS:
            tenant = Tenant.objects.get(slug=slug)
            if not Membership.objects.filter(tenant=tenant, user=users[username]).exists():
                services.add_member(tenant, users[username], role, actor=users["admin"])
        call_command("seed_templates", stdout=self.stdout)
        self._pools(users["admin"])
        self.stdout.write(f"demo data: {len(users)} users, {len(TENANTS)} tenants")

    def _pools(self, admin):
        tenants = list(Tenant.objects.filter(slug__in=[t["slug"] for t in TENANTS]))
        for fields in POOLS:
            if not IPPool.objects.filter(name=fields["name"]).exists():
                network_services.create_pool(actor=admin, tenants=tenants, **fields)

    def _user(self, username, password, *, staff):
        user, _ = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = staff
        user.set_password(password)
        user.save()
        return user
