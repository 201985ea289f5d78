"""Request latency for /metrics, labelled by view name (never by path: paths carry ids)."""

import time
from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from . import metrics

METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}


class RequestMetrics:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        match = request.resolver_match
        view = (match.view_name or "unnamed") if match else "unmatched"
        method = request.method if request.method in METHODS else "other"
        metrics.observe_request(
            view, str(method), response.status_code, time.perf_counter() - started
        )
        return response
