"""A researcher launches the PyTorch DDP template in headless Chromium and watches it run to
completion on the real Volcano and KWOK nodes; no test code touches a Volcano object."""

import pytest

from k8s_adapters.volcano import VCJOB_API
from tests.conftest import sign_in, worker_process
from tests.helpers import wait_for

pytestmark = pytest.mark.browser


def test_a_researcher_launches_ddp_and_watches_it_run_and_complete(
    page, live_server, worker, collector, cluster, team, templates, tmp_path
):
    # The portal's processes as deployed: the collector's watch on Volcano jobs carries the
    # phase changes; beat re-reads why a waiting job waits.
    with worker_process(tmp_path / "beat.log", beat=True, JOB_SYNC_INTERVAL="2"):
        slug, namespace = team["tenant"].slug, team["tenant"].namespace
        sign_in(page, live_server.url, "bob", "pw-bob")
        page.goto(f"{live_server.url}/tenants/{slug}/jobs/launch/")
        page.locator("tr", has_text="pytorch-ddp").get_by_role("link", name="Use").click()
        page.fill("#id_name", "ddp-browser")
        page.fill("#id_gpus", "8")
        page.fill("#id_replicas_worker", "2")
        # The simulated containers run this command: every pod ends with code 0 after 8 s.
        page.fill("#id_command", "sh -c 'sleep 8; exit 0'")
        page.click("button[name=preview]")
        preview = page.locator("[data-testid=preview]").inner_text()
        assert "kind: Job" in preview
        assert "nvidia.com/gpu: '8'" in preview
        page.click("button[name=launch]")
        page.wait_for_url(f"**/tenants/{slug}/jobs/ddp-browser/")
        # Pending while Volcano gangs the pods, then Running (the page polls every 3 s, so a
        # short Pending may pass between two polls: the events table keeps every step).
        page.wait_for_selector(
            "[data-testid=state]:text-matches('Submitting|Pending|Running')", timeout=15_000
        )

        vcjob = wait_for(
            lambda: cluster.get(VCJOB_API, "Job", "ddp-browser", namespace),
            timeout=30,
            message="the Volcano job (created once its workspace claim is bound)",
        )
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

        page.wait_for_selector("[data-testid=state]:has-text('Running')", timeout=30_000)
        assert "3 running" in page.locator("#job-status").inner_text()
        page.screenshot(path=tmp_path / "job-running.png", full_page=True)
        page.wait_for_selector("[data-testid=state]:has-text('Succeeded')", timeout=45_000)
        # Once it ended, the page reloads: no Cancel any more, and its endpoint is closed.
        page.wait_for_selector("[data-testid=endpoint-closed]", timeout=15_000)
        assert page.get_by_role("button", name="Cancel").count() == 0
        status = page.locator("#job-status").inner_text()
        assert "Volcano phase Completed" in status
        for step in ("pending → running", "running → succeeded"):
            assert step in status
        page.screenshot(path=tmp_path / "job-done.png", full_page=True)

        # Each pod's log, read through the API server (the test bed gives every simulated
        # container one line). The master ending first ends the job (its policy), and Volcano
        # then removes the workers' pods: the page says so for each replica it removed.
        page.click("[data-testid=logs-link]")
        page.wait_for_url(f"**/tenants/{slug}/jobs/ddp-browser/logs/")
        pods = page.locator("[data-testid^=pod-]")
        removed = page.locator("[data-testid^=podless-]")
        assert pods.count() + removed.count() == 3
        assert page.locator("[data-testid=pod-ddp-browser-master-0]").count() == 1
        for n in range(pods.count()):
            log = pods.nth(n).locator("[data-testid=log]")
            page.wait_for_function("pre => pre.dataset.loaded === 'true'", arg=log.element_handle())
            assert log.inner_text().strip() == (
                "simulated container on a KWOK node: no log configured for this pod"
            )
        for n in range(removed.count()):
            assert "Volcano removed it when the job ended" in removed.nth(n).inner_text()
        page.screenshot(path=tmp_path / "job-logs.png", full_page=True)


def test_the_launch_form_shows_field_errors(page, live_server, team, templates, transactional_db):
    sign_in(page, live_server.url, "bob", "pw-bob")
    page.goto(f"{live_server.url}/tenants/{team['tenant'].slug}/jobs/launch/?template=pytorch-ddp")
    page.fill("#id_name", "Bad Name")
    page.fill("#id_image", "not an image")
    page.click("button[name=launch]")
    errors = page.locator("ul.errorlist").all_inner_texts()
    assert any("lowercase letters, digits and '-'" in e for e in errors)
    assert any("is not an image reference" in e for e in errors)


def test_the_logs_page_follows_a_running_pod_by_reading_on(
    page, live_server, cluster, team, templates, launch, tmp_path
):
    """Lines the container writes while the page is open appear in it, each once; the page
    reads on from its last cursor (short requests), never holding a connection open."""
    from jobs.choices import JobState
    from tests.helpers import attach_log, cri
    from tests.jobs.conftest import job_pods, settle

    job = settle(launch(templates["single-gpu"], name="follow-me"), JobState.RUNNING)
    [pod] = job_pods(cluster, job)
    log = tmp_path / "main.log"
    log.write_text(cri("epoch 1 loss 0.91", "epoch 2 loss 0.57"))
    attach_log(cluster, pod, log)
    sign_in(page, live_server.url, "bob", "pw-bob")
    url = f"{live_server.url}/tenants/{team['tenant'].slug}/jobs/{job.name}/logs/"

    def shown():  # KWOK takes up the Logs object in a moment: until then, load the page again
        page.goto(url)
        return _shown(page, "epoch 2")

    wait_for(shown, timeout=30, message="the log on the page")
    requests = []
    page.on("request", lambda r: requests.append(r.url) if "/logs/" in r.url else None)
    with log.open("a") as more:
        more.write(cri("epoch 3 loss 0.40"))
    box = page.locator("[data-testid=log]")
    page.wait_for_function("pre => pre.textContent.includes('epoch 3')", arg=box.element_handle())
    assert box.inner_text().splitlines() == [
        "epoch 1 loss 0.91",
        "epoch 2 loss 0.57",
        "epoch 3 loss 0.40",
    ]
    assert requests  # read on in short requests, from the cursor of the last
    assert all("after=" in r for r in requests)
    page.screenshot(path=tmp_path / "job-logs-following.png", full_page=True)


def _shown(page, text):
    box = page.locator("[data-testid=log]")
    try:
        page.wait_for_function(
            "([pre, text]) => pre.textContent.includes(text)",
            arg=[box.element_handle(), text],
            timeout=3000,
        )
    except Exception:  # not yet: the next attempt loads the page again
        return False
    return True
