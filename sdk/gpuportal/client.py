"""The REST client. Errors carry the server's field errors."""

from __future__ import annotations

import time

import requests

from .models import VolcanoJob

TERMINAL = {"succeeded", "failed", "cancelled"}


class PortalError(Exception):
    """A refused request: `status`, the server's `detail`, and `errors` by field
    ({"field": [{"code": ..., "message": ...}]})."""

    def __init__(self, status, detail, errors=None):
        self.status, self.detail, self.errors = status, detail, errors or {}
        fields = "; ".join(
            f"{name}: {e['message']}" for name, items in self.errors.items() for e in items
        )
        super().__init__(f"{status}: {detail}" + (f" ({fields})" if fields else ""))


class JobEnded(Exception):  # noqa: N818 (said to the user as it is)
    """The job ended before it reached the state waited for; `job` is what the portal said."""

    def __init__(self, job, state):
        self.job = job
        said = f": {job['message']}" if job.get("message") else ""
        super().__init__(f"{job['name']} ended {job['state']} before it was {state}{said}")


class Client:
    def __init__(self, url: str, token: str, *, timeout: float = 30):
        self.url = url.rstrip("/")
        self.http = requests.Session()
        self.http.headers["Authorization"] = f"Bearer {token}"
        self.timeout = timeout

    def _call(self, method, path, **kwargs):
        response = self.http.request(
            method, f"{self.url}/api/v1/{path.lstrip('/')}", timeout=self.timeout, **kwargs
        )
        if response.status_code >= 400:
            try:
                body = response.json()
            except ValueError:
                body = {"detail": response.text[:500]}
            if not isinstance(body, dict):
                body = {"detail": str(body)[:500]}
            raise PortalError(response.status_code, body.get("detail", ""), body.get("errors"))
        if not response.content:
            return None
        try:
            return response.json()
        except ValueError:
            raise PortalError(
                response.status_code,
                f"the answer from {response.url} is not the portal's API (is the URL right, or "
                "is a sign-in page in the way?)",
            ) from None

    @staticmethod
    def _ref(job, queue=None):
        if isinstance(job, VolcanoJob):
            return job.queue, job.name
        if isinstance(job, dict):
            return job["tenant"], job["name"]
        if queue is None:
            raise ValueError("give the tenant (queue) with a job name")
        return queue, job

    # -- jobs -----------------------------------------------------------------------------------

    def submit(self, job: VolcanoJob) -> dict:
        """Create the job; returns its name, state and endpoints."""
        body = {"name": job.name, "spec": job.spec()}
        if job.data_volume:
            body["data_volume"] = job.data_volume
        return self._call("post", f"tenants/{job.queue}/jobs/", json=body)

    def launch(self, tenant: str, template: str, *, name: str = "", **overrides) -> dict:
        """Launch from a template with the overrides it allows (gpus, image, replicas, ...)."""
        return self._call(
            "post",
            f"tenants/{tenant}/jobs/",
            json={"template": template, "name": name, **overrides},
        )

    def get(self, job, queue=None) -> dict:
        tenant, name = self._ref(job, queue)
        return self._call("get", f"tenants/{tenant}/jobs/{name}/")

    def list(self, tenant: str, **filters) -> list[dict]:
        jobs, page = [], 1
        while True:
            body = self._call("get", f"tenants/{tenant}/jobs/", params={**filters, "page": page})
            jobs += body["results"]
            if not body.get("next"):
                return jobs
            page += 1

    def wait(
        self, job, state: str = "running", *, timeout: float = 600, queue=None, interval: float = 2
    ) -> dict:
        """Poll until the job reaches `state`; JobEnded if it ends first (a job that succeeded
        while waited for as running ran: it is returned), TimeoutError after `timeout`. A job
        in error is retried by the portal, and still waited for."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.get(job, queue)
            if current["state"] == state or (
                state == "running" and current["state"] == "succeeded"
            ):
                return current
            if current["state"] in TERMINAL:
                raise JobEnded(current, state)
            if time.monotonic() > deadline:
                raise TimeoutError(f"job is {current['state']} after {timeout}s, not {state}")
            time.sleep(interval)

    def endpoints(self, job, queue=None) -> dict[str, str]:
        return {e["name"]: e["url"] for e in self.get(job, queue)["endpoints"]}

    def events(self, job, queue=None) -> list[dict]:
        tenant, name = self._ref(job, queue)
        return self._call("get", f"tenants/{tenant}/jobs/{name}/events/")

    def cancel(self, job, queue=None) -> dict:
        tenant, name = self._ref(job, queue)
        return self._call("post", f"tenants/{tenant}/jobs/{name}/cancel/")

    def delete(self, job, queue=None, *, delete_data=False) -> None:
        tenant, name = self._ref(job, queue)
        self._call(
            "delete",
            f"tenants/{tenant}/jobs/{name}/",
            params={"delete_data": "true"} if delete_data else None,
        )

    def extend(self, job, endpoint: str, hours: int, queue=None) -> dict:
        tenant, name = self._ref(job, queue)
        return self._call(
            "post",
            f"tenants/{tenant}/jobs/{name}/endpoints/{endpoint}/extend/",
            json={"hours": hours},
        )

    def templates(self) -> list[dict]:
        """Every template the caller may launch, all pages of them."""
        found, page = [], self._call("get", "templates/")
        while True:
            found += page["results"]
            if not page.get("next"):
                return found
            page = self._call("get", page["next"].split("/api/v1/", 1)[1])
