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
        response = self._send(method, path, **kwargs)
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

    def _send(self, method, path, **kwargs):
        """The answer, or PortalError for a refusal (with the server's field errors)."""
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
        return response

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

    def relaunch(self, job, queue=None) -> dict:
        """The ended job launched again with its recorded spec, as a new job (named after it);
        returns the new job, with `warnings`."""
        tenant, name = self._ref(job, queue)
        return self._call("post", f"tenants/{tenant}/jobs/{name}/relaunch/")

    def pods(self, job, queue=None) -> list[dict]:
        """The job's pods: name, task, index (replica), phase, node, containers (with exit
        codes) and their Kubernetes Events."""
        tenant, name = self._ref(job, queue)
        return self._call("get", f"tenants/{tenant}/jobs/{name}/pods/")

    def log(self, job, pod: str, queue=None, *, tail: int | None = None, container="") -> str:
        """A pod's log as text: its last `tail` lines, or the whole of it (up to the portal's
        download limit)."""
        tenant, name = self._ref(job, queue)
        params = {"tail": tail} if tail else {"download": 1}
        if container:
            params["container"] = container
        path = f"tenants/{tenant}/jobs/{name}/pods/{pod}/log/"
        return self._send("get", path, params=params).text

    def follow_log(
        self, job, pod: str, queue=None, *, tail: int | None = 100, container="", every=2.0
    ):
        """A pod's log as it grows, in pieces of text, until its container stops (or the pod
        is gone): the last `tail` lines, then each read on from where the last ended, at once
        while more is there already, else every `every` seconds."""
        tenant, name = self._ref(job, queue)
        path = f"tenants/{tenant}/jobs/{name}/pods/{pod}/log/"
        only = {"container": container} if container else {}
        params = {**({"tail": tail} if tail else {}), **only}
        waiting = None  # what was said of a container not started yet, said once
        cursor, read = None, False
        while True:
            try:
                response = self._send("get", path, params=params)
            except PortalError as error:
                if error.status == 404 and read:  # the pod went (its job ended): so did its log
                    return
                raise
            read = True
            headers = response.headers
            if headers.get("X-Log-Started") == "0":
                if response.text != waiting:
                    yield response.text
                waiting = response.text
            elif response.text:
                yield response.text
            if headers.get("X-Log-Open") != "1":
                return
            moved = headers.get("X-Log-Cursor") not in (None, cursor)
            if moved:
                cursor = headers["X-Log-Cursor"]
                params = {"after": cursor, **only}
            if not (moved and headers.get("X-Log-More") == "1"):  # else more is there: read on
                time.sleep(every)

    def extend(self, job, endpoint: str, hours: int, queue=None) -> dict:
        """Keep the endpoint open at least `hours` from now (1 to the tenant's maximum); a
        later expiry stays."""
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
