"""Bad input gets a clear, field-keyed error, and nothing is created in the database or cluster."""

import contextlib

import pytest
from django.core.cache import cache
from django.core.exceptions import ValidationError

from core.cluster import node_gpus
from k8s_adapters.nodes import SimulatedNode, build_node, build_node_status
from k8s_adapters.tenant import QUEUE_API
from tenants import services
from tenants.models import AuditEvent, Tenant
from tests.tenants.test_reconcile import gpu_pod

pytestmark = pytest.mark.django_db


def refused(admin_user, **fields):
    fields.setdefault("display_name", "Team")
    with pytest.raises(ValidationError) as caught:
        services.create_tenant(actor=admin_user, **fields)
    assert not Tenant.objects.exists()
    assert not AuditEvent.objects.exists()
    return caught.value.message_dict


@pytest.mark.parametrize(
    "slug", ["Vision", "vision_lab", "-vision", "vision-", "vi sion", "", "x" * 57, "vision.lab"]
)
def test_invalid_slugs_are_refused_with_what_to_fix(admin_user, slug):
    errors = refused(admin_user, slug=slug, gpu_quota=1)
    assert "slug" in errors
    assert any(
        "lowercase" in e or "at most" in e or "required" in e.lower() or "blank" in e
        for e in errors["slug"]
    )


@pytest.mark.parametrize("slug", ["a-ep7-b", "vision-ep12"])
def test_slugs_named_like_endpoints_are_refused(admin_user, slug):
    """Traefik's Middleware `tenant-a-ep7-b`/`ep9-c-web` would be tenant a's `ep7-b-ep9-...`."""
    assert "how the portal names endpoints" in refused(admin_user, slug=slug)["slug"][0]


def test_a_tenant_made_before_with_such_a_name_can_still_be_changed(admin_user):
    made_before = Tenant.objects.create(slug="nlp-ep1", display_name="NLP")
    services.update_tenant(made_before, actor=admin_user, gpu_quota=2)
    assert Tenant.objects.get(slug="nlp-ep1").gpu_quota == 2


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("gpu_quota", -1, "greater than or equal to 0"),
        ("gpu_quota", 10**9, "less than or equal to 100000"),
        ("queue_weight", 0, "greater than or equal to 1"),
        ("queue_weight", 70000, "less than or equal to 65535"),
        ("endpoint_max_hours", 0, "greater than or equal to 1"),
    ],
)
def test_negative_and_absurd_numbers_are_refused(admin_user, new_slug, field, value, fragment):
    errors = refused(admin_user, slug=new_slug(), **{field: value})
    assert any(fragment in e for e in errors[field])


def test_queue_shares_must_nest_inside_the_quota(admin_user, new_slug):
    errors = refused(admin_user, slug=new_slug(), gpu_quota=8, queue_deserved_gpus=10)
    assert errors["queue_deserved_gpus"] == ["Deserved (10) cannot exceed the GPU quota (8)."]
    errors = refused(
        admin_user, slug=new_slug(), gpu_quota=8, queue_deserved_gpus=4, queue_guarantee_gpus=6
    )
    assert errors["queue_guarantee_gpus"] == ["Guaranteed GPUs (6) cannot exceed deserved (4)."]
    errors = refused(admin_user, slug=new_slug(), gpu_quota=8, member_gpu_cap=9)
    assert "member_gpu_cap" in errors


def test_a_duplicate_slug_is_refused(admin_user, new_slug):
    slug = new_slug()
    Tenant.objects.create(slug=slug, display_name="First")
    with pytest.raises(ValidationError) as caught:
        services.create_tenant(actor=admin_user, slug=slug, display_name="Second")
    assert "already exists" in caught.value.message_dict["slug"][0]
    assert Tenant.objects.count() == 1


def test_a_slug_whose_namespace_belongs_to_someone_else_is_refused(admin_user, cluster, new_slug):
    slug = new_slug()
    cluster.apply_one(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": f"tenant-{slug}"}}
    )
    errors = refused(admin_user, slug=slug, gpu_quota=1)
    assert errors["slug"] == [
        f"The namespace 'tenant-{slug}' already exists in the cluster and "
        "is not managed by the portal for this tenant. Choose another slug."
    ]
    assert cluster.get(QUEUE_API, "Queue", f"tenant-{slug}") is None


@contextlib.contextmanager
def eight_more_gpus(cluster, name):
    """A simulated 8-GPU node while the block runs; the cluster's GPUs as read with it."""
    node = SimulatedNode(f"test-node-{name}", 8)
    cluster.apply_one(build_node(node))
    cluster.apply_status(build_node_status(node))
    try:
        cache.delete("node-gpu-summary")
        yield node_gpus().total
    finally:
        cluster.delete("v1", "Node", node.name)
        cache.delete("node-gpu-summary")


def test_guarantees_cannot_add_up_to_more_than_the_cluster_holds(admin_user, cluster, new_slug):
    with eight_more_gpus(cluster, new_slug()) as capacity:
        errors = refused(
            admin_user, slug=new_slug(), gpu_quota=capacity + 1, queue_guarantee_gpus=capacity + 1
        )
        assert errors["queue_guarantee_gpus"] == [
            f"Guarantees would add up to {capacity + 1} GPUs but the cluster holds {capacity}; "
            f"at most {capacity} can be guaranteed to this tenant."
        ]


def test_lowering_a_quota_below_current_usage_is_refused_showing_usage(
    admin_user, cluster, new_slug, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        tenant = services.create_tenant(
            actor=admin_user, slug=new_slug(), display_name="T", gpu_quota=8
        )
    gpu_pod(cluster, tenant.namespace, "holder", 4)
    with pytest.raises(ValidationError) as caught:
        services.update_tenant(tenant, actor=admin_user, gpu_quota=2)
    assert caught.value.message_dict["gpu_quota"] == [
        "Cannot lower below current usage: 4 GPUs are in use now."
    ]
    tenant.refresh_from_db()
    assert tenant.gpu_quota == 8
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", tenant.namespace)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "8"
    services.update_tenant(tenant, actor=admin_user, gpu_quota=5)  # still above usage: fine
    tenant.refresh_from_db()
    assert tenant.gpu_quota == 5


def test_a_guarantee_is_lowered_and_other_fields_saved_after_the_cluster_shrank(
    admin_user, cluster, new_slug
):
    """Guarantees are checked when made or raised: after a node's GPUs went away, lowering a
    guarantee (the fix) or editing another field was refused for a sum no longer met."""
    with eight_more_gpus(cluster, new_slug()) as capacity:
        tenant = services.create_tenant(
            actor=admin_user,
            slug=new_slug(),
            display_name="T",
            gpu_quota=capacity,
            queue_guarantee_gpus=capacity,
        )
    assert node_gpus().total < capacity
    services.update_tenant(tenant, actor=admin_user, display_name="Renamed")
    services.update_tenant(tenant, actor=admin_user, queue_guarantee_gpus=capacity - 4)
    assert Tenant.objects.get(pk=tenant.pk).queue_guarantee_gpus == capacity - 4
    with pytest.raises(ValidationError) as caught:  # a new guarantee is checked as before
        services.create_tenant(
            actor=admin_user,
            slug=new_slug(),
            display_name="U",
            gpu_quota=capacity,
            queue_guarantee_gpus=capacity,
        )
    assert "Guarantees would add up to" in caught.value.message_dict["queue_guarantee_gpus"][0]
