"""Where Django would answer bare (an unknown API path, a stale form, a POST-only address opened
as a link, the API docs' assets from a CDN), the portal answers in its own words."""

import io
import re

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from portal.parsers import JSONParser, RequestTooLarge
from tests.tenants.conftest import make_user

pytestmark = pytest.mark.django_db


def test_an_unknown_api_path_answers_json_in_the_apis_error_body(client):
    client.force_login(make_user("lost"))
    answer = client.get("/api/v1/nope/")
    assert answer.status_code == 404
    assert answer.json() == {"detail": "Not found.", "code": "not_found"}
    page = client.get("/nope/")
    assert page.status_code == 404
    assert "There is nothing here" in page.content.decode()


def test_a_stale_form_says_to_reload_and_changes_nothing():
    """A form opened before its user signed in again elsewhere carries an old CSRF token."""
    browser = Client(enforce_csrf_checks=True)
    user = make_user("stale")
    browser.force_login(user)
    answer = browser.post("/profile/", {"name": "laptop", "public_key": "ssh-ed25519 AAAA"})
    assert answer.status_code == 403
    page = answer.content.decode()
    assert "This form is out of date" in page
    assert "Nothing was changed" in page
    assert "DEBUG" not in page
    assert not user.ssh_keys.exists()
    api = browser.post("/api/v1/me/ssh-keys/", {"name": "x", "public_key": "y"})
    assert api.status_code == 403
    assert api.json()["detail"] == "CSRF Failed: CSRF token missing."


def test_an_address_that_takes_a_button_opened_as_a_link_says_so(client):
    client.force_login(make_user("curious", staff=True))
    answer = client.get("/templates/1/retire/")
    assert answer.status_code == 405
    assert answer["Allow"] == "POST"
    assert "This address takes a button, not a visit" in answer.content.decode()


def test_the_api_docs_load_their_scripts_from_the_portal_not_a_cdn(client):
    client.force_login(make_user("reader"))
    page = client.get("/api/v1/docs/").content.decode()
    assets = re.findall(r'(?:src|href)="([^"]+\.(?:js|css|png))"', page)
    assert any(a.endswith("swagger-ui-bundle.js") for a in assets), assets
    for asset in assets:
        assert asset.startswith("/static/"), asset
        assert finders.find(asset.removeprefix("/static/")), asset


@pytest.mark.django_db
def test_an_api_body_larger_than_the_limit_is_refused_before_it_is_parsed(settings):
    """DRF reads a body whole, past Django's own limit: a huge JSON document took a worker's
    memory before any check. Now it is a 413 saying so."""
    from django.contrib.auth import get_user_model
    from rest_framework.test import APIClient

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 10_000
    api = APIClient()
    api.force_login(get_user_model().objects.create_user("big"))
    spec = {"image": "x", "tasks": [{"name": "main", "gpus": 0}], "pad": "y" * 20_000}
    answer = api.post("/api/v1/templates/", {"name": "big", "spec": spec}, format="json")
    assert answer.status_code == 413
    assert "larger than 10000 bytes" in answer.json()["detail"]
    small = api.post("/api/v1/templates/", {"name": "big", "spec": {}}, format="json")
    assert small.status_code == 403  # read, and refused for what it asks
    # A server hands DRF the unread stream: the parser reads one byte past the limit, no more.
    stream = io.BytesIO(b"[" * 20_000)
    with pytest.raises(RequestTooLarge):
        JSONParser().parse(stream, "application/json", {})
    assert stream.tell() == 10_001
