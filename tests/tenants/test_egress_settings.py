"""The ranges job pods may not reach, as a platform admin writes them in the environment."""

from tests.processes import settings_refused as refusal
from tests.processes import settings_under


def test_closed_ranges_are_read_as_networks():
    read = settings_under(
        ["TENANT_EGRESS_DENY", "TENANT_EGRESS_NAMESPACES"],
        TENANT_EGRESS_DENY="169.254.169.254, 10.0.0.0/8",
        TENANT_EGRESS_NAMESPACES="object-store, models",
    )
    assert read == [["169.254.169.254/32", "10.0.0.0/8"], ["object-store", "models"]]


def test_a_range_that_is_not_one_stops_the_portal_saying_what_to_write():
    said = refusal(TENANT_EGRESS_DENY="10.0.0.1/8")  # host bits set: which range was meant?
    assert "TENANT_EGRESS_DENY holds address ranges such as 10.0.0.0/8" in said
    assert "10.0.0.1/8 has host bits set" in said


def test_settings_the_api_server_would_refuse_in_every_tenants_policy_stop_the_portal():
    """A NetworkPolicy's `except` must lie within its range: with 0.0.0.0/0 closed, every
    tenant's run failed, and new tenants got neither isolation nor a queue."""
    assert "list their halves (0.0.0.0/1 and 128.0.0.0/1)" in refusal(
        TENANT_EGRESS_DENY="0.0.0.0/0"
    )
    said = refusal(TENANT_EGRESS_NAMESPACES="object-store,Bad_Name")
    assert "TENANT_EGRESS_NAMESPACES names namespaces; not Bad_Name." in said
