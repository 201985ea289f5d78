import pytest


def test_healthz_answers_while_the_process_is_up(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.content == b"ok"


@pytest.mark.django_db
def test_readyz_reports_database_and_redis(client):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"database": "ok", "redis": "ok"}


@pytest.mark.django_db
def test_readyz_fails_and_names_redis_when_redis_is_unreachable(client, settings, caplog):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"database": "ok", "redis": "error"}  # no hosts or users said
    assert "readiness: redis does not answer" in caplog.text  # the log has the error whole


@pytest.mark.django_db
def test_readyz_stays_ready_while_the_api_server_does_not_answer(client, monkeypatch):
    # A control-plane upgrade took every web pod out of its Service, and every job endpoint
    # (forward-auth) with them, though pages and forward-auth need only the database.
    from k8s_adapters.client import Cluster

    def down(self):
        raise ConnectionError("the API server does not answer")

    monkeypatch.setattr(Cluster, "ready", down)
    assert client.get("/readyz").status_code == 200
