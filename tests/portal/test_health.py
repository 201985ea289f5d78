import pytest


def test_healthz_answers_while_the_process_is_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok"


@pytest.mark.django_db
def test_readyz_reports_database_redis_and_api_server(client, cluster):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "redis": "ok", "kubernetes": "ok"}


@pytest.mark.django_db
def test_readyz_fails_and_names_redis_when_redis_is_unreachable(client, cluster, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["redis"].startswith("error:")
    assert body["database"] == "ok"
    assert body["kubernetes"] == "ok"
