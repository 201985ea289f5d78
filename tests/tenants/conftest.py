import uuid

import pytest
from django.contrib.auth import get_user_model

from k8s_adapters.tenant import QUEUE_API
from tenants.choices import Role
from tenants.models import Membership, Tenant


def make_user(username, *, staff=False):
    return get_user_model().objects.create_user(username, password="pw-" + username, is_staff=staff)


@pytest.fixture
def admin_user(db):
    return make_user("admin", staff=True)


@pytest.fixture
def people(db):
    """alice (tenant admin), bob (researcher), dave (viewer) in `vision`; charlie admin of `nlp`."""
    vision = Tenant.objects.create(
        slug=f"vision-{uuid.uuid4().hex[:6]}", display_name="Vision", gpu_quota=16
    )
    nlp = Tenant.objects.create(slug=f"nlp-{uuid.uuid4().hex[:6]}", display_name="NLP", gpu_quota=8)
    users = {name: make_user(name) for name in ["alice", "bob", "charlie", "dave"]}
    for name, tenant, role in [
        ("alice", vision, Role.ADMIN),
        ("bob", vision, Role.RESEARCHER),
        ("dave", vision, Role.VIEWER),
        ("charlie", nlp, Role.ADMIN),
    ]:
        Membership.objects.create(user=users[name], tenant=tenant, role=role)
    return {"vision": vision, "nlp": nlp, **users}


@pytest.fixture
def tenant_objects_cleanup(cluster):
    """Slugs appended here get their namespace and queue deleted after the test."""
    slugs = []
    yield slugs
    for slug in slugs:
        cluster.delete(QUEUE_API, "Queue", f"tenant-{slug}")
        cluster.delete("v1", "Namespace", f"tenant-{slug}")


@pytest.fixture
def new_slug(tenant_objects_cleanup):
    def make(prefix="t"):
        slug = f"{prefix}-{uuid.uuid4().hex[:8]}"
        tenant_objects_cleanup.append(slug)
        return slug

    return make
