"""The portal's own answers where Django would give a bare one: an unknown API path (JSON, in
the API's error body), a stale form's failed CSRF check, and a POST-only address visited."""

from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.views import defaults


def _api(request):
    return request.path.startswith("/api/")


def not_found(request, exception):
    if _api(request):
        return JsonResponse({"detail": "Not found.", "code": "not_found"}, status=404)
    return defaults.page_not_found(request, exception)


def not_offered(request, *args, **kwargs):
    """A page a library brings that the portal does not offer: as one that does not exist."""
    raise Http404


def csrf_failure(request, reason=""):
    """A form sent from a page opened before the session changed (signed out and in again
    elsewhere), or without cookies: say what to do, nothing was changed. (API views check
    CSRF themselves, and answer in the API's error body.)"""
    return render(request, "csrf_failure.html", status=403)


class MethodNotAllowedPage:
    """A page's address that only takes a form's POST (retire, cancel, delete), opened as a
    link: a page that says so instead of an empty 405."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 405 and not response.content and not _api(request):
            page = render(request, "405.html", status=405)
            page["Allow"] = response.get("Allow", "")
            return page
        return response
