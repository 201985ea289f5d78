"""Views a page's panel polls (htmx, every few seconds)."""

import functools
from collections.abc import Callable
from typing import Any

from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBase

LOST = {401, 403, 404}  # signed out, access removed, the object gone


def polled(view: Callable[..., HttpResponseBase]) -> Callable[..., HttpResponseBase]:
    """An answer the panel cannot show reloads the whole page instead: a redirect (the session
    ended: htmx would follow it and swap the sign-in page into the panel), a 403 or 404 (the
    job deleted, the user's access removed: htmx swaps nothing and would poll for good). The
    page then says what happened. Only for these views: forward-auth, where any 2xx lets a
    request through, never answers so."""

    @functools.wraps(view)
    def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponseBase:
        if not getattr(request, "htmx", False):
            return view(request, *args, **kwargs)
        try:
            response = view(request, *args, **kwargs)
        except (Http404, PermissionDenied):
            return _reload()
        if response.status_code in LOST or 300 <= response.status_code < 400:
            return _reload()
        return response

    return wrapper


def _reload() -> HttpResponse:
    response = HttpResponse(status=200)
    response["HX-Refresh"] = "true"
    response["Cache-Control"] = "no-store"
    return response
