"""A platform admin manages a tenant in headless Chromium; a real worker reconciles it."""

import pytest

from k8s_adapters.tenant import QUEUE_API
from tests.conftest import sign_in
from tests.helpers import wait_for
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.browser


def test_a_platform_admin_creates_and_edits_a_tenant_in_the_browser(
    page, live_server, worker, cluster, new_slug
):
    make_user("admin", staff=True)
    slug = new_slug("lab")
    sign_in(page, live_server.url, "admin", "pw-admin")
    page.goto(f"{live_server.url}/tenants/new/")
    page.fill("#id_slug", slug)
    page.fill("#id_display_name", "Robotics Lab")
    page.fill("#id_gpu_quota", "12")
    page.fill("#id_queue_weight", "3")
    page.click("text=Create tenant")
    page.wait_for_url(f"**/tenants/{slug}/")
    page.wait_for_selector("#sync .badge.ok", timeout=15_000)  # HTMX poll sees the worker's sync

    namespace = f"tenant-{slug}"
    assert cluster.get("v1", "Namespace", namespace) is not None
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", namespace)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "12"
    assert cluster.get("v1", "LimitRange", "gpu-portal", namespace) is not None
    queue = cluster.get(QUEUE_API, "Queue", namespace)
    assert queue["spec"]["capability"]["nvidia.com/gpu"] == "12"
    assert queue["spec"]["weight"] == 3

    page.click("text=Edit quota and queue")
    page.fill("#id_gpu_quota", "20")
    page.click("text=Save")
    page.wait_for_selector("text=updated")
    wait_for(
        lambda: (
            cluster.get(QUEUE_API, "Queue", namespace)["spec"]["capability"]["nvidia.com/gpu"]
            == "20"
        ),
        message="the queue to follow the new quota",
    )
    quota = cluster.get("v1", "ResourceQuota", "gpu-portal", namespace)
    assert quota["spec"]["hard"]["requests.nvidia.com/gpu"] == "20"


def test_bad_input_in_the_form_says_what_to_fix(page, live_server, transactional_db):
    make_user("admin", staff=True)
    sign_in(page, live_server.url, "admin", "pw-admin")
    page.goto(f"{live_server.url}/tenants/new/")
    page.fill("#id_slug", "Robotics_Lab")
    page.fill("#id_display_name", "Robotics")
    page.fill("#id_gpu_quota", "4")
    page.fill("#id_queue_deserved_gpus", "9")
    page.click("text=Create tenant")
    slug_error = page.locator("ul.errorlist", has_text="(a DNS-1123 label)")
    assert slug_error.count() == 1
    page.fill("#id_slug", "robotics-lab-bad")
    page.click("text=Create tenant")
    errors = page.locator("ul.errorlist").all_inner_texts()
    assert errors == ["Deserved (9) cannot exceed the GPU quota (4)."]
    assert "/tenants/new/" in page.url
