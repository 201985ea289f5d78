"""A researcher launches the PyTorch DDP template in headless Chromium; status flows back."""

import pytest

from k8s_adapters.volcano import VCJOB_API
from tests.conftest import sign_in, worker_process
from tests.jobs.conftest import set_phase

pytestmark = pytest.mark.browser


def test_a_researcher_launches_ddp_and_sees_it_running(
    page, live_server, worker, cluster, team, templates, tmp_path
):
    with worker_process(tmp_path / "beat.log", beat=True, JOB_SYNC_INTERVAL="2"):
        slug, namespace = team["tenant"].slug, team["tenant"].namespace
        sign_in(page, live_server.url, "bob", "pw-bob")
        page.goto(f"{live_server.url}/tenants/{slug}/jobs/launch/")
        page.locator("tr", has_text="pytorch-ddp").get_by_role("link", name="Use").click()
        page.fill("#id_name", "ddp-browser")
        page.fill("#id_gpus", "8")
        page.fill("#id_replicas_worker", "2")
        page.click("button[name=preview]")
        preview = page.locator("[data-testid=preview]").inner_text()
        assert "kind: Job" in preview
        assert "nvidia.com/gpu: '8'" in preview
        page.click("button[name=launch]")
        page.wait_for_url(f"**/tenants/{slug}/jobs/ddp-browser/")
        page.wait_for_selector("[data-testid=state]:has-text('Pending')")

        vcjob = cluster.get(VCJOB_API, "Job", "ddp-browser", namespace)
        spec = vcjob["spec"]
        assert spec["queue"] == team["tenant"].queue_name
        assert [(t["name"], t["replicas"]) for t in spec["tasks"]] == [("master", 1), ("worker", 2)]
        for task in spec["tasks"]:
            pod = task["template"]["spec"]
            assert pod["runtimeClassName"] == "nvidia"
            assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
        assert set(spec["plugins"]) == {"svc", "env"}
        assert (
            cluster.get("v1", "PersistentVolumeClaim", "ddp-browser-workspace", namespace)
            is not None
        )

        from jobs.models import Job

        set_phase(cluster, Job.objects.get(name="ddp-browser"), "Running", running=3)
        page.wait_for_selector("[data-testid=state]:has-text('Running')", timeout=12_000)
        assert "3 running" in page.locator("#job-status").inner_text()
        page.screenshot(path=tmp_path / "job.png", full_page=True)


def test_the_launch_form_shows_field_errors(page, live_server, team, templates, transactional_db):
    sign_in(page, live_server.url, "bob", "pw-bob")
    page.goto(f"{live_server.url}/tenants/{team['tenant'].slug}/jobs/launch/?template=pytorch-ddp")
    page.fill("#id_name", "Bad Name")
    page.fill("#id_image", "not an image")
    page.click("button[name=launch]")
    errors = page.locator("ul.errorlist").all_inner_texts()
    assert any("lowercase letters, digits and '-'" in e for e in errors)
    assert any("is not an image reference" in e for e in errors)
