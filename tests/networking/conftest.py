import uuid

import pytest

from networking import services
from tenants.models import Tenant
from tests.jobs.conftest import team, templates  # noqa: F401  (shared fixtures)
from tests.tenants.conftest import make_user


@pytest.fixture
def admin(request, db):
    """The platform admin: the `team` fixture's when the test has one."""
    if "team" in request.fixturenames:
        return request.getfixturevalue("team")["admin"]
    return make_user("netadmin", staff=True)


@pytest.fixture
def tenant(db):
    return Tenant.objects.create(slug=f"net-{uuid.uuid4().hex[:6]}", display_name="Net")


@pytest.fixture
def make_pool(admin):
    def make(**fields):
        values = {
            "name": f"p-{uuid.uuid4().hex[:6]}",
            "cidr": "10.20.0.0/24",
            "range_start": "10.20.0.10",
            "range_end": "10.20.0.200",
            "gateway": "10.20.0.1",
            "master": "bond0",
            "vlan": 100,
        }
        values.update(fields)
        return services.create_pool(actor=admin, **values)

    return make


@pytest.fixture(scope="session")
def cni_runner(cluster, tmp_path_factory):
    """The test bed's container runtime and Multus: pods bound to a node get their secondary
    addresses from the real Whereabouts (or static) IPAM plugin."""
    from django.conf import settings

    from tests import cni

    state = tmp_path_factory.mktemp("cni")
    with cni.runner(settings.KUBECONFIG, state):
        yield state
